// Outputs on the heap: for runs outside a session's memory plan.
#pragma once

#include "kernels/kernel.h"

namespace kiln::kernels {

/// Allocates every output on its own (Tensor::allocate): constant folding at
/// load, a partition's portable fallback, gradient helpers and kernel tests,
/// which run outside the executor's arena.
class HeapAllocator final : public OutputAllocator {
 public:
  Status allocate(ir::ValueId, DType dtype, const Shape& shape, Tensor* out) override {
    *out = Tensor::allocate(dtype, shape);
    return Status::ok();
  }
};

}  // namespace kiln::kernels
