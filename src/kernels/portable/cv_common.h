// Helpers shared by the compute-heavy kernel families (conv, conv_transpose,
// pool, normalization, quantize, matmul): the sliding-window geometry of
// Conv/Pool (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) and
// float32 staging of float16/bfloat16/double tensors for kernels whose fast
// path is float32.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace kiln::kernels {

/// The window attributes of Conv, ConvTranspose and the pools, as given.
/// Empty vectors mean "not given" (defaults are filled in by the geometry).
struct WindowAttrs {
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begins then ends
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;

  /// Reads the attributes of `node`; checks auto_pad's value and that no
  /// stride/dilation is < 1 and no pad < 0.
  static Result<WindowAttrs> parse(const ir::Node& node);
};

/// The resolved window over the spatial dims of one input.
struct WindowGeometry {
  std::vector<int64_t> in;      // input spatial dims
  std::vector<int64_t> out;     // output spatial dims
  std::vector<int64_t> kernel;  // kernel spatial dims
  std::vector<int64_t> stride, dilation, pad_begin, pad_end;

  size_t rank() const { return in.size(); }
  int64_t in_size() const;      // product of in
  int64_t out_size() const;     // product of out
  int64_t kernel_size() const;  // product of kernel
};

/// Resolves `attrs` for the spatial dims `in_spatial` and the kernel dims
/// `kernel` (from W for Conv, kernel_shape for pools). Applies auto_pad
/// (SAME_UPPER/SAME_LOWER: output = ceil(in / stride); VALID: no padding)
/// and ceil_mode (a window that would start inside the end padding is
/// dropped, as in PyTorch). Errors name `node` and the offending attribute.
Result<WindowGeometry> resolve_window(const WindowAttrs& attrs, std::span<const int64_t> in_spatial,
                                      std::span<const int64_t> kernel, const ir::Node& node);

/// Copies a float16/bfloat16/double/float32 tensor's values into float32.
std::vector<float> to_float_vector(const Tensor& t);
/// Writes float32 values into `out` (float16/bfloat16/double/float32),
/// rounding as the dtype requires.
void from_float_vector(const float* values, Tensor* out);

/// "input 1 (W)" style label used in messages.
std::string input_label(size_t index, const char* name);

}  // namespace kiln::kernels
