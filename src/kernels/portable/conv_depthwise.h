// Depthwise convolution (one input channel per group) for float32, NCHW,
// 1-D or 2-D, any kernel size, stride, dilation and padding.
#pragma once

#include <cstdint>
#include <limits>

#include "core/thread_pool.h"

namespace kiln::kernels {

/// The geometry of a depthwise convolution. 1-D is 2-D with in_h = out_h =
/// k_h = s_h = d_h = 1 and p_h = 0. Output channel oc reads input channel
/// oc / mult; padding at the end is implied by the output size.
struct DepthwiseConv {
  int64_t n = 1, c = 1, mult = 1;  // images, input channels, output channels per input channel
  int64_t in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t k_h = 1, k_w = 1, s_h = 1, s_w = 1, d_h = 1, d_w = 1, p_h = 0, p_w = 0;
};

/// What runs on the outputs after conv + bias, while they are in cache: a
/// clamp to [lo, hi] in registers (Relu, Relu6, Clip; NaN stays NaN), then
/// `apply(ctx, y, n)` when set (any other activation, in place), called once
/// for every output, on whole planes or on runs of whole rows of one plane.
struct DepthwiseEpilogue {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  void (*apply)(const void* ctx, float* y, int64_t n) = nullptr;
  const void* ctx = nullptr;
  bool clamps() const { return lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity(); }
};

/// y[img][oc] = act(bias[oc] + sum_{kh,kw} w[oc][kh][kw] * x[img][oc / mult][..])
/// with zero padding. x is [n][c][in_h][in_w], w is [c * mult][k_h][k_w],
/// bias is [c * mult] or null, y is [n][c * mult][out_h][out_w]; act is `ep`.
/// Parallel over (image, input channel) in balanced chunks, over bands of
/// output rows where channels are few (wide maps, conv_depthwise_rows.h),
/// over (image, group of channels) on small maps (conv_depthwise_packed.h).
void depthwise_conv_f32(const DepthwiseConv& p, const float* x, const float* w, const float* bias, float* y,
                        ThreadPool* pool, const DepthwiseEpilogue& ep = {});

}  // namespace kiln::kernels
