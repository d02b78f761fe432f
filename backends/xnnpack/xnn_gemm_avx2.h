// The AVX2+FMA variant of PackedGemm (xnn_gemm.h) for CPUs without
// AVX-512F: the same packed panels, read in groups of up to three 8-wide
// vectors of columns (16 registers: 6 rows x 16 columns or 4 x 24 keep 12
// accumulators), one panel per call. PackedGemm::run calls it when the
// kernels' instruction set (xnn_isa.h) is AVX2.
#pragma once

#include <cstddef>

#include "xnn_gemm.h"

namespace kiln_xnnpack {

/// One packed panel of PackedGemm: `k` rows of `width` (16, 24 or 32)
/// floats, of which the first `cols` columns are real.
struct GemmPanel {
  size_t m = 0, k = 0;
  const float* a = nullptr;  // [m, k], row stride lda
  size_t lda = 0;
  const float* b = nullptr;  // the panel
  size_t width = 0, cols = 0;
  const float* bias = nullptr;  // `width` floats
  float* c = nullptr;           // column 0 of the panel; columns [16 v, 16 v + 16) start v * cvs floats after it
  size_t ldc = 0, cvs = 16;
  const float* residual = nullptr;  // column 0 of the panel in the residual (row stride e.ldr), or null
  const char* prefetch = nullptr;   // 64-byte lines to prefetch while the panel runs (PackedGemm::Prefetch)
  size_t prefetch_lines = 0;
};

/// How the GEMMs prefetch (__builtin_prefetch's locality: 3 is every cache level).
constexpr int kPrefetchLocality = 3;

/// Lines [lines u0 / units, lines u1 / units) of a prefetch stream: the
/// share of the work units [u0, u1) of `units` (rows of A, tiles or panels).
inline void prefetch_share(const char* base, size_t lines, size_t u0, size_t u1, size_t units, const char** out,
                           size_t* out_lines) {
  const size_t a = lines * u0 / units, b = lines * u1 / units;
  *out = base + a * 64;
  *out_lines = b - a;
}

/// In a tile's step kk of k: the prefetches due, spread evenly over the
/// steps (`due` carries the remainder from one step to the next).
inline void prefetch_step(const char*& pf, size_t lines, size_t k, size_t& due) {
  for (due += lines; due >= k; due -= k, pf += 64) __builtin_prefetch(pf, 0, kPrefetchLocality);
}

/// C = clamp(A . panel + bias) [+ residual, clamped again], as PackedGemm::run.
void gemm_panel_avx2(const GemmPanel& p, const PackedGemm::Epilogue& e);

}  // namespace kiln_xnnpack
