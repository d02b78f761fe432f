// One simulated device as an instance sees it: its memory, the pinned host
// blocks it handed out, the device copies of constants (shared by every
// compiled handle of the instance, keyed by content hash), and counters
// tests read through instance_get_property.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kiln/c/backend.h"
#include "sim_memory.h"

namespace simdev {

using ContentHash = std::array<uint64_t, 2>;

struct Counters {
  std::atomic<int64_t> copies_to_device{0};    // host or pinned -> device
  std::atomic<int64_t> copies_from_device{0};  // device -> host or pinned
  std::atomic<int64_t> copies_on_device{0};    // device -> device
  std::atomic<int64_t> copies_on_host{0};      // host/pinned -> host/pinned
  std::atomic<int64_t> copy_bytes{0};
  std::atomic<int64_t> executions{0};          // executions that ran (or were refused by fail_after)
  std::atomic<int64_t> host_operands{0};       // execute operands in host memory (read or written directly)
  std::atomic<int64_t> host_workspaces{0};     // runs whose scratch came from the host (exec_workspace)
  std::atomic<int64_t> own_workspaces{0};      // runs that had to allocate their scratch themselves
  std::atomic<int64_t> constant_uploads{0};    // constants copied to the device
  std::atomic<int64_t> constant_reuses{0};     // constants found on the device already
};

class Device {
 public:
  Device(size_t capacity, bool guard) : memory(capacity, guard) {}

  DeviceMemory memory;
  PinnedMemory pinned;
  Counters counters;

  /// A device copy of `bytes` host bytes with content `hash`: uploaded the
  /// first time, shared afterwards (each acquire needs a release). nullptr
  /// when the device has no room.
  void* acquire_constant(const ContentHash& hash, const void* host, size_t bytes);
  void release_constant(const ContentHash& hash);
  size_t num_constants() const;

  /// Traced executions queued or running. A copy that ends while one is
  /// pending is recorded in the oldest one's trace, on track 1: copies carry
  /// no execute context of their own, and an execution's context is valid
  /// until its fence, which is signalled after end_trace.
  void begin_trace(const kiln_host_api_t* api, kiln_exec_context_t* ctx);
  void end_trace(kiln_exec_context_t* ctx);
  /// Records a finished copy [begin, end) when a traced execution is pending.
  void trace_copy(const char* name, uint64_t begin_ns, uint64_t end_ns);

 private:
  struct Constant {
    void* ptr = nullptr;
    size_t bytes = 0;
    int64_t refs = 0;
  };
  mutable std::mutex mu_;
  std::map<ContentHash, Constant> constants_;
  std::mutex trace_mu_;
  std::vector<std::pair<const kiln_host_api_t*, kiln_exec_context_t*>> traced_;
};

/// A 128-bit hash of a tensor's dtype, dims and bytes (when the host offers
/// no value_constant_info).
ContentHash hash_tensor(int32_t dtype, const int64_t* dims, size_t rank, const void* data, size_t nbytes);

}  // namespace simdev
