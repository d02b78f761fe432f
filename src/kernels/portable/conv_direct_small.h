// Direct float32 Conv for few output channels on large maps (YOLO-style
// stems and early downsampling convs: 3->16 6x6 stride 2 at 320x320, 16->32
// 3x3 stride 2, 16->16 3x3 at 80x80).
//
// There im2col + GEMM has only 16-32 output rows per panel, so packing B
// costs as much as the multiply. This path skips it: the input is copied
// once into zero-bordered planes whose rows are split into their column
// phases (stride s: s runs of every s-th column), so for every tap the
// inputs of consecutive outputs of a row are one contiguous run. Each
// register block is a few output channels (weights broadcast) times a run
// of output pixels of one row (vector loads), accumulated over all
// Cin * kh * kw taps, then bias, FusedConv's sum input Z and the clamp are
// applied in registers and the block is stored straight into the NCHW
// output; other activations run over each finished output row.
//
// W is packed at load as [Cout / 8][Cin][kh][kw][8] (the last block padded
// with zeros). The kernel is compiled for AVX-512 (8 channels x 32 pixels)
// and AVX2 (4 channels x 24 pixels) and picked at run time by the CPU.
//
// Used (auto) for constant-weight group-1 1-D/2-D convs with at most 64
// output channels where it measured faster than im2col + GEMM (direct_gains);
// KILN_CONV_DIRECT=off|always|auto sets the mode (comparisons, tests).
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel.h"
#include "kernels/portable/conv_epilogue.h"
#include "kernels/portable/util/cv_common.h"

namespace kiln::kernels {

enum class DirectSmallMode { kAuto, kOff, kAlways };
/// Process-wide; the environment variable KILN_CONV_DIRECT sets the start.
/// Not thread-safe: call before loading.
void set_direct_small_mode(DirectSmallMode mode);
/// Caps the kernel variant (tests: the AVX2 and baseline variants on an
/// AVX-512 machine). Not thread-safe: call before running.
enum class DirectSmallIsa { kBest, kAvx2, kBaseline };
void set_direct_small_isa(DirectSmallIsa cap);

class DirectSmallConv {
 public:
  /// Packs the constant weight `w` [Cout, Cin, k...] when the node can run
  /// here (float32, group 1, rank 1 or 2, Cout <= 64) and the mode allows;
  /// otherwise stays empty (ready() false).
  void prepare(const Tensor& w, int64_t group);
  bool ready() const { return !wp_.empty(); }

  /// Whether it runs for this resolved geometry and weight shape.
  bool applies(const WindowGeometry& g, const Shape& w_shape) const;

  /// Y[n, Cout, ...] = conv(X[n, Cin, ...]) with the epilogue. `g` must
  /// satisfy applies(). Splits the work over `pool` (may be null).
  void run(int64_t n, const WindowGeometry& g, const float* x, float* y, const ConvEpilogue& ep,
           ThreadPool* pool) const;

 private:
  int64_t cout_ = 0, cin_ = 0, kh_ = 1, kw_ = 1;
  Shape w_shape_;
  std::vector<float> wp_;  // [Cout / 8][Cin][kh][kw][8]
};

/// Whether the auto mode takes the direct path for a group-1 conv with `cin`
/// input and `cout` output channels over `g` (exposed for tests).
bool direct_small_gains(const WindowGeometry& g, int64_t cin, int64_t cout);

}  // namespace kiln::kernels
