// The plugin's own AVX-512 matrix multiply for the 1x1 convolutions of a
// fused inverted-residual block (xnn_block.h): C[m, n] = A[m, k] . W^T with
// the weights packed once into panels of 32 (the last one 16) output
// columns, bias, an output clamp and optionally a residual added and
// clamped again in the same pass. A and C take row strides, so a block can
// read pixels from the middle of a tensor and write into a ring of rows.
// An AVX2+FMA variant (xnn_gemm_avx2.h) runs the same panels on CPUs
// without AVX-512F, or under KILN_XNNPACK_ISA=avx2 (xnn_isa.h).
#pragma once

#include <cstddef>
#include <vector>

#include "xnn_isa.h"
#include "xnn_memory.h"

namespace kiln_xnnpack {

/// True when a variant of the kernel runs (kernel_isa() is AVX-512F or AVX2).
bool gemm_supported();

/// Memory another kernel reads right after a GEMM (the fused head's fully
/// connected weights, xnn_head.h): PackedGemm::run_panels prefetches its
/// 64-byte lines while it computes, one line per step of the reduction
/// (spread over its tiles), so they stream in from memory during the GEMM
/// instead of after it.
struct GemmPrefetch {
  const void* data = nullptr;
  size_t bytes = 0;
};

class PackedGemm {
 public:
  PackedGemm() = default;
  /// `w` is [n, k] row-major (an output channel's weights are one row),
  /// `bias` [n] or null. `k_pad` >= k rows of zeros pad the reduction, so
  /// A may carry k_pad columns (the padding must be finite).
  PackedGemm(const float* w, const float* bias, size_t n, size_t k, size_t k_pad);

  size_t n() const { return n_; }
  size_t k() const { return k_; }
  /// The variant run() runs: kernel_isa() when the weights were packed.
  Isa isa() const { return isa_; }

  struct Epilogue {
    float lo, hi;                     // clamp of A . W^T + bias
    const float* residual = nullptr;  // added after the clamp ([m, n], row stride ldr)
    size_t ldr = 0;
    float lo2 = 0, hi2 = 0;  // clamp after the residual
  };

  /// C[m, n] (row stride ldc) from A[m, k] (row stride lda). Columns
  /// [16 v, 16 v + 16) of C start `cvs` v floats after column 0: 16 for a
  /// plain row-major C; larger for channel-blocked layouts (n a multiple of
  /// 16 then, a row's block of 16 being contiguous).
  void run(size_t m, const float* a, size_t lda, float* c, size_t ldc, const Epilogue& e, size_t cvs = 16) const;

  using Prefetch = GemmPrefetch;

  /// Packed panels of 32 output columns (the last may be narrower).
  size_t panels() const { return (n_ + 31) / 32; }
  /// Columns [32 p0, min(n, 32 p1)) of C only, `c` (and the residual, if
  /// any) pointing at column 32 p0: threads can share out the columns.
  void run_panels(size_t m, const float* a, size_t lda, float* c, size_t ldc, const Epilogue& e, size_t p0, size_t p1,
                  const Prefetch& pf = {}) const;

 private:
  void run_range(size_t m, const float* a, size_t lda, float* c, size_t ldc, const Epilogue& e, size_t cvs, size_t p0,
                 size_t p1, const Prefetch& pf) const;

  size_t n_ = 0, k_ = 0;
  Isa isa_ = Isa::kNone;
  FloatBuffer panels_;         // per panel: k rows of 32 (or 16) columns, zero-padded (huge pages when large)
  std::vector<float> bias_;    // n rounded up to 16, zero-padded
};

}  // namespace kiln_xnnpack
