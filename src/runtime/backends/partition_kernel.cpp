#include "runtime/backends/partition_kernel.h"

#include <array>
#include <vector>

namespace kiln::runtime {
namespace {

// Output memory from the KernelContext (the executor's plan); remembers which
// outputs the plugin produced: the first 64 in a word, the rest (only
// partitions that wide allocate for it) in more words.
class KernelOutputs final : public ExecOutputs {
 public:
  explicit KernelOutputs(kernels::KernelContext& ctx) : ctx_(ctx) {
    if (ctx_.num_outputs() > 64) more_.assign((ctx_.num_outputs() - 64 + 63) / 64, 0);
  }
  size_t num_outputs() const override { return ctx_.num_outputs(); }
  Result<Tensor*> allocate(size_t index, DType dtype, const Shape& shape) override {
    KILN_ASSIGN_OR_RETURN(Tensor * t, ctx_.allocate_output(index, dtype, shape));
    if (index < 64) first_ |= uint64_t{1} << index;
    else if ((index - 64) / 64 < more_.size()) more_[(index - 64) / 64] |= uint64_t{1} << ((index - 64) % 64);
    return t;
  }
  bool produced(size_t index) const {
    if (index < 64) return (first_ >> index) & 1u;
    return (index - 64) / 64 < more_.size() && (more_[(index - 64) / 64] >> ((index - 64) % 64)) & 1u;
  }

 private:
  kernels::KernelContext& ctx_;
  uint64_t first_ = 0;
  std::vector<uint64_t> more_;
};

constexpr size_t kInlineInputs = 16;

}  // namespace

Status PartitionKernel::compute(kernels::KernelContext& ctx) const {
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
  KernelOutputs outputs(ctx);
  kiln_exec_context ec;
  ec.outputs = &outputs;
  ec.pool = ctx.pool();
  ec.run_options = ctx.run_options();
  Status st = compiled_->execute(&ec, ptrs, n);
  if (!st.is_ok() && ec.run_options && ec.run_options->stop_requested()) {
    // The plugin stopped because the run was cancelled: report the host's reason.
    Status why = ec.run_options->check();
    if (!why.is_ok()) return std::move(why).with_context(compiled_->instance().plugin().label());
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
