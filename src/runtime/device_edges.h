// Device-resident edges of a Program (ABI 1.1 device plugins).
//
// DeviceEdgePlan (made once per Program, after partitioning) looks at the
// partitions whose compiled handles declare non-host memory kinds, async
// execution or workspace, and decides per value: whether a device output must
// also reach the host (a portable kernel, another plugin, another memory kind
// or the caller reads it) and which host values the run must keep in memory
// of its own (pinned staging for device inputs, inputs and outputs of async
// partitions, so that the arena never reuses bytes a device still reads).
//
// DeviceRun (one per RunState, reused across runs) owns what the plan needs
// at run time: device, pinned and workspace buffers (allocated on first use,
// grown when a shape grows, never per run after that), one timeline fence per
// instance, the fence value at which each value is ready, and the in-flight
// asynchronous calls (their exec contexts stay alive until their fence).
//
// Executor hooks (executor.cpp), all no-ops for programs without such
// partitions (RunState::device is null):
//   - PlannedAllocator::allocate asks place() first;
//   - before each step, before_step(s) waits for the host copies it reads,
//     and a DeviceRunScope makes the run visible to PartitionKernel;
//   - after the steps, finish() waits for everything still in flight and
//     returns the run's first error (also what a fence reported).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "ir/graph.h"
#include "kiln/profile.h"
#include "kiln/run_options.h"
#include "kiln/tensor.h"
#include "runtime/backends/fence.h"
#include "runtime/backends/host.h"

namespace kiln::runtime {

class Program;
class PartitionKernel;
class BackendInstance;

/// What the run needs to know about one device-aware partition step.
struct DevicePartitionPlan {
  size_t step = 0;
  const PartitionKernel* kernel = nullptr;
  std::vector<int8_t> input_dies;         ///< per input: read last here (its buffer may be reused in place)
  std::vector<int8_t> output_needs_host;  ///< per output: the host reads it (staged when not host memory)
};

class DeviceEdgePlan {
 public:
  /// Null when no partition of `program` declares device memory, async
  /// execution or workspace (the 1.0 behaviour: nothing changes).
  static std::shared_ptr<const DeviceEdgePlan> build(const Program& program);

  /// The plan of the partition step whose node is `node`, or null.
  const DevicePartitionPlan* partition(const ir::Node* node) const;
  /// Values step `s` reads on the host that a device-aware partition produces.
  const std::vector<ir::ValueId>& host_reads(size_t s) const { return host_reads_[s]; }
  /// Where a host value lives during the run: 0 the arena (ordinary), else
  /// run-owned memory: 1 plain host, 2 pinned memory of placement_instance.
  int8_t placement(ir::ValueId id) const;
  BackendInstance* placement_instance(ir::ValueId id) const;
  size_t num_values() const { return placement_.size(); }
  /// Graph inputs and constants: memory that stays put until the run returns.
  bool stable(ir::ValueId id) const {
    return id >= 0 && static_cast<size_t>(id) < stable_.size() && stable_[static_cast<size_t>(id)];
  }

 private:
  std::map<const ir::Node*, DevicePartitionPlan> partitions_;
  std::vector<std::vector<ir::ValueId>> host_reads_;  // per step
  std::vector<int8_t> placement_;                     // per value
  std::vector<BackendInstance*> placement_instance_;  // per value
  std::vector<int8_t> stable_;                        // per value
};

/// A value a device-aware partition produced, as the run knows it.
struct DeviceValue {
  BackendInstance* instance = nullptr;
  int32_t kind = KILN_MEMORY_HOST;
  void* ptr = nullptr;
  Tensor meta;  ///< dtype and shape (its data is `ptr`: never read on the host unless host-visible)
};

/// A call or copy whose completion a fence value says.
struct Pending {
  kiln_fence* fence = nullptr;
  uint64_t value = 0;
  std::string label;  ///< "backend 'x'" for errors
};

/// Keeps what an asynchronous call needs until its fence (exec context,
/// views, output bookkeeping). Kernels derive from it.
class InFlight {
 public:
  virtual ~InFlight() = default;
};

class DeviceRun final {
 public:
  explicit DeviceRun(std::shared_ptr<const DeviceEdgePlan> plan);
  ~DeviceRun();  // waits for work in flight, then frees every buffer
  DeviceRun(const DeviceRun&) = delete;
  DeviceRun& operator=(const DeviceRun&) = delete;

  const DeviceEdgePlan& plan() const { return *plan_; }

  // --- executor hooks ------------------------------------------------------
  /// Run-owned memory for value `id` when the plan places it so; false: the
  /// caller allocates as usual.
  bool place(ir::ValueId id, DType dtype, const Shape& shape, Tensor* out);
  /// Waits until every value step `s` reads on the host is there.
  Status before_step(size_t s);
  /// Waits for all work in flight; the first error (run_status first) wins.
  /// Leaves the run state clean for the next run.
  Status finish(Status run_status);
  /// Starts recording plugin trace slices (relative to `run_start_ns`).
  void start_trace(int64_t run_start_ns);
  /// Moves the recorded slices out (RunProfile::plugin_events).
  void take_trace(std::vector<NodeEvent>* out);

  // --- for PartitionKernel ---------------------------------------------------
  /// This run's timeline fence for `instance`.
  kiln_fence* fence(BackendInstance& instance);
  /// A buffer of `kind` for (`key`, `instance`), at least `bytes`; reused
  /// across runs, grown when needed. Keys: a value id, or scratch_key().
  Result<void*> buffer(int64_t key, int32_t kind, BackendInstance& instance, size_t bytes);
  /// A key for scratch of partition step `step` that is no value (omitted outputs).
  static int64_t scratch_key(size_t step, size_t index) {
    return -static_cast<int64_t>(step + 1) * 4096 - 1 - static_cast<int64_t>(index);
  }
  /// The workspace of `kind` for partition step `step`.
  Result<void*> workspace(size_t step, int32_t kind, BackendInstance& instance, size_t bytes);
  /// The device copy of `id` made this run (null: none).
  const DeviceValue* device_value(ir::ValueId id) const;
  void set_device_value(ir::ValueId id, DeviceValue v);
  /// The host copy of `id` is ready once `p` is reached.
  void set_host_pending(ir::ValueId id, Pending p);
  /// The memory kind `id`'s host copy lives in for `instance` (pinned when
  /// placed in that instance's pinned memory, else host).
  int32_t host_kind(ir::ValueId id, const BackendInstance& instance) const;
  /// True when `id`'s host memory stays put until finish() (run-owned, a
  /// graph input or a constant), so a fenced copy may read it later; false:
  /// arena memory a later step may reuse (the caller waits for the copy).
  bool host_memory_stable(ir::ValueId id) const;
  /// `id`'s host copy is in run-owned memory (a partition staged it there).
  void mark_run_owned(ir::ValueId id);
  /// Makes work queued next on `instance` see `id`'s host copy: nothing on
  /// the instance's own timeline, instance_stream_wait when the plugin has
  /// it, else a host wait.
  /// `call_is_async`: a synchronous call reads during the call, so the host waits.
  Status order_host_read(ir::ValueId id, BackendInstance& instance, bool call_is_async);
  /// The run's cancel flag and deadline: a fence error while they say stop
  /// is reported as the host's own reason (cancelled or deadline exceeded).
  void set_run_options(const RunOptions* options) { run_options_.store(options, std::memory_order_relaxed); }
  /// Keeps `job` alive until `p` is reached (at the latest, finish()).
  void keep(std::unique_ptr<InFlight> job, Pending p);
  /// True while a profiled run records plugin slices.
  bool tracing() const { return tracing_.load(std::memory_order_acquire); }
  /// A slice on a plugin's track (TraceSink for one plugin's calls).
  void record(const std::string& plugin, const char* name, int32_t track, uint64_t begin_ns, uint64_t end_ns);

 private:
  struct Buffer {
    BackendInstance* instance = nullptr;
    int32_t kind = KILN_MEMORY_HOST;
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  Result<void*> get_buffer(std::tuple<int64_t, int32_t, BackendInstance*> key, size_t bytes);
  void free_buffer(Buffer& b);
  Status wait(const Pending& p);

  std::shared_ptr<const DeviceEdgePlan> plan_;
  mutable std::mutex mu_;
  // Keys: (value id, or a negative per-step key for workspaces and scratch; kind; instance).
  std::map<std::tuple<int64_t, int32_t, BackendInstance*>, Buffer> buffers_;
  std::map<BackendInstance*, std::unique_ptr<kiln_fence>> fences_;
  std::map<BackendInstance*, std::string> labels_;
  std::vector<DeviceValue> device_values_;  // per value id, this run
  std::vector<Pending> host_pending_;       // per value id, this run
  std::vector<int8_t> placed_;  // per value id, this run: 0 arena/elsewhere, 1/2 place()d (host/pinned), 3 staged
  std::vector<std::pair<std::unique_ptr<InFlight>, Pending>> in_flight_;
  std::atomic<bool> tracing_{false};
  std::atomic<const RunOptions*> run_options_{nullptr};
  int64_t trace_start_ = 0;
  std::vector<NodeEvent> trace_;
};

/// Makes `run` the current thread's device run while a step computes (the
/// kernel interface has no slot for it; PartitionKernel reads it back with
/// current_device_run()). Null: none.
class DeviceRunScope {
 public:
  explicit DeviceRunScope(DeviceRun* run);
  ~DeviceRunScope();
  DeviceRunScope(const DeviceRunScope&) = delete;
  DeviceRunScope& operator=(const DeviceRunScope&) = delete;

 private:
  DeviceRun* previous_;
};
DeviceRun* current_device_run();

}  // namespace kiln::runtime
