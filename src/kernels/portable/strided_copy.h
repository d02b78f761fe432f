// Data-movement helpers shared by the tensor-manipulation kernels
// (transform.cpp, slice.cpp, shape_ops.cpp, gather_scatter.cpp, sort_ops.cpp).
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
#include <string_view>
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

/// Reads the integers of optional input `i` (any int dtype) as int64.
/// `what` names the input in errors ("axes"). Absent input: empty vector and
/// *present = false.
Result<std::vector<int64_t>> read_ints_input(const KernelContext& ctx, size_t i, std::string_view what,
                                             bool* present = nullptr);

/// Reads one integer scalar (or 1-element tensor) from input `i`.
Result<int64_t> read_int_scalar(const KernelContext& ctx, size_t i, std::string_view what);

/// Checks inputs 0..required-1 are present tensors and that optional inputs
/// required..max_inputs-1, when present, are tensors. A model can omit any
/// input or feed a sequence where a tensor belongs; kernels must not crash.
Status check_inputs(const KernelContext& ctx, size_t required, size_t max_inputs);

/// Elements in a tensor of `shape`; an error naming the node when the count
/// overflows or exceeds kMaxElements (no real model comes close).
inline constexpr int64_t kMaxElements = int64_t{1} << 38;
Result<int64_t> checked_numel(const Shape& shape, const ir::Node& node);

/// Normalizes each axis into [0, rank) and checks they are distinct.
Result<std::vector<int64_t>> normalize_axes(std::span<const int64_t> axes, int64_t rank, const ir::Node& node);

}  // namespace kiln::kernels::layout
