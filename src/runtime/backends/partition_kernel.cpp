#include "runtime/backends/partition_kernel.h"

#include <array>
#include <vector>

#include "runtime/backends/crash_report.h"
#include "runtime/device_edges.h"

namespace kiln::runtime {

std::string output_mismatch(const ir::ValueType& type, DType dtype, const Shape& shape) {
  if (!type.is_tensor()) return "";
  if (type.dtype != DType::kUndefined && type.dtype != dtype) {
    return std::string("dtype ") + dtype_name(dtype) + ", but the partition declares " + dtype_name(type.dtype);
  }
  if (!type.has_shape) return "";
  bool ok = type.dims.size() == shape.rank();
  for (size_t i = 0; ok && i < type.dims.size(); ++i) ok = !type.dims[i].known() || type.dims[i].value == shape[i];
  if (ok) return "";
  return "shape " + shape.to_string() + ", but the partition declares " + type.to_string();
}

namespace {

// Output memory from the KernelContext (the executor's plan); remembers which
// outputs the plugin produced (the first 64 in a word, the rest, only for
// partitions that wide, in more words), and the first one that broke its
// declared type.
class KernelOutputs final : public ExecOutputs {
 public:
  KernelOutputs(kernels::KernelContext& ctx, const std::vector<ir::ValueInfo>& declared, const std::string& plugin)
      : ctx_(ctx), declared_(declared), plugin_(plugin) {
    if (ctx_.num_outputs() > 64) more_.assign((ctx_.num_outputs() - 64 + 63) / 64, 0);
  }
  size_t num_outputs() const override { return ctx_.num_outputs(); }
  Result<Tensor*> allocate(size_t index, DType dtype, const Shape& shape) override {
    if (index < declared_.size()) {
      if (std::string why = output_mismatch(declared_[index].type, dtype, shape); !why.empty()) {
        Status st = internal_error(plugin_, " allocated output ", index, " '", declared_[index].name, "' with ", why);
        if (first_error_.is_ok()) first_error_ = st.clone();
        return st;
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * t, ctx_.allocate_output(index, dtype, shape));
    if (index < 64) first_ |= uint64_t{1} << index;
    else if ((index - 64) / 64 < more_.size()) more_[(index - 64) / 64] |= uint64_t{1} << ((index - 64) % 64);
    return t;
  }
  bool produced(size_t index) const {
    if (index < 64) return (first_ >> index) & 1u;
    return (index - 64) / 64 < more_.size() && (more_[(index - 64) / 64] >> ((index - 64) % 64)) & 1u;
  }
  /// The host's own finding, reported even when the plugin dropped the status.
  const Status& first_error() const { return first_error_; }

 private:
  kernels::KernelContext& ctx_;
  const std::vector<ir::ValueInfo>& declared_;
  const std::string& plugin_;
  uint64_t first_ = 0;
  std::vector<uint64_t> more_;
  Status first_error_;
};

constexpr size_t kInlineInputs = 16;

}  // namespace

PartitionKernel::PartitionKernel(std::shared_ptr<CompiledPartition> compiled, std::unique_ptr<ir::Node> node,
                                 std::vector<ir::ValueInfo> declared, std::unique_ptr<PortableFallback> fallback)
    : compiled_(std::move(compiled)),
      node_(std::move(node)),
      declared_(std::move(declared)),
      fallback_(std::move(fallback)) {
  plugin_label_ = compiled_->instance().plugin().label();
  crash_label_ = plugin_label_ + " in partition '" + node_->name + "'";
  install_crash_report();
}

Status PartitionKernel::compute(kernels::KernelContext& ctx) const {
  if (DeviceRun* run = current_device_run()) {
    if (const DevicePartitionPlan* plan = run->plan().partition(node_.get())) return compute_device(ctx, *run, *plan);
  }
  const CompiledDeviceInfo& dev = compiled_->device();
  if (dev.uses_device_memory() || dev.async()) {
    return internal_error(plugin_label_, ": partition '", node_->name,
                          "' declares device memory or async execution but runs outside a program's device plan");
  }
  const size_t n = ctx.num_inputs();
  // Views live on the stack for the common case: compute allocates nothing.
  std::array<kiln_tensor_t, kInlineInputs> inline_views;
  std::array<const kiln_tensor_t*, kInlineInputs> inline_ptrs;
  std::vector<kiln_tensor_t> heap_views;
  std::vector<const kiln_tensor_t*> heap_ptrs;
  kiln_tensor_t* views = inline_views.data();
  const kiln_tensor_t** ptrs = inline_ptrs.data();
  if (n > kInlineInputs) {
    heap_views.resize(n);
    heap_ptrs.resize(n);
    views = heap_views.data();
    ptrs = heap_ptrs.data();
  }
  for (size_t i = 0; i < n; ++i) {
    const Value* v = ctx.input_value(i);
    if (!v || !v->is_tensor()) return invalid_argument("partition input ", i, " is not a tensor at run time");
    KILN_RETURN_IF_ERROR(tensor_view(v->tensor(), &views[i]));
    ptrs[i] = &views[i];
  }
  KernelOutputs outputs(ctx, declared_, plugin_label_);
  kiln_exec_context ec;
  ec.outputs = &outputs;
  ec.pool = ctx.pool();
  ec.run_options = ctx.run_options();
  Status st;
  {
    PluginCallScope scope(crash_label_);
    st = compiled_->execute(&ec, ptrs, n);
  }
  if (!outputs.first_error().is_ok()) return outputs.first_error().clone();
  if (!st.is_ok() && ec.run_options && ec.run_options->stop_requested()) {
    // The plugin stopped because the run was cancelled: report the host's reason.
    Status why = ec.run_options->check();
    if (!why.is_ok()) return std::move(why).with_context(plugin_label_);
  }
  if (st.code() == StatusCode::kResourceExhausted && fallback_) {
    // The device ran out; the session allows portable kernels: run it there and say so.
    LoadedPlugin& plugin = compiled_->instance().plugin();
    plugin.host()->log(KILN_LOG_WARNING, "partition " + node_->name + " ran out of resources (" + st.message() +
                                             "); running it on portable kernels");
    return fallback_->run(ctx);
  }
  KILN_RETURN_IF_ERROR(std::move(st));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (ctx.wants_output(i) && !outputs.produced(i)) {
      return internal_error(compiled_->instance().plugin().label(), " returned OK without producing output ", i,
                            " of the partition");
    }
  }
  return Status::ok();
}

}  // namespace kiln::runtime
