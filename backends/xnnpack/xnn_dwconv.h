// A 3x3 depthwise convolution (multiplier 1, channels a multiple of 16,
// stride 1 or 2, dilation 1, NHWC) that the plugin runs itself with AVX-512
// instead of XNNPACK's. This XNNPACK's depthwise kernel (up16x9) reads the 9
// filter vectors, the bias and 9 input pointers again for every output pixel
// and 16 channels; this one keeps the filter of 16 channels in registers
// across a row of output pixels, so each output costs 9 input loads and 9
// FMAs. On mobilenet_v2 (Zen 4, 1 thread) XNNPACK's depthwise convolutions
// took 1.6x ONNX Runtime's time (per-op profile in README.md). An AVX2+FMA
// variant (xnn_dwconv_avx2.h) runs on CPUs without AVX-512F, or under
// KILN_XNNPACK_ISA=avx2 (xnn_isa.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "xnn_isa.h"

namespace kiln_xnnpack {

struct DepthwiseShape {
  size_t n = 0, h = 0, w = 0, c = 0;  // input NHWC
  size_t oh = 0, ow = 0;              // output rows and columns
  size_t stride = 1;
  size_t pad_top = 0, pad_left = 0;
  float lo = 0, hi = 0;               // output clamp
  size_t in_px = 0, out_px = 0;       // floats from one pixel to the next in the input rows, the output (0: c)
  Isa isa = cpu_isa();                // the variant that runs (kNone: nothing runs)
};

/// True when a variant of the kernel runs (kernel_isa() is AVX-512F or AVX2).
bool native_depthwise_supported();

/// Whether a Depthwise op (OpKind::kDepthwise ints, input NHWC dims) is one
/// the kernel takes: 3x3, multiplier 1, dilation 1, stride 1 or 2 in both
/// directions, pads < 3, channels a multiple of 16.
bool native_depthwise_fits(const std::vector<int64_t>& ints, const std::vector<int64_t>& input_dims);

/// Output rows [row_begin, row_end) of all images (row r is image r / oh,
/// output row r % oh). `filter` is [3, 3, C] (XNNPACK's depthwise layout),
/// `bias` [C] or null.
void depthwise3x3_rows(const DepthwiseShape& s, const float* input, const float* filter, const float* bias,
                       float* output, size_t row_begin, size_t row_end);

/// Channels [c_begin, c_end) (multiples of 16) of one output row from the
/// three input rows it reads (each s.w pixels, s.in_px floats apart; null: a
/// padding row). The filter is [3, 3, s.c], s.c a multiple of 16. s.h, s.oh
/// and s.pad_top are not used.
void depthwise3x3_row(const DepthwiseShape& s, const float* const rows[3], const float* filter, const float* bias,
                      float* output, size_t c_begin, size_t c_end);

/// 16 channels of `nrows` output rows (output row r at output + r * out_row),
/// row r from input rows rows[3 r .. 3 r + 2] (null: padding): the filter
/// (`filter` + t * s.c for tap t) is loaded once for all the rows.
void depthwise3x3_rows16(const DepthwiseShape& s, const float* const* rows, size_t nrows, const float* filter,
                         const float* bias, float* output, size_t out_row);

}  // namespace kiln_xnnpack
