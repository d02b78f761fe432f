// Depthwise convolution on small maps with the channels in the vector lanes:
// the interface between the driver (conv_depthwise_packed.cpp) and the
// register kernels compiled once per ISA (cpu/x86/phase_rows_{avx512,avx2}.cpp).
//
// A group of up to kLanes channels is transposed into a zero-padded
// [row][column][lane] buffer, so that a tap of one output pixel is one
// vector multiply-add over all the group's channels whatever the map's
// width (7x7 and 14x14 maps fill every lane), and the result is transposed
// back. Transposes run in registers, kLanes x kLanes at a time.
#pragma once

#include <cstdint>

#include "kernels/portable/conv_depthwise.h"

namespace kiln::kernels {

/// One group of channels of one image (depth multiplier 1).
struct DwPackedGroup {
  const float* x = nullptr;  // the group's first input plane; planes in_h * in_w apart
  int64_t ch = 0;            // channels in the group, 1..lanes
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t k_h = 1, k_w = 1, s_h = 1, s_w = 1, p_t = 0, p_l = 0;
  int64_t hp = 0, wp = 0;     // the padded map held: hp = (out_h - 1) s_h + k_h, wp likewise
  const float* w = nullptr;   // the group's weights, [ch][k_h * k_w]
  const float* bias = nullptr;  // the group's biases, or null
  float lo = 0.f, hi = 0.f;   // clamp, when `clamp`; NaN stays NaN
  bool clamp = false;
  float* y = nullptr;         // the group's first output plane; planes out_h * out_w apart
  float* packed = nullptr;    // hp * wp * lanes floats; zero outside the input (the caller zeroes it once)
  float* wt = nullptr;        // k_h * k_w * lanes floats of scratch: the weights transposed
  float* out = nullptr;       // out_h * out_w * lanes floats of scratch: the outputs, packed
};

using DwPackedFn = void (*)(const DwPackedGroup& g);

/// One ISA's kernel and its lane count.
struct DwPackedKernel {
  DwPackedFn fn = nullptr;
  int64_t lanes = 0;
};

#if defined(__x86_64__) || defined(__i386__)
DwPackedKernel depthwise_packed_kernel_avx512();
DwPackedKernel depthwise_packed_kernel_avx2();
#endif

/// Whether depthwise_packed_f32 takes p on this CPU: depth multiplier 1,
/// dilation 1, maps up to kDwPackedMaxWidth outputs wide.
bool depthwise_packed_applies(const DepthwiseConv& p);

/// depthwise_conv_f32 for the shapes depthwise_packed_applies accepts,
/// split over (image, group of channels).
void depthwise_packed_f32(const DepthwiseConv& p, const float* x, const float* w, const float* bias, float* y,
                          ThreadPool* pool, const DepthwiseEpilogue& ep);

}  // namespace kiln::kernels
