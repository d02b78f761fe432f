#include "bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <utility>

#include "cli_util.h"

namespace kiln::cli {

namespace {

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);
  return buf;
}

std::string percent(double share) { return fixed(share * 100.0, 1) + "%"; }

void sort_rows(std::vector<ProfileRow>* rows) {
  std::stable_sort(rows->begin(), rows->end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.mean_ms > b.mean_ms; });
}

}  // namespace

std::string ms_text(double ms) {
  if (ms >= 100) return fixed(ms, 1);
  if (ms >= 10) return fixed(ms, 2);
  if (ms >= 1) return fixed(ms, 3);
  if (ms <= 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", ms);  // 0.0493, 0.000421: three significant digits
  return buf;
}

double nearest_rank(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<double>(sorted.size());
  // 1e-9: 0.9 * 100 is 90.00000000000001 in binary floating point.
  auto rank = static_cast<size_t>(std::max(0.0, std::ceil(q * n - 1e-9)));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

LatencyStats latency_stats(std::vector<double> samples_ms) {
  LatencyStats s;
  if (samples_ms.empty()) return s;
  std::sort(samples_ms.begin(), samples_ms.end());
  s.runs = samples_ms.size();
  s.p50_ms = nearest_rank(samples_ms, 0.5);
  s.p90_ms = nearest_rank(samples_ms, 0.9);
  s.p99_ms = nearest_rank(samples_ms, 0.99);
  s.min_ms = samples_ms.front();
  s.max_ms = samples_ms.back();
  double sum = 0;
  for (double x : samples_ms) sum += x;
  s.mean_ms = sum / static_cast<double>(samples_ms.size());
  return s;
}

ProfileSummary summarize_profiles(const std::vector<RunProfile>& runs) {
  ProfileSummary s;
  s.runs = runs.size();
  if (runs.empty()) return s;
  s.events_per_run = runs.front().events.size();

  std::map<std::pair<std::string, std::string>, size_t> node_index;
  std::map<std::string, size_t> op_index;
  std::vector<int64_t> node_ns, op_ns;
  std::vector<std::set<size_t>> op_nodes;  // distinct nodes of each op type
  int64_t total_ns = 0, nodes_ns = 0;
  for (const RunProfile& run : runs) {
    total_ns += run.total_ns;
    for (const NodeEvent& e : run.events) {
      nodes_ns += e.duration_ns;
      auto [nit, new_node] = node_index.emplace(std::make_pair(e.name, e.op_type), s.nodes.size());
      if (new_node) {
        s.nodes.push_back(ProfileRow{e.name, e.op_type, 0, 0, 0});
        node_ns.push_back(0);
      }
      node_ns[nit->second] += e.duration_ns;
      if (&run == &runs.front()) ++s.nodes[nit->second].count;

      auto [oit, new_op] = op_index.emplace(e.op_type, s.op_types.size());
      if (new_op) {
        s.op_types.push_back(ProfileRow{e.op_type, e.op_type, 0, 0, 0});
        op_ns.push_back(0);
        op_nodes.emplace_back();
      }
      op_ns[oit->second] += e.duration_ns;
      op_nodes[oit->second].insert(nit->second);
    }
  }
  const auto n = static_cast<double>(runs.size());
  s.mean_run_ms = static_cast<double>(total_ns) / n / 1e6;
  s.mean_nodes_ms = static_cast<double>(nodes_ns) / n / 1e6;
  const double denominator = s.mean_run_ms > 0 ? s.mean_run_ms : 1;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    s.nodes[i].mean_ms = static_cast<double>(node_ns[i]) / n / 1e6;
    s.nodes[i].share = s.nodes[i].mean_ms / denominator;
  }
  for (size_t i = 0; i < s.op_types.size(); ++i) {
    s.op_types[i].count = static_cast<int64_t>(op_nodes[i].size());
    s.op_types[i].mean_ms = static_cast<double>(op_ns[i]) / n / 1e6;
    s.op_types[i].share = s.op_types[i].mean_ms / denominator;
  }
  sort_rows(&s.nodes);
  sort_rows(&s.op_types);
  return s;
}

void print_profile(const ProfileSummary& s, size_t top) {
  std::ostream& out = std::cout;
  if (s.runs == 0) return;
  const double per_node_us =
      s.events_per_run > 0 ? s.between_nodes_ms() * 1e3 / static_cast<double>(s.events_per_run) : 0;
  out << "profile: " << s.runs << " profiled run" << (s.runs == 1 ? "" : "s") << ", mean " << ms_text(s.mean_run_ms)
      << " ms per run: nodes " << ms_text(s.mean_nodes_ms) << " ms, between nodes "
      << ms_text(s.between_nodes_ms()) << " ms (" << fixed(per_node_us, 3) << " us per node event,\n"
      << "         profiler included: timed runs without it are faster)\n";

  const size_t shown = std::min(top, s.nodes.size());
  out << "top " << shown << " of " << s.nodes.size() << " nodes:\n";
  std::vector<std::vector<std::string>> rows = {{"node", "op", "mean ms", "share"}};
  for (size_t i = 0; i < shown; ++i) {
    const ProfileRow& r = s.nodes[i];
    std::string name = r.name;
    if (r.count > 1) name += " (x" + std::to_string(r.count) + ")";
    rows.push_back({name, r.op_type, ms_text(r.mean_ms), percent(r.share)});
  }
  print_table(rows);

  out << "op types:\n";
  rows = {{"op", "nodes", "mean ms", "share"}};
  for (const ProfileRow& r : s.op_types)
    rows.push_back({r.op_type, std::to_string(r.count), ms_text(r.mean_ms), percent(r.share)});
  print_table(rows);
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out += buf;
        } else {
          out.push_back(c);  // UTF-8 bytes pass through
        }
    }
  }
  out += '"';
  return out;
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.10g", value);
  return buf;
}

void write_chrome_trace(std::ostream& out, const std::vector<RunProfile>& runs, std::string_view process_name,
                        const std::vector<std::pair<std::string, std::string>>& other) {
  constexpr int kPid = 1;
  constexpr uint64_t kPluginTrackBase = 1'000'000;  // above any thread number
  const int64_t base_ns = runs.empty() ? 0 : runs.front().start_ns;
  // Microseconds with nanosecond digits (ts and dur are fractional in the format).
  auto us = [](int64_t ns) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / 1e3);
    return std::string(buf);
  };

  out << "{\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << kPid << ",\"tid\":0,\"args\":{\"name\":"
      << json_string(process_name) << "}}";
  std::set<uint64_t> threads;
  for (const RunProfile& run : runs)
    for (const NodeEvent& e : run.events) threads.insert(e.thread_id);
  std::set<uint64_t> workers;
  for (const RunProfile& run : runs)
    for (const NodeEvent& e : run.worker_chunks)
      if (!threads.count(e.thread_id)) workers.insert(e.thread_id);
  for (uint64_t tid : threads) {
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << kPid << ",\"tid\":" << tid
        << ",\"args\":{\"name\":" << json_string("kiln thread " + std::to_string(tid)) << "}}";
  }
  for (uint64_t tid : workers) {
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << kPid << ",\"tid\":" << tid
        << ",\"args\":{\"name\":" << json_string("kiln pool worker " + std::to_string(tid)) << "}}";
  }
  // Plugin tracks ("plugin / N", from exec_trace_event): a row each, after the threads.
  std::map<std::string, uint64_t> plugin_tracks;
  for (const RunProfile& run : runs)
    for (const NodeEvent& e : run.plugin_events) plugin_tracks.emplace(e.op_type, 0);
  uint64_t next_track = kPluginTrackBase;
  for (auto& [label, tid] : plugin_tracks) {
    tid = next_track++;
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << kPid << ",\"tid\":" << tid
        << ",\"args\":{\"name\":" << json_string(label) << "}}";
  }
  for (size_t r = 0; r < runs.size(); ++r) {
    const RunProfile& run = runs[r];
    // The executor runs steps on the calling thread; a run's slice goes there.
    const uint64_t run_tid = run.events.empty() ? 0 : run.events.front().thread_id;
    const int64_t run_ts = run.start_ns - base_ns;
    out << ",\n{\"name\":" << json_string("run " + std::to_string(r)) << ",\"cat\":\"run\",\"ph\":\"X\",\"ts\":"
        << us(run_ts) << ",\"dur\":" << us(run.total_ns) << ",\"pid\":" << kPid << ",\"tid\":" << run_tid
        << ",\"args\":{\"run\":" << r << ",\"nodes\":" << run.events.size() << "}}";
    for (const NodeEvent& e : run.events) {
      out << ",\n{\"name\":" << json_string(e.name) << ",\"cat\":" << json_string(e.op_type)
          << ",\"ph\":\"X\",\"ts\":" << us(run_ts + e.start_ns) << ",\"dur\":" << us(e.duration_ns)
          << ",\"pid\":" << kPid << ",\"tid\":" << e.thread_id << ",\"args\":{\"op_type\":" << json_string(e.op_type)
          << ",\"domain\":" << json_string(e.domain) << ",\"run\":" << r << "}}";
    }
    // Pool workers' chunks, on the workers' tracks, in the "chunk" category.
    for (const NodeEvent& e : run.worker_chunks) {
      out << ",\n{\"name\":" << json_string(e.name) << ",\"cat\":\"chunk\",\"ph\":\"X\",\"ts\":"
          << us(run_ts + e.start_ns) << ",\"dur\":" << us(e.duration_ns) << ",\"pid\":" << kPid
          << ",\"tid\":" << e.thread_id << ",\"args\":{\"op_type\":" << json_string(e.op_type) << ",\"run\":" << r
          << "}}";
    }
    // Slices plugins recorded, on their tracks, in the "plugin" category.
    for (const NodeEvent& e : run.plugin_events) {
      out << ",\n{\"name\":" << json_string(e.name) << ",\"cat\":\"plugin\",\"ph\":\"X\",\"ts\":"
          << us(run_ts + e.start_ns) << ",\"dur\":" << us(e.duration_ns) << ",\"pid\":" << kPid
          << ",\"tid\":" << plugin_tracks[e.op_type] << ",\"args\":{\"plugin\":" << json_string(e.domain)
          << ",\"run\":" << r << "}}";
    }
  }
  out << "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{";
  for (size_t i = 0; i < other.size(); ++i) {
    out << (i ? "," : "") << json_string(other[i].first) << ":" << json_string(other[i].second);
  }
  out << "}}\n";
}

}  // namespace kiln::cli
