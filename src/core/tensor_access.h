// What the runtime does to tensors that the public API does not offer:
// pointing a tensor at planned arena memory, looking at who shares its
// memory, and lowering the process-wide tensor size limit. Not installed.
#pragma once

#include <memory>
#include <utility>

#include "kiln/tensor.h"

namespace kiln::core {

struct TensorAccess {
  /// Makes `t` a borrowed view of `data` with `dtype` and `shape` (the
  /// executor does this on planned memory).
  static void reset_view(Tensor& t, DType dtype, Shape shape, void* data) {
    t.dtype_ = dtype;
    t.shape_ = std::move(shape);
    t.data_ = data;
    t.holder_.reset();
  }
  /// What keeps `t`'s memory alive (null for a borrowed view).
  static const std::shared_ptr<void>& holder(const Tensor& t) { return t.holder_; }
};

/// Sets tensor_byte_limit() process-wide (fuzzers and memory-capped
/// deployments lower it).
void set_tensor_byte_limit(size_t bytes);

}  // namespace kiln::core
