#include "runtime/device_edges.h"

#include <algorithm>

#include "core/tensor_access.h"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/partition_kernel.h"
#include "runtime/program.h"

namespace kiln::runtime {
namespace {

thread_local DeviceRun* t_device_run = nullptr;

const PartitionKernel* as_partition(const Step& step) {
  return dynamic_cast<const PartitionKernel*>(step.kernel.get());
}

bool device_aware(const PartitionKernel* k) {
  if (!k) return false;
  const CompiledDeviceInfo& d = k->compiled().device();
  return d.uses_device_memory() || d.async() || d.has_workspace();
}

BackendInstance* instance_of(const PartitionKernel* k) { return &k->compiled().instance(); }

// Which input slot `j` of a step wants: a device-aware partition's declared kind, else host.
int32_t wanted_kind(const PartitionKernel* k, size_t j) {
  return device_aware(k) ? k->compiled().device().input_kind(j) : KILN_MEMORY_HOST;
}

// A device-aware partition's plan: which of its inputs die at it (in-place
// candidates); which outputs the host reads is filled in by the caller.
DevicePartitionPlan partition_plan(const Step& step, size_t s, const PartitionKernel* k,
                                   const std::vector<int8_t>& graph_output) {
  const ir::Node& n = *step.node;
  DevicePartitionPlan pp;
  pp.step = s;
  pp.kernel = k;
  pp.input_dies.assign(n.inputs.size(), 0);
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ir::ValueId id = n.inputs[i];
    if (id == ir::kNoValue) continue;
    const bool released = std::find(step.release.begin(), step.release.end(), id) != step.release.end();
    const bool once = std::count(n.inputs.begin(), n.inputs.end(), id) == 1;
    pp.input_dies[i] = released && once && !graph_output[static_cast<size_t>(id)];
  }
  pp.output_needs_host.assign(n.outputs.size(), 0);
  return pp;
}

}  // namespace

// --- DeviceEdgePlan ---------------------------------------------------------------

std::shared_ptr<const DeviceEdgePlan> DeviceEdgePlan::build(const Program& program) {
  const std::vector<Step>& steps = program.steps();
  bool any = false;
  for (const Step& s : steps) any |= device_aware(as_partition(s));
  if (!any) return nullptr;

  const ir::Graph& g = program.graph();
  const size_t nv = g.values.size();
  auto plan = std::make_shared<DeviceEdgePlan>();
  plan->host_reads_.resize(steps.size());
  plan->placement_.assign(nv, 0);
  plan->placement_instance_.assign(nv, nullptr);
  // Producer of each value: (step, output slot).
  std::vector<std::pair<int64_t, size_t>> producer(nv, {-1, 0});
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto& outs = steps[s].node->outputs;
    for (size_t o = 0; o < outs.size(); ++o)
      if (outs[o] != ir::kNoValue) producer[static_cast<size_t>(outs[o])] = {static_cast<int64_t>(s), o};
  }
  std::vector<int8_t> graph_output(nv, 0);
  for (ir::ValueId id : g.outputs) graph_output[static_cast<size_t>(id)] = 1;
  std::vector<int8_t> released_at(nv, 0);

  for (size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    const PartitionKernel* k = as_partition(step);
    const ir::Node& n = *step.node;
    if (device_aware(k)) plan->partitions_.emplace(&n, partition_plan(step, s, k, graph_output));
    // Who reads each value, and in which kind.
    const std::vector<ir::ValueId> reads = reads_of(n, g);
    for (ir::ValueId id : reads) {
      if (id == ir::kNoValue) continue;
      const auto v = static_cast<size_t>(id);
      const int64_t ps = producer[v].first;
      const PartitionKernel* pk = ps >= 0 ? as_partition(steps[static_cast<size_t>(ps)]) : nullptr;
      const bool from_device_aware = device_aware(pk);
      // Slots of this step that read `id` directly (implicit reads have none: host).
      std::vector<int32_t> kinds;
      for (size_t j = 0; j < n.inputs.size(); ++j)
        if (n.inputs[j] == id) kinds.push_back(wanted_kind(k, j));
      if (kinds.empty()) kinds.push_back(KILN_MEMORY_HOST);
      for (int32_t kind : kinds) {
        bool host_read = kind == KILN_MEMORY_HOST;
        if (from_device_aware) {
          const size_t o = producer[v].second;
          const int32_t out_kind = pk->compiled().device().output_kind(o);
          const bool same = device_aware(k) && instance_of(k) == instance_of(pk) && kind == out_kind;
          if (!same) {
            plan->partitions_[steps[static_cast<size_t>(ps)].node].output_needs_host[o] = 1;
            host_read = true;
          }
          if (host_read && !device_aware(k)) plan->host_reads_[s].push_back(id);
        } else if (kind != KILN_MEMORY_HOST && ps >= 0) {
          // Produced on the host, read in device memory: the producer writes
          // straight into pinned memory of the reading instance (one copy in).
          plan->placement_[v] = 2;
          plan->placement_instance_[v] = instance_of(k);
        }
        // An async partition reads its host inputs after its call returns:
        // they live in run-owned memory, which the arena never reuses.
        if (device_aware(k) && k->compiled().device().async() && ps >= 0 && plan->placement_[v] == 0)
          plan->placement_[v] = 1;
      }
    }
    // An async partition's host outputs are written after its call returns.
    if (device_aware(k) && k->compiled().device().async()) {
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        const ir::ValueId id = n.outputs[o];
        if (id != ir::kNoValue && k->compiled().device().output_kind(o) == KILN_MEMORY_HOST &&
            plan->placement_[static_cast<size_t>(id)] == 0)
          plan->placement_[static_cast<size_t>(id)] = 1;
      }
    }
  }
  for (ir::ValueId id : g.outputs) {
    const auto v = static_cast<size_t>(id);
    const int64_t ps = producer[v].first;
    if (ps >= 0 && device_aware(as_partition(steps[static_cast<size_t>(ps)])))
      plan->partitions_[steps[static_cast<size_t>(ps)].node].output_needs_host[producer[v].second] = 1;
    // Graph outputs are handed to the caller: never in run-owned memory.
    plan->placement_[v] = 0;
  }
  plan->stable_.assign(nv, 0);
  for (auto& [id, t] : program.constants()) {
    plan->placement_[static_cast<size_t>(id)] = 0;
    plan->stable_[static_cast<size_t>(id)] = 1;
  }
  for (ir::ValueId id : g.inputs) plan->stable_[static_cast<size_t>(id)] = 1;
  return plan;
}

const DevicePartitionPlan* DeviceEdgePlan::partition(const ir::Node* node) const {
  auto it = partitions_.find(node);
  return it == partitions_.end() ? nullptr : &it->second;
}

int8_t DeviceEdgePlan::placement(ir::ValueId id) const {
  return id >= 0 && static_cast<size_t>(id) < placement_.size() ? placement_[static_cast<size_t>(id)] : 0;
}

BackendInstance* DeviceEdgePlan::placement_instance(ir::ValueId id) const {
  return placement(id) == 2 ? placement_instance_[static_cast<size_t>(id)] : nullptr;
}

// --- DeviceRun ----------------------------------------------------------------------

DeviceRun::DeviceRun(std::shared_ptr<const DeviceEdgePlan> plan) : plan_(std::move(plan)) {
  device_values_.resize(plan_->num_values());
  host_pending_.resize(plan_->num_values());
  placed_.assign(plan_->num_values(), 0);
}

DeviceRun::~DeviceRun() {
  (void)finish(Status::ok());
  for (auto& [key, b] : buffers_) free_buffer(b);
}

void DeviceRun::free_buffer(Buffer& b) {
  if (!b.ptr) return;
  if (b.kind == KILN_MEMORY_HOST) aligned_free_bytes(b.ptr);
  else b.instance->free(b.kind, b.ptr);
  b.ptr = nullptr;
  b.bytes = 0;
}

Result<void*> DeviceRun::get_buffer(std::tuple<int64_t, int32_t, BackendInstance*> key, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer& b = buffers_[key];
  if (b.ptr && b.bytes >= bytes) return b.ptr;
  free_buffer(b);  // too small (a larger shape): grow
  b.instance = std::get<2>(key);
  b.kind = std::get<1>(key);
  const size_t n = std::max<size_t>(bytes, 1);
  if (b.kind == KILN_MEMORY_HOST) {
    b.ptr = aligned_alloc_bytes(n);
    if (!b.ptr) return make_status(StatusCode::kOutOfRange, "out of memory (", n, " bytes of run memory)");
  } else {
    KILN_ASSIGN_OR_RETURN(b.ptr, b.instance->alloc(b.kind, 0, n));
  }
  b.bytes = n;
  return b.ptr;
}

Result<void*> DeviceRun::buffer(int64_t key, int32_t kind, BackendInstance& instance, size_t bytes) {
  return get_buffer({key, kind, kind == KILN_MEMORY_HOST ? nullptr : &instance}, bytes);
}

Result<void*> DeviceRun::workspace(size_t step, int32_t kind, BackendInstance& instance, size_t bytes) {
  return get_buffer({-static_cast<int64_t>(step + 1) * 4096, kind, kind == KILN_MEMORY_HOST ? nullptr : &instance}, bytes);
}

bool DeviceRun::place(ir::ValueId id, DType dtype, const Shape& shape, Tensor* out) {
  const int8_t where = plan_->placement(id);
  if (where == 0 || dtype == DType::kString) return false;
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  BackendInstance* inst = plan_->placement_instance(id);
  Result<void*> p = where == 2 ? buffer(id, KILN_MEMORY_HOST_PINNED, *inst, bytes)
                               : get_buffer({static_cast<int64_t>(id), KILN_MEMORY_HOST, nullptr}, bytes);
  if (!p.is_ok()) return false;  // the arena or the heap then: still correct, one copy from host memory
  core::TensorAccess::reset_view(*out, dtype, shape, *p);
  std::lock_guard<std::mutex> lock(mu_);
  placed_[static_cast<size_t>(id)] = where;
  return true;
}

kiln_fence* DeviceRun::fence(BackendInstance& instance) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& f = fences_[&instance];
  if (!f) f = std::make_unique<kiln_fence>();
  if (!labels_.count(&instance)) labels_[&instance] = instance.plugin().label();
  return f.get();
}

const DeviceValue* DeviceRun::device_value(ir::ValueId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const DeviceValue& v = device_values_[static_cast<size_t>(id)];
  return v.instance ? &v : nullptr;
}

void DeviceRun::set_device_value(ir::ValueId id, DeviceValue v) {
  std::lock_guard<std::mutex> lock(mu_);
  device_values_[static_cast<size_t>(id)] = std::move(v);
}

void DeviceRun::set_host_pending(ir::ValueId id, Pending p) {
  std::lock_guard<std::mutex> lock(mu_);
  host_pending_[static_cast<size_t>(id)] = std::move(p);
}

int32_t DeviceRun::host_kind(ir::ValueId id, const BackendInstance& instance) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || placed_[static_cast<size_t>(id)] != 2) return KILN_MEMORY_HOST;
  return plan_->placement_instance(id) == &instance ? KILN_MEMORY_HOST_PINNED : KILN_MEMORY_HOST;
}

void DeviceRun::mark_run_owned(ir::ValueId id) {
  std::lock_guard<std::mutex> lock(mu_);
  placed_[static_cast<size_t>(id)] = 3;
}

bool DeviceRun::host_memory_stable(ir::ValueId id) const {
  if (id < 0) return false;
  if (plan_->stable(id)) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return placed_[static_cast<size_t>(id)] != 0;
}

Status DeviceRun::wait(const Pending& p) {
  if (!p.fence) return Status::ok();
  Status st = p.fence->wait(p.value);
  if (st.is_ok()) return st;
  // The plugin stopped because the run was cancelled: report the host's reason.
  const RunOptions* options = run_options_.load(std::memory_order_relaxed);
  if (options && options->stop_requested()) {
    Status why = options->check();
    if (!why.is_ok()) return std::move(why).with_context(p.label);
  }
  return std::move(st).with_context(p.label);
}

Status DeviceRun::order_host_read(ir::ValueId id, BackendInstance& instance, bool call_is_async) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p = host_pending_[static_cast<size_t>(id)];
    auto it = fences_.find(&instance);
    if (!p.fence || (it != fences_.end() && it->second.get() == p.fence)) return Status::ok();  // own timeline
  }
  if (call_is_async && instance.has_stream_wait()) return instance.stream_wait(p.fence, p.value);
  return wait(p);
}

Status DeviceRun::before_step(size_t s) {
  for (ir::ValueId id : plan_->host_reads(s)) {
    Pending p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      p = host_pending_[static_cast<size_t>(id)];
    }
    KILN_RETURN_IF_ERROR(wait(p));
  }
  return Status::ok();
}

void DeviceRun::keep(std::unique_ptr<InFlight> job, Pending p) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.emplace_back(std::move(job), std::move(p));
}

Status DeviceRun::finish(Status run_status) {
  // Every value handed out on every fence, so nothing runs on after this.
  std::vector<Pending> last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [inst, f] : fences_) last.push_back(Pending{f.get(), f->last_issued(), labels_[inst]});
  }
  Status status = std::move(run_status);
  for (const Pending& p : last) {
    Status st = wait(p);
    if (status.is_ok() && !st.is_ok()) status = std::move(st);
  }
  run_options_.store(nullptr, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.clear();
  for (auto& v : device_values_) v = DeviceValue{};
  for (auto& p : host_pending_) p = Pending{};
  std::fill(placed_.begin(), placed_.end(), 0);
  // A fence that reported an error stays failed: the next run gets a new one.
  for (auto& [inst, f] : fences_)
    if (f->failed()) f = std::make_unique<kiln_fence>();
  return status;
}

void DeviceRun::start_trace(int64_t run_start_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  tracing_.store(true, std::memory_order_release);
  trace_start_ = run_start_ns;
  trace_.clear();
}

void DeviceRun::take_trace(std::vector<NodeEvent>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  tracing_.store(false, std::memory_order_release);
  if (out) {
    for (NodeEvent& e : trace_) out->push_back(std::move(e));
  }
  trace_.clear();
}

void DeviceRun::record(const std::string& plugin, const char* name, int32_t track, uint64_t begin_ns,
                       uint64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!tracing_.load(std::memory_order_relaxed)) return;
  NodeEvent e;
  e.name = name;
  e.op_type = plugin + " / " + std::to_string(track);  // the track's row in the trace
  e.domain = plugin;
  e.start_ns = static_cast<int64_t>(begin_ns) - trace_start_;
  e.duration_ns = static_cast<int64_t>(end_ns - begin_ns);
  trace_.push_back(std::move(e));
}

// --- the current thread's run ----------------------------------------------------------

DeviceRunScope::DeviceRunScope(DeviceRun* run) : previous_(t_device_run) { t_device_run = run; }
DeviceRunScope::~DeviceRunScope() { t_device_run = previous_; }
DeviceRun* current_device_run() { return t_device_run; }

}  // namespace kiln::runtime
