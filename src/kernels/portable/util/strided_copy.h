// Data-movement helpers shared by the tensor-manipulation kernels
// (transform.cpp, slice.cpp, shape_ops.cpp, gather_scatter.cpp, sort_ops.cpp).
// Their input checks live in kernels/util/kernel_args.h.
//
// Every data-movement op (Transpose, Slice, Expand, Tile, Concat, Split,
// DepthToSpace...) is one N-d strided copy: walk an iteration space `dims`,
// reading at src + sum(i_k * src_strides[k]) and writing at
// dst + sum(i_k * dst_strides[k]). strided_copy() merges dims, copies
// contiguous runs with memcpy, fills broadcast runs, tiles transposes, and
// splits the work over the thread pool. Elements are moved by their byte
// size, so one routine serves every dtype; strings are copied by assignment.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/kernel.h"

namespace kiln::kernels::layout {

/// Copies `n` elements of `dtype` from `src` to `dst` (not overlapping).
void copy_elements(DType dtype, void* dst, const void* src, int64_t n);

/// Sets `n` elements at `dst` to the one element at `value`.
void fill_elements(DType dtype, void* dst, const void* value, int64_t n);

/// Sets `n` elements at `dst` to zero (numeric 0, false, empty string).
void zero_elements(DType dtype, void* dst, int64_t n);

/// The strided copy described above. `dst` and `src` point at the element of
/// index (0, ..., 0); strides are in elements and may be zero (src only:
/// broadcast) or negative (src only: reversed slices). The three spans have
/// equal length. Destination positions must be distinct.
void strided_copy(DType dtype, void* dst, std::span<const int64_t> dst_strides, const void* src,
                  std::span<const int64_t> src_strides, std::span<const int64_t> dims, ThreadPool* pool);

/// Byte pointer arithmetic in elements of `dtype`.
inline void* advance(void* p, int64_t elems, DType dtype) {
  return static_cast<char*>(p) + elems * static_cast<int64_t>(dtype_size(dtype));
}
inline const void* advance(const void* p, int64_t elems, DType dtype) {
  return static_cast<const char*>(p) + elems * static_cast<int64_t>(dtype_size(dtype));
}

}  // namespace kiln::kernels::layout
