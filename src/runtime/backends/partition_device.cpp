// PartitionKernel's 1.1 path: a partition whose compiled handle declares
// device memory kinds, async execution or workspace (runtime/device_edges.h
// has the plan and the run state it uses).
//
// Inputs: a device value of this instance in the wanted kind passes through
// untouched; anything else is staged with one instance_copy from its host
// copy (pinned when the plan placed it there). Outputs of a device kind come
// from the run's buffers (or, for an in-place pair whose input dies here, the
// input's buffer) and reach the host, where the plan says the host reads them,
// with one instance_copy into pinned memory. Async handles are enqueued
// behind the instance's fence; their context lives until it is signalled.
#include <atomic>
#include <mutex>

#include "runtime/backends/crash_report.h"
#include "runtime/backends/partition_kernel.h"
#include "runtime/device_edges.h"

namespace kiln::runtime {
namespace {

// Output memory of a device-aware partition: host kinds from the KernelContext
// (the memory plan), other kinds from the run's buffers.
class DeviceOutputs final : public ExecOutputs {
 public:
  DeviceOutputs(kernels::KernelContext& ctx, const std::vector<ir::ValueInfo>& declared, const std::string& plugin,
                const CompiledDeviceInfo& dev, DeviceRun& run, BackendInstance& inst, const DevicePartitionPlan& plan,
                std::vector<std::pair<void*, size_t>> in_place_sources)
      : ctx_(ctx), declared_(declared), plugin_(plugin), dev_(dev), run_(run), inst_(inst), plan_(plan),
        sources_(std::move(in_place_sources)), tensors_(ctx.num_outputs()), produced_(ctx.num_outputs(), 0) {}

  size_t num_outputs() const override { return tensors_.size(); }
  int32_t memory_kind(size_t index) const override { return dev_.output_kind(index); }

  Result<Tensor*> allocate(size_t index, DType dtype, const Shape& shape) override {
    if (closed_.load(std::memory_order_acquire)) {
      return make_status(StatusCode::kFailedPrecondition, plugin_,
                         ": exec_allocate_output after compiled_execute_async returned (outputs must be obtained "
                         "during the call)");
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (index < declared_.size()) {
      if (std::string why = output_mismatch(declared_[index].type, dtype, shape); !why.empty()) {
        Status st = internal_error(plugin_, " allocated output ", index, " '", declared_[index].name, "' with ", why);
        if (first_error_.is_ok()) first_error_ = st.clone();
        return st;
      }
    }
    const int32_t kind = dev_.output_kind(index);
    if (kind == KILN_MEMORY_HOST) {
      KILN_ASSIGN_OR_RETURN(Tensor * t, ctx_.allocate_output(index, dtype, shape));
      produced_[index] = 1;
      return t;
    }
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
    void* p = nullptr;
    for (const auto& [in, out] : dev_.inplace) {  // the input's buffer, when it dies here
      if (out == index && in < sources_.size() && plan_.input_dies[in] && sources_[in].first &&
          sources_[in].second >= bytes) {
        p = sources_[in].first;
        sources_[in].first = nullptr;  // one output per input buffer
        break;
      }
    }
    if (!p) {
      const ir::ValueId id = ctx_.node().outputs[index];
      const int64_t key = id != ir::kNoValue ? id : DeviceRun::scratch_key(plan_.step, index);
      KILN_ASSIGN_OR_RETURN(p, run_.buffer(key, kind, inst_, bytes));
    }
    tensors_[index] = Tensor::borrow(dtype, shape, p);
    produced_[index] = 1;
    return &tensors_[index];
  }

  void close() { closed_.store(true, std::memory_order_release); }
  bool produced(size_t i) const {
    std::lock_guard<std::mutex> lock(mu_);
    return produced_[i] != 0;
  }
  const Tensor& tensor(size_t i) const { return tensors_[i]; }
  Status first_error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_.clone();
  }

 private:
  kernels::KernelContext& ctx_;
  const std::vector<ir::ValueInfo>& declared_;
  const std::string& plugin_;
  const CompiledDeviceInfo& dev_;
  DeviceRun& run_;
  BackendInstance& inst_;
  const DevicePartitionPlan& plan_;
  std::vector<std::pair<void*, size_t>> sources_;  // per input: its device buffer and bytes
  std::vector<Tensor> tensors_;                     // device outputs (views of run buffers)
  std::vector<int8_t> produced_;
  std::atomic<bool> closed_{false};
  mutable std::mutex mu_;
  Status first_error_;
};

// Everything one call needs until its fence: the exec context (which the
// plugin may use from its own thread), the views, the inputs' values.
class DeviceJob final : public InFlight, public TraceSink {
 public:
  DeviceJob(DeviceRun& run, std::string plugin) : run_(run), plugin_(std::move(plugin)) {}
  void event(const char* name, int32_t track, uint64_t begin_ns, uint64_t end_ns) override {
    run_.record(plugin_, name, track, begin_ns, end_ns);
  }
  kiln_exec_context ec;
  std::vector<kiln_tensor_t> views;
  std::vector<const kiln_tensor_t*> ptrs;
  std::vector<Value> keep;  // inputs' memory stays referenced
  std::unique_ptr<DeviceOutputs> outputs;

 private:
  DeviceRun& run_;
  std::string plugin_;
};

// Closes the hole a failed call (nothing queued) left at value `v`: only
// once the work queued before it is done, since the plugin still signals
// those values and the fence must outlive them (signalling v first would
// complete them early, and a run could free the fence under the plugin);
// and without an error, since the call's own status reports it (an error on
// the fence would fail the run even where the step falls back to portable).
void close_hole(kiln_fence* fence, uint64_t v) {
  if (v > 1) (void)fence->wait(v - 1);
  fence->signal(v);
}

// Queues `copies` on `inst` behind `fence`; a failed call closes its value's hole.
Result<uint64_t> queue_copies(BackendInstance& inst, const std::vector<kiln_copy_t>& copies, kiln_fence* fence) {
  const uint64_t v = fence->next_value();
  Status st = inst.copy(copies.data(), copies.size(), fence, v);
  if (!st.is_ok()) {
    close_hole(fence, v);
    return st;
  }
  return v;
}

kiln_copy_t make_copy(const void* src, int32_t src_kind, void* dst, int32_t dst_kind, size_t bytes) {
  kiln_copy_t c{};
  c.struct_size = sizeof(kiln_copy_t);
  c.src = src;
  c.src_kind = src_kind;
  c.dst = dst;
  c.dst_kind = dst_kind;
  c.bytes = bytes;
  return c;
}

// Where a call's inputs are, for in-place pairs, waits and the fallback.
struct StagedInputs {
  std::vector<std::pair<void*, size_t>> sources;  // per input: its device buffer and bytes
  bool unstable = false;     // a copy or the async call reads arena memory a later step may reuse
  bool device_only = false;  // an input lives on the device only (a portable fallback could not read it)
};

// Views of the inputs in the kinds the handle wants: device values of this
// instance pass through; the rest are copied in (one batched instance_copy).
Status stage_inputs(kernels::KernelContext& ctx, DeviceRun& run, const DevicePartitionPlan& plan,
                    const CompiledDeviceInfo& dev, BackendInstance& inst, kiln_fence* fence, const std::string& label,
                    DeviceJob& job, StagedInputs* out) {
  const ir::Node& node = ctx.node();
  const size_t n = ctx.num_inputs();
  job.views.resize(n);
  job.ptrs.resize(n);
  out->sources.assign(n, {nullptr, 0});
  std::vector<kiln_copy_t> copies;
  for (size_t i = 0; i < n; ++i) {
    const ir::ValueId id = i < node.inputs.size() ? node.inputs[i] : ir::kNoValue;
    const int32_t kind = dev.input_kind(i);
    kiln_tensor_t& view = job.views[i];
    job.ptrs[i] = &view;
    if (kind != KILN_MEMORY_HOST && id != ir::kNoValue) {
      const DeviceValue* dv = run.device_value(id);
      if (dv && dv->instance == &inst && dv->kind == kind) {  // on this device already: no copy
        KILN_RETURN_IF_ERROR(tensor_view(dv->meta, &view));
        view.memory_kind = kind;
        out->sources[i] = {dv->ptr, dv->meta.nbytes()};
        out->device_only = true;
        continue;
      }
    }
    const Value* v = ctx.input_value(i);
    if (!v || !v->is_tensor()) return invalid_argument("partition input ", i, " is not a tensor at run time");
    const Tensor& t = v->tensor();
    if (id != ir::kNoValue) KILN_RETURN_IF_ERROR(run.order_host_read(id, inst, dev.async()));
    KILN_RETURN_IF_ERROR(tensor_view(t, &view));
    job.keep.push_back(*v);
    if (kind == KILN_MEMORY_HOST) {
      out->unstable |= dev.async() && !run.host_memory_stable(id);  // the async call reads it later
      continue;
    }
    const int64_t key = id != ir::kNoValue ? id : DeviceRun::scratch_key(plan.step, 2048 + i);
    KILN_ASSIGN_OR_RETURN(void* dst, run.buffer(key, kind, inst, t.nbytes()));
    const int32_t src_kind = id != ir::kNoValue ? run.host_kind(id, inst) : KILN_MEMORY_HOST;
    out->unstable |= !run.host_memory_stable(id);
    copies.push_back(make_copy(t.raw_data(), src_kind, dst, kind, t.nbytes()));
    view.data = dst;
    view.memory_kind = kind;
    out->sources[i] = {dst, t.nbytes()};
    if (id != ir::kNoValue) run.set_device_value(id, DeviceValue{&inst, kind, dst, Tensor::borrow(t.dtype(), t.shape(), dst)});
  }
  if (copies.empty()) return Status::ok();
  KILN_ASSIGN_OR_RETURN(uint64_t v, queue_copies(inst, copies, fence));
  if (!out->unstable) return Status::ok();
  Status waited = fence->wait(v);  // e.g. a view a portable kernel made of arena memory: let the copy finish first
  return waited.is_ok() ? std::move(waited) : std::move(waited).with_context(label);
}

// Publishes the outputs: device values for this instance's partitions, and
// host copies (one batched instance_copy into pinned memory) where the plan
// says the host reads them; each with the fence value at which it is ready.
Status publish_outputs(kernels::KernelContext& ctx, DeviceRun& run, const DevicePartitionPlan& plan,
                       const CompiledDeviceInfo& dev, BackendInstance& inst, kiln_fence* fence,
                       const DeviceOutputs& outs, const Pending& done) {
  const ir::Node& node = ctx.node();
  std::vector<kiln_copy_t> out_copies;
  std::vector<ir::ValueId> staged;
  for (size_t o = 0; o < ctx.num_outputs(); ++o) {
    if (!ctx.wants_output(o)) continue;
    if (!outs.produced(o)) return internal_error(done.label, " returned OK without producing output ", o, " of the partition");
    const ir::ValueId id = node.outputs[o];
    const int32_t kind = dev.output_kind(o);
    if (kind == KILN_MEMORY_HOST) {  // in the memory plan already; async: ready at the call's fence
      if (done.fence) run.set_host_pending(id, done);
      continue;
    }
    const Tensor& t = outs.tensor(o);
    void* data = const_cast<void*>(t.raw_data());
    run.set_device_value(id, DeviceValue{&inst, kind, data, t});
    if (!plan.output_needs_host[o]) {
      ctx.set_output_value(o, Value(t));  // device memory: only this instance's partitions read it
    } else if (kind == KILN_MEMORY_HOST_PINNED || kind == KILN_MEMORY_DEVICE_HOST_VISIBLE) {
      ctx.set_output_value(o, Value(t));  // the host reads it where it is, after the call's fence
      run.mark_run_owned(id);
      if (done.fence) run.set_host_pending(id, done);
    } else {
      KILN_ASSIGN_OR_RETURN(void* pinned, run.buffer(id, KILN_MEMORY_HOST_PINNED, inst, t.nbytes()));
      out_copies.push_back(make_copy(data, kind, pinned, KILN_MEMORY_HOST_PINNED, t.nbytes()));
      ctx.set_output_value(o, Value(Tensor::borrow(t.dtype(), t.shape(), pinned)));
      run.mark_run_owned(id);
      staged.push_back(id);
    }
  }
  if (out_copies.empty()) return Status::ok();
  KILN_ASSIGN_OR_RETURN(uint64_t v, queue_copies(inst, out_copies, fence));
  for (ir::ValueId id : staged) run.set_host_pending(id, Pending{fence, v, done.label});
  return Status::ok();
}


}  // namespace

Status PartitionKernel::compute_device(kernels::KernelContext& ctx, DeviceRun& run,
                                       const DevicePartitionPlan& plan) const {
  const CompiledDeviceInfo& dev = compiled_->device();
  BackendInstance& inst = compiled_->instance();
  kiln_fence* fence = run.fence(inst);
  run.set_run_options(ctx.run_options());
  auto job = std::make_unique<DeviceJob>(run, inst.name());
  StagedInputs in;
  KILN_RETURN_IF_ERROR(stage_inputs(ctx, run, plan, dev, inst, fence, plugin_label_, *job, &in));

  kiln_exec_context& ec = job->ec;
  for (int32_t k = 0; k < KILN_MEMORY_KIND_COUNT; ++k) {
    const uint64_t bytes = dev.workspace_bytes[static_cast<size_t>(k)];
    if (bytes == 0) continue;
    KILN_ASSIGN_OR_RETURN(ec.workspace[k], run.workspace(plan.step, k, inst, static_cast<size_t>(bytes)));
    ec.workspace_bytes[k] = static_cast<size_t>(bytes);
  }
  job->outputs = std::make_unique<DeviceOutputs>(ctx, declared_, plugin_label_, dev, run, inst, plan, in.sources);
  DeviceOutputs& outs = *job->outputs;
  ec.outputs = &outs;
  ec.pool = dev.async() ? nullptr : ctx.pool();  // the pool is not for a plugin's own threads
  ec.run_options = ctx.run_options();
  ec.trace = run.tracing() ? job.get() : nullptr;

  Status st;
  Pending done{nullptr, 0, plugin_label_};
  {
    PluginCallScope scope(crash_label_);
    const size_t n = job->ptrs.size();
    if (dev.async()) {
      const uint64_t v = fence->next_value();
      st = compiled_->execute_async(&ec, job->ptrs.data(), n, fence, v);
      if (st.is_ok()) done = Pending{fence, v, plugin_label_};
      else close_hole(fence, v);  // nothing was queued
    } else {
      st = compiled_->execute(&ec, job->ptrs.data(), n);
    }
  }
  outs.close();
  if (done.fence) run.keep(std::move(job), done);  // alive until the fence; `outs` with it
  if (done.fence && in.unstable) {
    // A host input in arena memory (not run-owned): later steps may reuse its
    // bytes, so this call must be done before the step returns.
    Status waited = fence->wait(done.value);
    if (!waited.is_ok()) st = std::move(waited).with_context(plugin_label_);
  }

  if (Status e = outs.first_error(); !e.is_ok()) return e;
  if (!st.is_ok() && ec.run_options && ec.run_options->stop_requested()) {
    Status why = ec.run_options->check();
    if (!why.is_ok()) return std::move(why).with_context(plugin_label_);
  }
  if (st.code() == StatusCode::kResourceExhausted && fallback_ && !in.device_only) {
    inst.plugin().host()->log(KILN_LOG_WARNING, "partition " + node_->name + " ran out of resources (" +
                                                    st.message() + "); running it on portable kernels");
    return fallback_->run(ctx);
  }
  KILN_RETURN_IF_ERROR(std::move(st));
  return publish_outputs(ctx, run, plan, dev, inst, fence, outs, done);
}

}  // namespace kiln::runtime
