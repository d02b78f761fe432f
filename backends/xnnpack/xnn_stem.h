// The stem of a mobile net (mobilenet_v2: a 3x3 stride-2 convolution of
// the 3-channel image to 32 channels) run by the plugin straight from the
// partition's NCHW input: no layout transpose of the image, and no im2col.
// Rows of output pixels are computed from the image's rows (from
// zero-padded copies of the few input rows they read at the image's edges,
// a few KB, in L1); the kernel
// keeps MR pixels x 32 (or 16) output channels in registers over all the
// kh * kw * cin taps, each tap broadcasting one input value per pixel (at
// the horizontal stride) against a vector of packed weights, so it runs
// at the FMA units' rate like the blocks' GEMM (xnn_gemm.h). Its output
// rows go where the caller says: a fused block's ring of rows in blocks of
// 16 channels (xnn_block.h: the stem's output then never goes to memory),
// or a plain NHWC tensor. AVX-512F, or AVX2+FMA (xnn_isa.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "xnn_isa.h"

namespace kiln_xnnpack {

/// What follows the clamp: mobilenet_v3's HardSwish, efficientnet's SiLU
/// (x * sigmoid(x)); only where the output is plain NHWC (a stem alone).
enum class StemAct : uint8_t { kNone, kHardSwish, kSiLU };

struct StemShape {
  size_t cin = 0, h = 0, w = 0;      // one input image, NCHW
  size_t cout = 0, oh = 0, ow = 0;   // its output
  size_t kh = 0, kw = 0, sh = 1, sw = 1;
  size_t pad_top = 0, pad_left = 0;  // bottom and right: whatever oh and ow imply
  float lo = 0, hi = 0;              // output clamp
  StemAct act = StemAct::kNone;      // after the clamp
};

/// Input channels at most: more taps per input value make the layout transpose cheap next to the convolution.
constexpr size_t kStemMaxCin = 4;

/// Whether a Conv op (OpKind::kConv ints, input NHWC dims, output NHWC dims)
/// is one the stem kernel runs: one group, cin <= kStemMaxCin, a kernel of
/// 2+ taps up to 11x11, strides 1 or 2, dilation 1, pads smaller than the kernel.
bool stem_fits(const std::vector<int64_t>& ints, const std::vector<int64_t>& input_dims,
               const std::vector<int64_t>& output_dims);

class StemConv {
 public:
  StemConv() = default;
  /// `filter` [cout, kh, kw, cin] (the Program's Conv layout), `bias` [cout]
  /// or null. run() computes up to `max_rows` output rows per pass over its
  /// scratch (more are split).
  StemConv(const StemShape& s, const float* filter, const float* bias, size_t max_rows);

  const StemShape& shape() const { return s_; }
  Isa isa() const { return isa_; }
  /// Floats of scratch run() takes.
  size_t scratch_floats() const { return cin_pitch_ * s_.cin; }
  /// Floats of one input image.
  size_t image_floats() const { return s_.cin * s_.h * s_.w; }

  /// Output rows [r0, r1) of the image `x` (NCHW). Output row r, pixel p,
  /// channel c goes to y + (r - r0) * row_stride + p * px_stride + c / 16 * cvs + c % 16
  /// (plain NHWC: row_stride ow * cout, px_stride cout, cvs 16; a block's
  /// ring: w * 16, 16, ring * w * 16). Channels past cout are written only
  /// where cvs != 16 (there, up to the next multiple of 16, as zeros + bias
  /// padding, i.e. clamp(0)).
  void run(const float* x, size_t r0, size_t r1, float* y, size_t row_stride, size_t px_stride, size_t cvs,
           float* scratch) const;

 private:
  void pad_rows(const float* x, size_t r0, size_t r1, float* scratch) const;
  void pad_cols(const float* x, size_t r0, size_t r1, float* scratch) const;

  StemShape s_;
  Isa isa_ = Isa::kNone;
  size_t max_rows_ = 1;
  size_t pitch_ = 0;      // floats of one padded input row in the scratch
  size_t cin_pitch_ = 0;  // floats of one channel's rows in the scratch
  std::vector<uint32_t> offsets_;  // per tap (ky, kx, c): its offset in the scratch from a row's pixel 0
  std::vector<uint32_t> direct_;   // per tap: its offset in the image from a pixel's window's first value
  size_t direct_lo_ = 0, direct_hi_ = 0;  // output pixels whose windows lie inside the image's columns
  std::vector<float> panels_;      // per panel of 32 (the last 16 or 32) output channels: taps x width
  std::vector<float> bias_;        // cout rounded up to 32, zero-padded
  void (*silu_)(const float*, float*, size_t) = nullptr;  // act kSiLU: the SiLU kernel (xnn_silu.h)
};

}  // namespace kiln_xnnpack
