// Winograd F(4x4, 3x3) for the plugin's 3x3 stride-1 dilation-1 group-1
// convolutions, in NHWC (Lavin & Gray 2015; interpolation points 0, +-1,
// +-2, inf; the same transforms as Kiln's portable conv_winograd.h, written
// here for channels-last data, which the plugin may not include).
//
// Each 4x4 block of outputs (a tile) comes from the 6x6 input patch under it:
// Y = A^T [ (G g G^T) (.) (B^T d B) ] A, 36 multiplications per 16 outputs
// and input channel instead of 144. Over all channels that is 36 independent
// GEMMs, one per position xi of the transformed 6x6 tile:
//
//   M[xi] [tiles, Cout] = V[xi] [tiles, Cin] x U[xi]^T, U[xi] [Cout, Cin]
//
// U = G g G^T is computed from the Program's filter (in double, rounded
// once) when the runtime is built, and handed to 36 XNNPACK fully connected
// operators, which pack it; an imported Program recomputes it bit for bit,
// so the blob stores only the 3x3 filter. The input transform V = B^T d B
// and the output transform A^T M A (+ bias, + a fused residual, clamped)
// vectorize over channels, which NHWC keeps contiguous; both are split over
// tiles on the plugin's pthreadpool, compiled for AVX-512, AVX2+FMA and a
// baseline, picked at run time by the CPU.
//
// Tiles are taken from the output's origin: tile (ty, tx) covers outputs
// [4ty, 4ty+4) x [4tx, 4tx+4) and reads inputs from row 4ty - pad_top,
// column 4tx - pad_left (zeros outside the input); partial tiles at the
// right and bottom edges compute 16 outputs and store the valid ones.
//
// Error: B^T and A^T have entries up to 5 and 8 and mix the whole 6x6 patch
// under a tile, so an output's rounding error scales with its tile's
// inputs, not only its 3x3 window. With
//   P = sum over input channels ci of max_k |w[co, ci, k]| * sum |x| over the
//       tile's 6x6 patch of channel ci, plus |bias[co]| and |residual|,
// the error against a float64 direct convolution is bounded by 1e-6 * P:
// measured at most 6.2e-7 * P over the test's cases (inputs and weights in
// [-2, 2], Cin 1..100, maps 1x1..30x26, pads 0..2; each transform variant on
// Zen 4, the largest in 1-channel cases where P is smallest), 4.4e-7 * P
// for the portable kernel with the same transforms, while a direct
// convolution stays near 5e-8 * P. xnnpack_winograd_test.cpp asserts
// |err| <= 1e-6 * P.
//
// Work is done in chunks of tiles (V and M of a chunk kept within ~2 MiB, or
// the transformed weights' size if larger, so they stay close to the core
// between the transforms and the GEMMs): per chunk one parallel call for the
// input transform (a task per tile), one for the 36 GEMMs (a task per GEMM,
// each on one thread; past 12 threads XNNPACK splits each GEMM instead) and
// one for the output transform.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "xnn_api.h"
#include "xnn_memory.h"
#include "xnn_program.h"

namespace kiln_xnnpack {

/// When the plugin runs a convolution with Winograd (option `winograd`).
enum class WinogradMode {
  kAuto,    // eligible convolutions whose shape gains (measured rule, winograd_gains)
  kOff,     // never
  kAlways,  // every eligible convolution
};

/// Parses "auto" / "off" / "always"; throws kiln::sdk::Error naming the value otherwise.
WinogradMode parse_winograd_mode(const std::string& s);

struct WinogradShape {
  size_t n = 0, h = 0, w = 0, cin = 0;  // input NHWC
  size_t oh = 0, ow = 0, cout = 0;      // output
  size_t pad_top = 0, pad_left = 0;
  size_t out_stride = 0;  // floats between output pixels (>= cout: a slice of a channel Concat)
  float lo = 0, hi = 0;   // output clamp
};

/// Whether a Conv op (OpKind::kConv ints, input NHWC dims) is one Winograd
/// F(4x4, 3x3) computes: 3x3, stride 1, dilation 1, group 1.
bool winograd_fits(const std::vector<int64_t>& ints, const std::vector<int64_t>& input_dims);

/// The measured rule of WinogradMode::kAuto (see the .cpp for the numbers).
bool winograd_gains(const WinogradShape& s);

/// One convolution run with Winograd: 36 fully connected operators holding
/// the transformed weights, created once; run() allocates nothing.
class WinogradConv {
 public:
  /// `filter` is [Cout, 3, 3, Cin] (the Program's Conv layout), `bias` [Cout] or null.
  WinogradConv(const WinogradShape& s, const float* filter, const float* bias);
  ~WinogradConv();
  WinogradConv(const WinogradConv&) = delete;
  WinogradConv& operator=(const WinogradConv&) = delete;

  /// y = clamp(conv(x) + bias + residual, lo, hi). `x` [n, h, w, cin];
  /// `residual` [n, oh, ow, cout] (dense) or null; `y` pixels out_stride
  /// apart; `scratch` scratch_floats() floats, 64-byte aligned (the
  /// convolutions of a runtime run one at a time and share it). With
  /// `yield`, the pool's workers sleep after the last step.
  void run(const float* x, const float* residual, float* y, float* scratch, pthreadpool_t pool, bool yield);

  const WinogradShape& shape() const { return s_; }
  /// V and M of one chunk.
  size_t scratch_floats() const { return v_floats_ + 36 * chunk_ * s_.cout; }
  /// Tiles per chunk (V and M of a chunk stay in L2).
  size_t chunk_tiles() const { return chunk_; }
  /// The transforms' instruction set: "avx512", "avx2" or "baseline" (the
  /// widest the CPU has, capped by $KILN_XNNPACK_WINOGRAD_ISA and $KILN_XNNPACK_ISA when set).
  const char* isa() const { return isa_; }

 private:
  WinogradShape s_;
  size_t ht_ = 0, wt_ = 0, tiles_ = 0, chunk_ = 0;
  void (*input_)(void*, size_t) = nullptr;   // input transform of one tile (by ISA)
  void (*output_)(void*, size_t) = nullptr;  // output transform of one tile
  const char* isa_ = "baseline";
  std::vector<xnn_operator_t> fc_;  // 36: M[xi] = V[xi] x U[xi]^T
  std::vector<float> bias_;         // Cout (zeros when the op has none)
  std::vector<float> zeros_;        // Cin zeros: the padding the input transform reads
  size_t v_floats_ = 0;             // V of one chunk, rounded up to 64 bytes (M follows it)
};

/// The convolutions of a Program that run with Winograd, per op.
struct WinogradOps {
  std::vector<std::unique_ptr<WinogradConv>> conv;  // null: not Winograd
  // The Add (op index) fused into the convolution's output transform: the
  // next op, the convolution's only reader, adding a same-shaped value; its
  // output clamp replaces the convolution's. -1: none.
  std::vector<int64_t> add;
  std::vector<uint8_t> fused;  // per op: an Add run by the Winograd convolution before it
  FloatBuffer scratch;  // shared by the convolutions (one runs at a time)
  float* scratch_data() { return scratch.data(); }  // 64-byte aligned
  size_t count() const {
    size_t n = 0;
    for (const auto& c : conv) n += c != nullptr;
    return n;
  }
  size_t fused_adds() const {
    size_t n = 0;
    for (uint8_t f : fused) n += f;
    return n;
  }
  /// For the compile log: "N 3x3 convolutions by Winograd F(4x4,3x3), K with
  /// their residual Add (ISA transforms)", or "0 3x3 convolutions by Winograd".
  std::string summary() const;
};

/// Builds the Winograd convolutions of `p` under `mode`. `into_concat` is
/// per op the channel Concat (op index) a Conv writes into (-1: none): such
/// a Conv writes its pixels that Concat's channel count apart.
WinogradOps plan_winograd(const Program& p, WinogradMode mode, const std::vector<int64_t>& into_concat);

}  // namespace kiln_xnnpack
