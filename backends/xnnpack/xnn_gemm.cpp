#include "xnn_gemm.h"

#include <algorithm>
#include <array>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_XNN_X86 1
#endif

namespace kiln_xnnpack {

bool gemm_supported() {
#ifdef KILN_XNN_X86
  static const bool ok = __builtin_cpu_supports("avx512f");
  return ok;
#else
  return false;
#endif
}

namespace {

constexpr size_t kPanel = 32;  // output columns per packed panel (two vectors)

size_t vectors_of(size_t cols) { return cols > 16 ? 2 : 1; }

}  // namespace

PackedGemm::PackedGemm(const float* w, const float* bias, size_t n, size_t k, size_t k_pad) : n_(n), k_(k_pad) {
  for (size_t col0 = 0; col0 < n; col0 += kPanel) {
    const size_t width = vectors_of(std::min(kPanel, n - col0)) * 16;
    for (size_t kk = 0; kk < k_pad; ++kk)
      for (size_t j = 0; j < width; ++j) {
        const size_t col = col0 + j;
        panels_.push_back(col < n && kk < k ? w[col * k + kk] : 0.0f);
      }
  }
  bias_.assign((n + 15) / 16 * 16, 0.0f);
  if (bias) std::copy(bias, bias + n, bias_.begin());
}

#ifdef KILN_XNN_X86
namespace {

using Epilogue = PackedGemm::Epilogue;

// maskz: GCC 12's plain _mm512_max_ps/_min_ps trip -Wmaybe-uninitialized.
__attribute__((target("avx512f"))) inline __m512 clamp(__m512 v, __m512 lo, __m512 hi) {
  return _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, v, lo), hi);
}

// MR rows of A times one panel of NV vectors: the accumulators stay in
// registers over all of k; A is broadcast one element at a time.
template <size_t MR, size_t NV, bool R>
__attribute__((target("avx512f"))) void tile(size_t k, const float* a, size_t lda, const float* b, const float* bias,
                                             float* c, size_t ldc, __mmask16 last, const float* r, const Epilogue& e) {
  __m512 acc[MR][NV];
  for (size_t j = 0; j < NV; ++j) {
    const __m512 bj = _mm512_loadu_ps(bias + j * 16);
    for (size_t i = 0; i < MR; ++i) acc[i][j] = bj;
  }
  const float* ap[MR];
  for (size_t i = 0; i < MR; ++i) ap[i] = a + i * lda;
  for (size_t kk = 0; kk < k; ++kk) {
    __m512 bv[NV];
    for (size_t j = 0; j < NV; ++j) bv[j] = _mm512_loadu_ps(b + (kk * NV + j) * 16);
    for (size_t i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(ap[i][kk]);
      for (size_t j = 0; j < NV; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  const __m512 lo = _mm512_set1_ps(e.lo), hi = _mm512_set1_ps(e.hi);
  for (size_t i = 0; i < MR; ++i) {
    for (size_t j = 0; j < NV; ++j) {
      __m512 v = clamp(acc[i][j], lo, hi);
      if (R) {
        const __mmask16 mask = j + 1 == NV ? last : __mmask16(0xFFFF);
        v = clamp(_mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, r + i * e.ldr + j * 16)), _mm512_set1_ps(e.lo2),
                  _mm512_set1_ps(e.hi2));
      }
      if (j + 1 == NV) _mm512_mask_storeu_ps(c + i * ldc + j * 16, last, v);
      else _mm512_storeu_ps(c + i * ldc + j * 16, v);
    }
  }
}

using TileFn = void (*)(size_t, const float*, size_t, const float*, const float*, float*, size_t, __mmask16,
                        const float*, const Epilogue&);

// Rows per tile: 8 x 2 vectors or 12 x 1 vector keep 16 or 12 accumulators,
// enough independent FMAs to hide their latency on two FMA ports.
constexpr size_t kRows2 = 8, kRows1 = 12;

template <size_t NV, bool R, size_t... I>
constexpr auto tiles(std::index_sequence<I...>) {
  return std::array<TileFn, sizeof...(I)>{&tile<I + 1, NV, R>...};
}

}  // namespace

void PackedGemm::run(size_t m, const float* a, size_t lda, float* c, size_t ldc, const Epilogue& e) const {
  static constexpr auto two = tiles<2, false>(std::make_index_sequence<kRows2>{});
  static constexpr auto one = tiles<1, false>(std::make_index_sequence<kRows1>{});
  static constexpr auto two_r = tiles<2, true>(std::make_index_sequence<kRows2>{});
  static constexpr auto one_r = tiles<1, true>(std::make_index_sequence<kRows1>{});
  const float* b = panels_.data();
  for (size_t col0 = 0; col0 < n_; col0 += kPanel) {
    const size_t cols = std::min(kPanel, n_ - col0), nv = vectors_of(cols);
    const size_t tail = cols - (nv - 1) * 16;
    const __mmask16 last = static_cast<__mmask16>(tail == 16 ? 0xFFFF : (1u << tail) - 1);
    const size_t rows = nv == 2 ? kRows2 : kRows1;
    for (size_t m0 = 0; m0 < m; m0 += rows) {
      const size_t mr = std::min(rows, m - m0);
      const float* r = e.residual ? e.residual + m0 * e.ldr + col0 : nullptr;
      const TileFn f = nv == 2 ? (r ? two_r : two)[mr - 1] : (r ? one_r : one)[mr - 1];
      f(k_, a + m0 * lda, lda, b, bias_.data() + col0, c + m0 * ldc + col0, ldc, last, r, e);
    }
    b += k_ * nv * 16;
  }
}
#else
void PackedGemm::run(size_t, const float*, size_t, float*, size_t, const Epilogue&) const {}
#endif

}  // namespace kiln_xnnpack
