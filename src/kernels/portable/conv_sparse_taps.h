// Conv whose kernel taps mostly read padding: the dilated 3x3 convolutions
// of segmentation heads. DeepLabV3's ASPP runs dilations 12, 24 and 36 on the
// backbone's 1/16 map (16x16 for a 256x256 input): with dilation 24 or 36
// every tap but the centre reads only padding, with dilation 12 the side taps
// reach into the input over a band a quarter of the map wide. im2col + GEMM
// multiplies all those zeros (9x the work for dilation 24 and 36, 4x for 12).
//
// Here each tap t = (kh, kw) is one GEMM over the box V_t of outputs where it
// reads the input (a box, since per spatial dim the outputs a tap reaches
// form one interval):
//
//   Y[:, V_t] += W[:, :, kh, kw] (Cout x Cin) * X[:, V_t moved by the tap]
//
// so the work is the exact count of multiply-adds that touch the input, and
// taps that never do cost nothing. The W slice of each tap live for the
// node's static input shape is packed at load ("sparse-taps-v1/T<t>"); W is
// not packed for im2col then. A tap whose box spans whole output rows
// accumulates straight into Y; others go through a scratch box. Sums run in a
// different order than im2col's (tap-major instead of channel-major); both
// are float32 sums of the same products.
//
// Exactness: a skipped tap multiplies only the implicit zero padding, which
// adds 0 * w; that is 0 unless w is Inf or NaN, so prepare() declines weights
// that are not all finite.
//
// Used for group 1, 1-D/2-D, constant W, a static input shape known at load,
// at least kMinChannels input channels (each tap's GEMM has K = Cin), and
// only when the live taps are at most kMaxLiveFraction of im2col's work.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel.h"
#include "kernels/portable/conv_epilogue.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels {

/// The output box a kernel tap reads the input for, per spatial dim:
/// [lo, hi) (empty when hi <= lo). Rank 1 uses dim 1 only (dim 0 is [0, 1)).
struct TapBox {
  int64_t lo[2] = {0, 0}, hi[2] = {1, 1};
  int64_t size() const { return hi[0] <= lo[0] || hi[1] <= lo[1] ? 0 : (hi[0] - lo[0]) * (hi[1] - lo[1]); }
};

/// The boxes of every tap of `g` (rank 1 or 2), in W's tap order.
std::vector<TapBox> tap_boxes(const WindowGeometry& g);

class SparseTapConv {
 public:
  static constexpr int64_t kMinChannels = 16;
  static constexpr double kMaxLiveFraction = 0.5;

  /// Packs the live taps of the constant weight `w` [Cout, Cin, k...] when
  /// the node qualifies for its static input shape; otherwise stays empty
  /// (ready() false).
  void prepare(const KernelInit& init, const Tensor& w, int64_t group, const WindowAttrs& attrs);
  bool ready() const { return !taps_.empty(); }
  /// Whether it runs for this resolved geometry and weight shape: sparse
  /// enough, and every live tap packed.
  bool applies(const WindowGeometry& g, const Shape& w_shape) const;
  /// Whether it runs for the node's static input shape (then W need not be
  /// packed for im2col).
  bool covers_static_input() const { return ready(); }

  /// Y[n, Cout, out...] = conv(X[n, Cin, in...]) with the epilogue; `g` must
  /// satisfy applies().
  void run(int64_t n, const WindowGeometry& g, const float* x, float* y, const ConvEpilogue& ep,
           ThreadPool* pool) const;

  /// Whether the taps of `g` live for some output are at most
  /// kMaxLiveFraction of im2col's work.
  static bool sparse_enough(const WindowGeometry& g);

 private:
  int64_t cout_ = 0, cin_ = 0;
  std::vector<PackedMatrix> taps_;  // per tap of W, packed Cout x Cin; empty: dead for the static shape
};

}  // namespace kiln::kernels
