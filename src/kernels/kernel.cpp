#include "kernels/kernel.h"

namespace kiln::kernels {

Result<Tensor*> KernelContext::allocate_output(size_t i, DType dtype, const Shape& shape) {
  auto bytes = checked_tensor_bytes(dtype, shape);
  if (!bytes.ok()) return std::move(bytes).status().with_context("output " + std::to_string(i));
  if (!wants_output(i)) {
    scratch_.push_back(std::make_unique<Tensor>(Tensor::allocate(dtype, shape)));
    return scratch_.back().get();
  }
  Value& v = *outputs_[i];
  v = Value(Tensor());
  ir::ValueId id = i < node_.outputs.size() ? node_.outputs[i] : ir::kNoValue;
  KILN_RETURN_IF_ERROR(allocator_->allocate(id, dtype, shape, &v.tensor()));
  return &v.tensor();
}

}  // namespace kiln::kernels
