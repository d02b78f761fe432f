// Winograd F(4x4, 3x3) for float32 Conv with a 3x3 kernel, stride 1,
// dilation 1, group 1 and any pads (Lavin & Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2015; interpolation points 0, +-1, +-2, inf).
//
// Each 4x4 block of outputs (a tile) is computed from the 6x6 input patch
// under it: Y = A^T [ (G g G^T) (.) (B^T d B) ] A, so a 3x3 convolution costs
// 36 multiplies per 16 outputs instead of 144. Over all channels that is 36
// independent GEMMs, one per position xi of the 6x6 transformed tile:
//
//   M[xi] (Cout x tiles) = U[xi] (Cout x Cin) * V[xi] (Cin x tiles)
//
// U = G g G^T is the transformed weight, computed once at load (in double,
// rounded once) and packed for the SGEMM engine (gemm.h) through the
// PrepackStore under the slot "winograd-f4x4-v1/U<xi>", so a .kiln program
// keeps it and a different layout is a miss that repacks. V = B^T d B (input
// transform) and the output transform A^T M A (with the bias, FusedConv's
// sum input Z and its activation fused) are loops over 16 tiles at a time,
// compiled per ISA (KILN_ISA_DISPATCH, picked by cpu::kernel_isa()).
//
// Error: the transforms amplify rounding (B^T and A^T have entries up to 5
// and 8) and mix the whole 6x6 input patch under a 4x4 output tile, so an
// output's error scales with its tile's inputs, not only its own window's.
// With P = sum over input channels of max|w| * sum|x| over the tile's 6x6
// patch, plus |b|, the error against a float64 direct convolution, measured
// over random inputs and weights in [-1, 1] (Cin 1..256, maps 1x1..57x57,
// asymmetric pads, batch 1..5; conv_winograd_test.cpp), is at most
// 4.4e-7 * P (about 2^-21 * P; the im2col path stays near 5e-8 * P).
// The tests assert |err| <= 1e-6 * P.
//
// Two ways to run the 36 products. Maps with more than 16 tiles per image
// use the SGEMM engine with U packed as its A operand and V written straight
// in its packed-B layout. Small maps (at most 16 tiles: 7x7 to 16x16 outputs,
// when the input shape is static) would leave most of a GEMM panel padding,
// so they use a kernel with 16 output channels in the vector lanes and each
// tile a broadcast, U laid out for it at load ("winograd-f4x4-v1/U-lanes16").
//
// Work is split over the thread pool in balanced phases: the input
// transform over input channels; then per column chunk of tiles (M kept
// within ~512 KiB) the 36 GEMMs over xi (small maps: over xi and blocks of
// 16 output channels) and the output transform over output channels; a
// non-clamp activation last, over output planes.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel.h"
#include "kernels/portable/conv_epilogue.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels {

/// What follows the convolution in the output transform: y = clamp(conv +
/// bias + z, lo, hi), then `act` over each finished output plane.
using WinogradEpilogue = ConvEpilogue;

/// When the Winograd path runs (process-wide; tests and benchmarks). The
/// environment variable KILN_WINOGRAD=off|always|auto sets the starting mode.
enum class WinogradMode {
  kAuto,    // eligible convolutions large enough to gain (measured thresholds)
  kOff,     // never
  kAlways,  // every eligible convolution, whatever its size
};
/// Sets the mode; affects kernels created afterwards (weights are transformed
/// at load only when the mode allows). Not thread-safe; call before loading.
void set_winograd_mode(WinogradMode mode);
WinogradMode winograd_mode();

class WinogradConv {
 public:
  /// Transforms and packs the constant weight `w` [Cout, Cin, 3, 3] when the
  /// node qualifies (float32, group 1, strides and dilations 1, channel
  /// counts past the thresholds); otherwise stays empty (ready() false).
  void prepare(const KernelInit& init, const Tensor& w, int64_t group, const WindowAttrs& attrs);
  bool ready() const { return !u_.empty() || ul_ != nullptr; }

  /// Whether it runs for this resolved geometry, batch and weight shape.
  bool applies(const WindowGeometry& g, int64_t n, const Shape& w_shape) const;
  /// Whether it will run for every input of the node's statically known
  /// shape (then the im2col packing of W is never needed). False when unknown.
  bool covers_static_input(const KernelInit& init) const;

  /// Y[n, Cout, H', W'] = conv(X[n, Cin, H, W]) with the epilogue. `g` must
  /// satisfy applies().
  void run(int64_t n, const WindowGeometry& g, const float* x, float* y, const WinogradEpilogue& ep,
           ThreadPool* pool) const;

 private:
  // Whether a resolved geometry and batch run Winograd (by the mode).
  bool gains(const WindowGeometry& g, int64_t n) const;
  // 1: the node's static input shape gains, 0: it does not, -1: unknown.
  int static_input_applies(const KernelInit& init) const;
  // 4x4 tiles of one image for the node's static input shape; -1: unknown.
  int64_t static_tiles_per_image(const KernelInit& init) const;
  void prepare_lanes(const KernelInit& init, const Tensor& w);
  void run_lanes(int64_t n, const WindowGeometry& g, const float* x, float* y, const WinogradEpilogue& ep,
                 ThreadPool* pool) const;

  int64_t cout_ = 0, cin_ = 0;
  WindowAttrs attrs_;
  bool lanes_ = false;           // the small-map path (at most 16 tiles per image, static shape)
  std::vector<PackedMatrix> u_;  // 36 matrices Cout x Cin (SGEMM path)
  const float* ul_ = nullptr;    // U in the lanes layout (small-map path)
  std::shared_ptr<const void> ul_holder_;
};

}  // namespace kiln::kernels
