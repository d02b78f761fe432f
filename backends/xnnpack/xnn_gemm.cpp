#include "xnn_gemm.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "xnn_gemm_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_XNN_X86 1
#endif

namespace kiln_xnnpack {

bool gemm_supported() { return kernel_isa() != Isa::kNone; }

namespace {

constexpr size_t kPanel = 32;  // output columns per packed panel (two vectors)

// Packed width of a panel of `cols` output columns: one vector, one and a
// half (exactly 24: the half runs as an 8-wide FMA, which costs half a
// 16-wide one on CPUs that split 512-bit operations), or two.
size_t panel_width(size_t cols) { return cols <= 16 ? 16 : cols == 24 ? 24 : 32; }

}  // namespace

PackedGemm::PackedGemm(const float* w, const float* bias, size_t n, size_t k, size_t k_pad)
    : n_(n), k_(k_pad), isa_(kernel_isa()) {
  size_t floats = 0;
  for (size_t col0 = 0; col0 < n; col0 += kPanel) floats += panel_width(std::min(kPanel, n - col0)) * k_pad;
  panels_.assign(floats);
  float* out = panels_.data();
  for (size_t col0 = 0; col0 < n; col0 += kPanel) {
    const size_t width = panel_width(std::min(kPanel, n - col0));
    for (size_t kk = 0; kk < k_pad; ++kk)
      for (size_t j = 0; j < width; ++j) {
        const size_t col = col0 + j;
        *out++ = col < n && kk < k ? w[col * k + kk] : 0.0f;
      }
  }
  bias_.assign((n + 31) / 32 * 32, 0.0f);
  if (bias) std::copy(bias, bias + n, bias_.begin());
}

#ifdef KILN_XNN_X86
namespace {

using Epilogue = PackedGemm::Epilogue;

// maskz: GCC 12's plain _mm512_max_ps/_min_ps trip -Wmaybe-uninitialized.
__attribute__((target("avx512f"))) inline __m512 clamp(__m512 v, __m512 lo, __m512 hi) {
  return _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, v, lo), hi);
}

// MR rows of A times one panel of W columns (16, 24 or 32: NZ full vectors
// and, for 24, an 8-wide half vector): the accumulators stay in registers
// over all of k; A is broadcast one element at a time. The last full vector
// is stored under `last` (a panel of 16 or 32 may end early).
// With P, it prefetches `pf_lines` 64-byte lines from `pf`, spread evenly
// over the steps of k.
template <size_t MR, size_t W, bool R, bool P>
__attribute__((target("avx512f,fma"))) void tile(size_t k, const float* a, size_t lda, const float* b,
                                                 const float* bias, float* c, size_t ldc, size_t cvs, __mmask16 last,
                                                 const float* r, const Epilogue& e, const char* pf, size_t pf_lines) {
  constexpr size_t NZ = W / 16;
  constexpr bool H = W % 16 != 0;
  __m512 acc[MR][NZ];
  __m256 acch[MR];
  size_t due = 0;  // P: prefetches owed (times k)
  for (size_t j = 0; j < NZ; ++j) {
    const __m512 bj = _mm512_loadu_ps(bias + j * 16);
    for (size_t i = 0; i < MR; ++i) acc[i][j] = bj;
  }
  if (H) {
    const __m256 bh = _mm256_loadu_ps(bias + NZ * 16);
    for (size_t i = 0; i < MR; ++i) acch[i] = bh;
  }
  for (size_t kk = 0; kk < k; ++kk, ++a, b += W) {
    __m512 bv[NZ];
    for (size_t j = 0; j < NZ; ++j) bv[j] = _mm512_loadu_ps(b + j * 16);
    const __m256 bh = H ? _mm256_loadu_ps(b + NZ * 16) : _mm256_setzero_ps();
    if (P) prefetch_step(pf, pf_lines, k, due);
    for (size_t i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * lda]);
      for (size_t j = 0; j < NZ; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
      if (H) acch[i] = _mm256_fmadd_ps(_mm256_set1_ps(a[i * lda]), bh, acch[i]);
    }
  }
  const __m512 lo = _mm512_set1_ps(e.lo), hi = _mm512_set1_ps(e.hi);
#pragma GCC unroll 16
  for (size_t i = 0; i < MR; ++i) {
#pragma GCC unroll 2
    for (size_t j = 0; j < NZ; ++j) {
      const __mmask16 mask = !H && j + 1 == NZ ? last : __mmask16(0xFFFF);
      __m512 v = clamp(acc[i][j], lo, hi);
      if (R) {
        v = clamp(_mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, r + i * e.ldr + j * 16)), _mm512_set1_ps(e.lo2),
                  _mm512_set1_ps(e.hi2));
      }
      _mm512_mask_storeu_ps(c + i * ldc + j * cvs, mask, v);
    }
    if (H) {
      __m256 v = _mm256_min_ps(_mm256_max_ps(acch[i], _mm256_set1_ps(e.lo)), _mm256_set1_ps(e.hi));
      if (R) {
        v = _mm256_add_ps(v, _mm256_loadu_ps(r + i * e.ldr + NZ * 16));
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(e.lo2)), _mm256_set1_ps(e.hi2));
      }
      _mm256_storeu_ps(c + i * ldc + NZ * cvs, v);
    }
  }
}

using TileFn = void (*)(size_t, const float*, size_t, const float*, const float*, float*, size_t, size_t, __mmask16,
                        const float*, const Epilogue&, const char*, size_t);

// Rows per tile: 8 x 32 or 12 x 16/24 columns keep 16 to 24 accumulators,
// enough independent FMAs to hide their latency on two FMA ports.
constexpr size_t rows_for(size_t width) { return width == 32 ? 8 : 12; }

template <size_t W, bool R, bool P, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tiles(std::index_sequence<I...>) {
  return {&tile<I + 1, W, R, P>...};
}

template <size_t W, bool R, bool P>
TileFn tile_for(size_t mr) {
  static constexpr auto t = tiles<W, R, P>(std::make_index_sequence<rows_for(W)>{});
  return t[mr - 1];
}

// The tile for `mr` rows of a `W`-wide panel: with a residual, or prefetching (never both).
template <size_t W>
TileFn tile_for(size_t mr, bool r, bool p) {
  return r ? tile_for<W, true, false>(mr) : p ? tile_for<W, false, true>(mr) : tile_for<W, false, false>(mr);
}

}  // namespace

void PackedGemm::run(size_t m, const float* a, size_t lda, float* c, size_t ldc, const Epilogue& e, size_t cvs) const {
  run_range(m, a, lda, c, ldc, e, cvs, 0, panels(), {});
}

void PackedGemm::run_panels(size_t m, const float* a, size_t lda, float* c, size_t ldc, const Epilogue& e, size_t p0,
                            size_t p1, const Prefetch& pf) const {
  run_range(m, a, lda, c, ldc, e, 16, p0, std::min(p1, panels()), pf);
}

void PackedGemm::run_range(size_t m, const float* a, size_t lda, float* c, size_t ldc, const Epilogue& e, size_t cvs,
                           size_t p0, size_t p1, const Prefetch& pf) const {
  // The prefetch stream's lines, dealt out to the panels and, in a panel, to its tiles.
  const auto pf_at = reinterpret_cast<uintptr_t>(pf.data);
  const char* pf_base = reinterpret_cast<const char*>(pf_at / 64 * 64);
  const size_t pf_lines = pf.bytes > 0 && !e.residual ? (pf_at % 64 + pf.bytes + 63) / 64 : 0;
  const float* b = panels_.data() + p0 * kPanel * k_;  // every panel before the last is kPanel wide
  for (size_t col0 = p0 * kPanel; col0 < std::min(n_, p1 * kPanel); col0 += kPanel) {
    const size_t cols = std::min(kPanel, n_ - col0), width = panel_width(cols);
    const char* ppf = nullptr;
    size_t ppf_lines = 0;
    prefetch_share(pf_base, pf_lines, col0 / kPanel - p0, col0 / kPanel - p0 + 1, p1 - p0, &ppf, &ppf_lines);
    const size_t at = col0 - p0 * kPanel;  // c and the residual start at column p0 * kPanel
    if (isa_ == Isa::kAvx2) {
      const float* r = e.residual ? e.residual + at : nullptr;
      gemm_panel_avx2(
          {m, k_, a, lda, b, width, cols, bias_.data() + col0, c + at / 16 * cvs, ldc, cvs, r, ppf, ppf_lines}, e);
      b += k_ * width;
      continue;
    }
    const size_t tail = cols - (width == 32 ? 16 : 0);
    const __mmask16 last = static_cast<__mmask16>(tail >= 16 ? 0xFFFF : (1u << tail) - 1);
    const size_t rows = rows_for(width);
    for (size_t m0 = 0; m0 < m; m0 += rows) {
      const size_t mr = std::min(rows, m - m0);
      const float* r = e.residual ? e.residual + m0 * e.ldr + at : nullptr;
      const char* tpf = nullptr;
      size_t tpf_lines = 0;
      prefetch_share(ppf, ppf_lines, m0, m0 + mr, m, &tpf, &tpf_lines);  // by rows: spread evenly over the work
      TileFn f = nullptr;
      if (width == 32)
        f = tile_for<32>(mr, r, tpf_lines > 0);
      else if (width == 24)
        f = tile_for<24>(mr, r, tpf_lines > 0);
      else
        f = tile_for<16>(mr, r, tpf_lines > 0);
      f(k_, a + m0 * lda, lda, b, bias_.data() + col0, c + m0 * ldc + at / 16 * cvs, ldc, cvs, last, r, e, tpf,
        tpf_lines);
    }
    b += k_ * width;
  }
}
#else
void PackedGemm::run(size_t, const float*, size_t, float*, size_t, const Epilogue&, size_t) const {}
void PackedGemm::run_panels(size_t, const float*, size_t, float*, size_t, const Epilogue&, size_t, size_t,
                            const Prefetch&) const {}
void PackedGemm::run_range(size_t, const float*, size_t, float*, size_t, const Epilogue&, size_t, size_t, size_t,
                           const Prefetch&) const {}
#endif

}  // namespace kiln_xnnpack
