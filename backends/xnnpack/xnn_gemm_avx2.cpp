// The AVX2+FMA microkernels of the fused blocks' 1x1 convolutions (see
// xnn_gemm_avx2.h). Every function using AVX2 carries the target attribute
// (as xnn_gemm.cpp and xnn_winograd.cpp do): the file is built with the
// library's baseline flags, so no inline function of a shared header is
// compiled for AVX2 and picked by the linker for a baseline caller.
#include "xnn_gemm_avx2.h"

#include <algorithm>
#include <array>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_XNN_X86 1
#endif

namespace kiln_xnnpack {

#ifdef KILN_XNN_X86
namespace {

using Epilogue = PackedGemm::Epilogue;

// Lanes [0, n) of a vector (n in 1..8).
__attribute__((target("avx2"))) inline __m256i lanes(size_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// MR rows of A times NV vectors of 8 columns of a panel, starting at panel
// column g0 (a multiple of 16): the accumulators stay in registers over all
// of k, A is broadcast one element at a time. The last vector holds `tail`
// (1..8) real columns: its store (and residual load) is masked. With P, it
// prefetches `pf_lines` 64-byte lines from `pf`, spread evenly over the
// steps of k.
template <size_t MR, size_t NV, bool R, bool P>
__attribute__((target("avx2,fma"))) void tile(size_t k, const float* a, size_t lda, const float* b, size_t ldb,
                                               const float* bias, float* c, size_t ldc, size_t cvs, size_t g0,
                                               size_t tail, const float* r, const Epilogue& e, const char* pf,
                                               size_t pf_lines) {
  __m256 acc[MR][NV];
  size_t due = 0;  // P: prefetches owed (times k)
#pragma GCC unroll 3
  for (size_t j = 0; j < NV; ++j) {
    const __m256 bj = _mm256_loadu_ps(bias + g0 + j * 8);
#pragma GCC unroll 8
    for (size_t i = 0; i < MR; ++i) acc[i][j] = bj;
  }
  b += g0;
  for (size_t kk = 0; kk < k; ++kk, ++a, b += ldb) {
    __m256 bv[NV];
#pragma GCC unroll 3
    for (size_t j = 0; j < NV; ++j) bv[j] = _mm256_loadu_ps(b + j * 8);
    if (P) prefetch_step(pf, pf_lines, k, due);
#pragma GCC unroll 8
    for (size_t i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * lda);
#pragma GCC unroll 3
      for (size_t j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  const __m256 lo = _mm256_set1_ps(e.lo), hi = _mm256_set1_ps(e.hi);
  const __m256i mask = lanes(tail);
#pragma GCC unroll 8
  for (size_t i = 0; i < MR; ++i) {
#pragma GCC unroll 3
    for (size_t j = 0; j < NV; ++j) {
      const size_t col = g0 + j * 8;
      const bool part = j + 1 == NV && tail < 8;
      __m256 v = _mm256_min_ps(_mm256_max_ps(acc[i][j], lo), hi);
      if (R) {
        const float* rp = r + i * e.ldr + col;
        v = _mm256_add_ps(v, part ? _mm256_maskload_ps(rp, mask) : _mm256_loadu_ps(rp));
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(e.lo2)), _mm256_set1_ps(e.hi2));
      }
      float* dst = c + i * ldc + col / 16 * cvs + col % 16;
      if (part) _mm256_maskstore_ps(dst, mask, v);
      else _mm256_storeu_ps(dst, v);
    }
  }
}

using TileFn = void (*)(size_t, const float*, size_t, const float*, size_t, const float*, float*, size_t, size_t,
                        size_t, size_t, const float*, const Epilogue&, const char*, size_t);

// Rows per tile: 8 x 8, 6 x 16 or 4 x 24 columns: 8 to 12 accumulators
// (enough independent FMAs to hide their latency on two FMA ports), the
// panel's vectors and a broadcast within 16 registers.
constexpr size_t rows_for(size_t nv) { return nv == 1 ? 8 : nv == 2 ? 6 : 4; }

template <size_t NV, bool R, bool P, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tiles(std::index_sequence<I...>) {
  return {&tile<I + 1, NV, R, P>...};
}

template <size_t NV, bool R, bool P>
TileFn tile_for(size_t mr) {
  static constexpr auto t = tiles<NV, R, P>(std::make_index_sequence<rows_for(NV)>{});
  return t[mr - 1];
}

template <size_t NV>
TileFn tile_for(size_t mr, bool r, bool p) {  // with a residual, or prefetching (never both)
  return r ? tile_for<NV, true, false>(mr) : p ? tile_for<NV, false, true>(mr) : tile_for<NV, false, false>(mr);
}

TileFn tile_for(size_t nv, bool r, bool p, size_t mr) {
  if (nv == 3) return tile_for<3>(mr, r, p);
  if (nv == 2) return tile_for<2>(mr, r, p);
  return tile_for<1>(mr, r, p);
}

}  // namespace

// Column groups of a panel: a 24-wide one in one group of three vectors; a
// 16- or 32-wide one by 16 columns (the vectors its real columns need). For
// each tile of rows, the groups one after the other (the second reads the
// tile's rows of A from L1).
void gemm_panel_avx2(const GemmPanel& p, const Epilogue& e) {
  struct Group {
    size_t g0, nv, tail;
  } groups[2];
  size_t ng = 0;
  if (p.width == 24) {
    groups[ng++] = {0, 3, 8};
  } else {
    for (size_t g0 = 0; g0 < p.cols; g0 += 16) {
      const size_t n = std::min<size_t>(16, p.cols - g0);
      groups[ng++] = {g0, (n + 7) / 8, n - (n - 1) / 8 * 8};
    }
  }
  const bool r = p.residual != nullptr;
  const size_t rows = rows_for(groups[0].nv);  // the widest group (a later one is narrower: tiles of mr rows exist for it)
  for (size_t m0 = 0; m0 < p.m; m0 += rows) {
    const size_t mr = std::min(rows, p.m - m0);
    for (size_t gi = 0; gi < ng; ++gi) {
      const Group& g = groups[gi];
      const char* pf = nullptr;
      size_t pf_lines = 0;  // spread evenly over the work: by rows (x groups)
      if (!r) prefetch_share(p.prefetch, p.prefetch_lines, m0 * ng + gi * mr, m0 * ng + (gi + 1) * mr, p.m * ng, &pf, &pf_lines);
      tile_for(g.nv, r, pf_lines > 0, mr)(p.k, p.a + m0 * p.lda, p.lda, p.b, p.width, p.bias, p.c + m0 * p.ldc, p.ldc,
                                          p.cvs, g.g0, g.tail, r ? p.residual + m0 * e.ldr : nullptr, e, pf, pf_lines);
    }
  }
}
#else
void gemm_panel_avx2(const GemmPanel&, const PackedGemm::Epilogue&) {}
#endif

}  // namespace kiln_xnnpack
