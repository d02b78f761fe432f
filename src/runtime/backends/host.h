// The host side of the backend ABI: the kiln_host_api_t table Kiln hands to
// plugins, the objects behind its opaque handles (statuses, the per-plugin
// host context with its tracking allocator, the execute context), and
// conversions between kiln::Status and kiln_status_t.
//
// Every function in the table is noexcept: nothing throws into a plugin.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "kiln/c/backend.h"
#include "kiln/result.h"
#include "kiln/run_options.h"
#include "kiln/tensor.h"

namespace kiln::runtime {

/// Where output memory comes from during compiled_execute (the executor's
/// KernelContext, or the heap for check-backend).
class ExecOutputs {
 public:
  virtual ~ExecOutputs() = default;
  virtual size_t num_outputs() const = 0;
  /// Allocates output `index`; the returned tensor lives until execute returns.
  virtual Result<Tensor*> allocate(size_t index, DType dtype, const Shape& shape) = 0;
  /// The kiln_memory_kind_t of the memory allocate(index) hands out (\since
  /// 1.1: device outputs of a device plugin's partition); host by default.
  virtual int32_t memory_kind(size_t /*index*/) const { return KILN_MEMORY_HOST; }
};

/// Where a plugin's trace slices go (exec_trace_event) during a traced run.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  /// A slice `name` on the plugin's track `track`, host clock (steady_clock
  /// ns). Called from any thread, also after execute returned (async work).
  virtual void event(const char* name, int32_t track, uint64_t begin_ns, uint64_t end_ns) = 0;
};

/// The host's trace clock (kiln_host_api_t.trace_now_ns): CLOCK_MONOTONIC ns.
uint64_t trace_now_ns();

/// Allocation counts of one host context (for leak checks).
struct HostStats {
  int64_t live_blocks = 0;    ///< alloc'd and not yet freed
  int64_t live_bytes = 0;
  int64_t total_blocks = 0;   ///< every alloc ever
  int64_t foreign_frees = 0;  ///< free() of memory this host did not allocate (ignored)
  int64_t double_frees = 0;   ///< free() of memory already freed (ignored)
};

using LogSink = std::function<void(kiln_log_level_t, const std::string& plugin, const std::string& message)>;

/// The log level from KILN_LOG_LEVEL (debug|info|warning|error), default warning.
kiln_log_level_t default_log_level();

/// The table every plugin gets (one static table for the process).
const kiln_host_api_t* host_api();

/// Takes ownership of a status a plugin returned: OK for NULL, else a Status
/// with the same code and message prefixed by `context` (may be empty).
/// Invalid pointers (not made by status_create) become kInternal errors.
Status take_status(kiln_status_t* status, std::string_view context = {});

/// Frees host-allocated memory (what the table's `free` does).
void host_free(kiln_host* host, void* ptr);
/// Frees every block `host` still has (after the plugin that owned them is
/// gone: its leaks end with it). Returns how many there were.
size_t host_free_all(kiln_host* host);
/// The size of a live block of `host`'s allocator, or 0 when `ptr` is not
/// one (NULL, freed, or memory from elsewhere). Never reads `ptr`.
size_t host_block_size(kiln_host* host, const void* ptr);

/// A C status for a Status (NULL when OK).
kiln_status_t* make_c_status(const Status& status);

/// dtype conversions; kUndefined / KILN_DTYPE_UNDEFINED when out of range.
DType dtype_from_c(int32_t dtype);
kiln_dtype_t dtype_to_c(DType dtype);

/// Fills a view of `t` in host memory. `capacity` is the struct's size as
/// its owner compiled it (a 1.0 plugin's view is shorter): members past it
/// are not written, and struct_size is set to the smaller of the two. String
/// tensors cannot be viewed.
Status tensor_view(const Tensor& t, kiln_tensor_t* out, size_t capacity = sizeof(kiln_tensor_t));

}  // namespace kiln::runtime

/// One plugin's host context: its name for logs and its allocator counts.
struct kiln_host {
  std::string name;  ///< the plugin's name once known, its path before
  kiln_log_level_t log_level = KILN_LOG_WARNING;
  kiln::runtime::LogSink sink;  ///< null: stderr
  std::atomic<int64_t> live_blocks{0};
  std::atomic<int64_t> live_bytes{0};
  std::atomic<int64_t> total_blocks{0};
  std::atomic<int64_t> foreign_frees{0};
  std::atomic<int64_t> double_frees{0};
  // Live blocks by address (so frees of foreign or freed memory are detected
  // without reading it), and the last frees, to tell double frees apart.
  std::mutex blocks_mu;
  std::unordered_map<const void*, size_t> blocks;
  std::vector<const void*> recent_frees;  // ring of kRecentFrees
  size_t recent_next = 0;

  kiln_host() = default;
  kiln_host(const kiln_host&) = delete;
  kiln_host& operator=(const kiln_host&) = delete;

  kiln::runtime::HostStats stats() const {
    return {live_blocks.load(), live_bytes.load(), total_blocks.load(), foreign_frees.load(), double_frees.load()};
  }
  void log(kiln_log_level_t level, const std::string& message);
};

/// One compiled_execute call (or compiled_execute_async, until its fence).
struct kiln_exec_context {
  kiln::runtime::ExecOutputs* outputs = nullptr;
  kiln::ThreadPool* pool = nullptr;
  const kiln::RunOptions* run_options = nullptr;  // the run's cancel flag and deadline (null: none)
  // \since 1.1: the declared scratch per memory kind (exec_workspace).
  void* workspace[KILN_MEMORY_KIND_COUNT] = {};
  size_t workspace_bytes[KILN_MEMORY_KIND_COUNT] = {};
  kiln::runtime::TraceSink* trace = nullptr;  // null: the run is not traced
};
