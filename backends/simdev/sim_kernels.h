// simdev's own kernels (float32, row-major) and their shape rules: Add and
// Relu elementwise (numpy broadcasting), MatMul (numpy matmul), Conv (2-D,
// NCHW, groups, strides, pads, dilations, optional bias) through im2col into
// a caller-provided workspace. Shape functions throw kiln::sdk::Error
// (INVALID_ARGUMENT) naming the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace simdev {

using Dims = std::vector<int64_t>;

int64_t numel(const Dims& d);

/// Output dims of numpy broadcasting.
Dims broadcast_dims(const Dims& a, const Dims& b);
/// Output dims of numpy matmul (rank-1 operands promoted and removed).
Dims matmul_dims(const Dims& a, const Dims& b);

struct ConvAttrs {
  int64_t group = 1;
  std::vector<int64_t> strides{1, 1};
  std::vector<int64_t> dilations{1, 1};
  std::vector<int64_t> pads{0, 0, 0, 0};  // top, left, bottom, right
};
/// Output dims of a 2-D Conv of x [N, C, H, W] with w [M, C/group, kH, kW].
Dims conv_dims(const Dims& x, const Dims& w, const ConvAttrs& a);
/// Floats of im2col workspace conv() needs for these shapes.
size_t conv_workspace_floats(const Dims& x, const Dims& w, const ConvAttrs& a);

/// out = a + b (broadcast to `od`); out may be a or b when its dims equal od.
void add(const float* a, const Dims& ad, const float* b, const Dims& bd, float* out, const Dims& od);
/// y = max(x, 0); y may be x.
void relu(const float* x, float* y, int64_t n);
void matmul(const float* a, const Dims& ad, const float* b, const Dims& bd, float* out, const Dims& od);
/// `bias` may be NULL; `workspace` holds conv_workspace_floats floats.
void conv(const float* x, const Dims& xd, const float* w, const Dims& wd, const float* bias, float* y,
          const Dims& yd, const ConvAttrs& a, float* workspace);

}  // namespace simdev
