// The vocabulary kernels use to read their arguments and report bad ones:
// inputs (presence, kind, integer contents), axes, output sizes, and the
// standard errors. Typed attribute reads are KernelInit methods (kernel.h).
//
// Messages name the input and what was expected, never the node: the program
// loader and the executor prefix every kernel error with "node Op 'name': ".
//
// One status code per kind of problem:
//   - a dtype the kernel does not implement: kUnimplemented, always through
//     unsupported_dtype() ("input 0 has unsupported dtype float16");
//   - an input or attribute that breaks the op's contract (a shape that does
//     not fit, indices that are not integers, an attribute of the wrong type,
//     a value out of range): kInvalidArgument, saying what was expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel.h"

namespace kiln::kernels {

// ---- inputs ---------------------------------------------------------------

/// Checks inputs 0..required-1 are present tensors and that optional inputs
/// required..max_inputs-1, when present, are tensors. A model can omit any
/// input or feed a sequence where a tensor belongs; kernels must not crash.
Status check_inputs(const KernelContext& ctx, size_t required, size_t max_inputs);

/// "input 1 (W)": how messages name an input that has a name in the spec.
std::string input_label(size_t index, const char* name);

/// Input i as a tensor, or an error saying it is missing or not a tensor.
Result<const Tensor*> tensor_input(const KernelContext& ctx, size_t i);

/// Reads the integers of optional 1-D input `i` (any int dtype) as int64.
/// `what` names the input in errors ("axes"). Absent input: empty vector and
/// *present = false.
Result<std::vector<int64_t>> read_ints_input(const KernelContext& ctx, size_t i, std::string_view what,
                                             bool* present = nullptr);

/// Reads one integer scalar (or 1-element tensor) from input `i`.
Result<int64_t> read_int_scalar(const KernelContext& ctx, size_t i, std::string_view what);

/// Reads an integer (or bool) tensor of any int dtype into int64 values.
Result<std::vector<int64_t>> to_int64_vector(const Tensor& t);
/// Reads a float tensor of any float dtype (or int) into double values.
Result<std::vector<double>> to_double_vector(const Tensor& t);

// ---- dtypes ---------------------------------------------------------------

/// The error for input `input` having a dtype the kernel does not implement
/// (kUnimplemented): "input 0 has unsupported dtype float16".
Status unsupported_dtype(size_t input, DType t);

/// Checks that inputs ia and ib (tensors a and b) have the same dtype.
Status check_same_dtype(const Tensor& a, size_t ia, const Tensor& b, size_t ib);

// ---- axes and sizes -------------------------------------------------------

/// Maps a possibly negative axis into [0, rank). Strict: a scalar has no
/// axis; callers whose axis may equal the rank (Unsqueeze, a new stacking
/// axis) pass rank + 1.
Result<int64_t> normalize_axis(int64_t axis, int64_t rank);

/// Normalizes each axis into [0, rank) and checks they are distinct.
Result<std::vector<int64_t>> normalize_axes(std::span<const int64_t> axes, int64_t rank);

/// Elements in a tensor of `shape`; an error when a dim is negative or the
/// count overflows or exceeds kMaxElements (no real model comes close).
inline constexpr int64_t kMaxElements = int64_t{1} << 38;
Result<int64_t> checked_numel(const Shape& shape);

}  // namespace kiln::kernels
