// RunProfile: what one Session::run spent where, node by node. Filled when a
// profile is passed to Session::run; costs two clock reads per node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct NodeEvent {
  std::string name;     ///< node name (or op type when unnamed)
  std::string op_type;  ///< op type; "Partition" for a backend partition
  std::string domain;
  int64_t start_ns = 0;  ///< since the start of the run
  int64_t duration_ns = 0;
  uint64_t thread_id = 0;  ///< a small stable number for the OS thread that ran it
};

struct RunProfile {
  std::vector<NodeEvent> events;  ///< in execution order
  /// Chunks that pool worker threads ran for the nodes in `events` (same
  /// name and times; thread_id names the worker), in no particular order.
  /// Traces show them on the workers' own tracks; they are not extra nodes.
  std::vector<NodeEvent> worker_chunks;
  /// Slices device plugins recorded from inside their calls
  /// (exec_trace_event): name as given, op_type the track ("plugin / N", one
  /// trace row each), domain the plugin; thread_id 0. Same time base.
  std::vector<NodeEvent> plugin_events;
  int64_t start_ns = 0;           ///< steady-clock time of the run's start
  int64_t total_ns = 0;
};

}  // namespace kiln
