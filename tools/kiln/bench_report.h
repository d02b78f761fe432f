// What `kiln bench` reports: latency statistics, per-node and per-op-type
// profile summaries, and Chrome trace-event JSON (Perfetto, chrome://tracing).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/profile.h"

namespace kiln::cli {

/// Latency statistics of a set of timed runs, in milliseconds. Quantiles are
/// nearest-rank: p50 of {1, 2, 3, 4} is 2 (the same rule as bench/peers).
struct LatencyStats {
  size_t runs = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, mean_ms = 0, min_ms = 0, max_ms = 0;
};
/// Computes the statistics of `samples_ms` (any order; empty gives zeros).
LatencyStats latency_stats(std::vector<double> samples_ms);
/// The nearest-rank quantile q in [0, 1] of sorted samples (0 when empty).
double nearest_rank(const std::vector<double>& sorted, double q);

/// One row of a profile table: a node, or an op type with all its nodes.
struct ProfileRow {
  std::string name;     ///< node name (node rows) or op type (op-type rows)
  std::string op_type;
  int64_t count = 0;    ///< events per run: 1 for a node; nodes of the type for an op type
  double mean_ms = 0;   ///< mean time per run
  double share = 0;     ///< of the mean run time, in [0, 1]
};

/// Node and op-type times over several profiled runs of one session.
struct ProfileSummary {
  size_t runs = 0;
  size_t events_per_run = 0;  ///< node events of the first run
  double mean_run_ms = 0;     ///< mean RunProfile::total_ns
  double mean_nodes_ms = 0;   ///< mean sum of node durations per run
  std::vector<ProfileRow> nodes;     ///< by mean_ms, largest first
  std::vector<ProfileRow> op_types;  ///< by mean_ms, largest first

  /// Time per run outside node compute (dispatch, bookkeeping), in ms.
  double between_nodes_ms() const { return mean_run_ms > mean_nodes_ms ? mean_run_ms - mean_nodes_ms : 0; }
};
/// Aggregates runs. Nodes are keyed by (name, op type) in first-seen order,
/// so a node that runs several times in a run adds up.
ProfileSummary summarize_profiles(const std::vector<RunProfile>& runs);

/// Prints the per-node (top `top` rows) and per-op-type tables on stdout.
void print_profile(const ProfileSummary& summary, size_t top);

/// Writes `runs` as Chrome trace-event JSON: {"traceEvents": [...],
/// "displayTimeUnit": "ms", "otherData": {...}}. Each run is a complete
/// ("ph": "X") slice named "run <i>" (category "run") on the thread that ran
/// its first node, enclosing one slice per node event (name = node name,
/// category = op type) on the thread that ran it; times in microseconds
/// since the start of the first run. Metadata events name the process and
/// the threads. `other` pairs go to otherData as strings.
void write_chrome_trace(std::ostream& out, const std::vector<RunProfile>& runs, std::string_view process_name,
                        const std::vector<std::pair<std::string, std::string>>& other);

/// Milliseconds for tables: 4 significant digits from 1 ms up, 3 below
/// ("123.4", "12.35", "1.234", "0.0493", "0.000421").
std::string ms_text(double ms);

/// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);
/// A finite number as JSON (NaN and infinities become null).
std::string json_number(double value);

}  // namespace kiln::cli
