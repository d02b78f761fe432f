// The register kernel of the wide-map depthwise convolution
// (conv_depthwise_rows.h), written once over a vector-traits type V and
// instantiated per ISA in phase_rows_avx512.cpp and phase_rows_avx2.cpp,
// each compiled with its own -m flags. Include only from those files.
//
// V provides: Reg, kLanes, kRows (output rows per block), kVecs (vectors
// per block), set1, load, store, store_part(p, v, n) (the first n lanes),
// load_window(row, start, n, pad) (row[start + i], pad where start + i is
// outside [0, n), without touching those floats), fmadd(a, b, c)
// (a * b + c), min, max, deinterleave(a, b, even, odd) (the even and the
// odd lanes of the 2 kLanes floats a, b).
//
// A block is kRows output rows by up to kVecs vectors of one row. For each
// column tap kw and each row phase qh, the block loads every phase row it
// needs once per vector and feeds it to every output row whose tap (kh, kw)
// reads it (up to ceil(k_h / s_h) of them), with the taps' weights held in
// registers: for 3x3 stride 1 and four rows, 18 loads per 36 multiply-adds.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/portable/conv_depthwise_rows.h"

namespace kiln::kernels::dw_rows {

// acc[r][v] += w[QH + SH m][kw] * phase row (r + m) of phase QH, for the taps
// m of row phase QH. `src` is that phase plane at the block's first row and
// column (+ kw / s_w); `w` is the channel's weights + kw.
template <class V, int KH, int SH, int QH, int R, int NV>
__attribute__((always_inline)) inline void phase_taps(typename V::Reg (&acc)[R][NV], const float* src, int64_t wq,
                                                      const float* w, int64_t k_w) {
  using Reg = typename V::Reg;
  constexpr int M = (KH - QH + SH - 1) / SH;  // taps kh = QH + SH m of this phase
  Reg wt[M];
#pragma GCC unroll 8
  for (int m = 0; m < M; ++m) wt[m] = V::set1(w[(QH + SH * m) * k_w]);
#pragma GCC unroll 16
  for (int i = 0; i < R + M - 1; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const Reg x = V::load(src + i * wq + v * V::kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int m = i - r;
        if (m >= 0 && m < M) acc[r][v] = V::fmadd(wt[m], x, acc[r][v]);
      }
    }
  }
}

// One block: rows [r0, r0 + R) (those below `rows_left` stored) and NV
// vectors from column c0, the last holding `tail` lanes.
template <class V, int KH, int SH, int NV>
__attribute__((always_inline)) inline void block(const DwRowsBand& b, int64_t r0, int64_t c0, int64_t rows_left,
                                                 int64_t tail) {
  using Reg = typename V::Reg;
  constexpr int R = V::kRows;
  Reg acc[R][NV];
  const Reg bias = V::set1(b.bias);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = bias;
  const float* base = b.phases + r0 * b.wq + c0;
  for (int64_t kw = 0; kw < b.k_w; ++kw) {
    const float* col = base + b.col[kw];
    phase_taps<V, KH, SH, 0, R, NV>(acc, col, b.wq, b.w + kw, b.k_w);
    if constexpr (SH == 2) phase_taps<V, KH, SH, 1, R, NV>(acc, col + b.s_w * b.plane, b.wq, b.w + kw, b.k_w);
  }
  const Reg lo = V::set1(b.lo), hi = V::set1(b.hi);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (r >= rows_left) break;
    float* yr = b.y + (r0 + r) * b.out_w + c0;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      Reg o = acc[r][v];
      if (b.clamp) o = V::min(hi, V::max(lo, o));  // operands ordered so NaN stays NaN
      if (v == NV - 1 && tail != V::kLanes) {
        V::store_part(yr + v * V::kLanes, o, tail);
      } else {
        V::store(yr + v * V::kLanes, o);
      }
    }
  }
}

/// The DwRowsFn for V, k_h = KH and s_h = SH.
template <class V, int KH, int SH>
void band(const DwRowsBand& b) {
  constexpr int64_t L = V::kLanes, R = V::kRows, NV = V::kVecs;
  const int64_t nvec = (b.out_w + L - 1) / L, tail = b.out_w - (nvec - 1) * L;
  for (int64_t r0 = 0; r0 < b.rows; r0 += R) {
    const int64_t rows_left = b.rows - r0;
    int64_t v0 = 0;
    for (; v0 + NV <= nvec; v0 += NV) block<V, KH, SH, NV>(b, r0, v0 * L, rows_left, v0 + NV == nvec ? tail : L);
    const int64_t rest = nvec - v0;
    if (rest == 0) continue;
    static_assert(NV <= 4, "the remainder switch covers up to 3 vectors");
    if (rest == 1) {
      block<V, KH, SH, 1>(b, r0, v0 * L, rows_left, tail);
    } else if constexpr (NV > 2) {
      if (rest == 2) {
        block<V, KH, SH, 2>(b, r0, v0 * L, rows_left, tail);
      } else if constexpr (NV > 3) {
        block<V, KH, SH, 3>(b, r0, v0 * L, rows_left, tail);
      }
    }
  }
}

// The kLanes floats src[start + i] (i < kLanes) of a row of n floats, `pad`
// where start + i falls outside [0, n): masked loads never touch those.
template <class V>
__attribute__((always_inline)) inline typename V::Reg load_range(const float* src, int64_t start, int64_t n,
                                                                 float pad) {
  constexpr int64_t L = V::kLanes;
  if (start >= 0 && start + L <= n) return V::load(src + start);
  return V::load_window(src, start, n, pad);
}

// Phase rows of one input row, written whole (every column up to wq, a
// multiple of kLanes), so nothing else needs zeroing. xr null: zeros.
template <class V>
__attribute__((always_inline)) inline void fill_row_s1(const DwRowsFill& f, const float* xr, float* d) {
  constexpr int64_t L = V::kLanes;
  if (!xr) {
    for (int64_t c = 0; c < f.wq; c += L) V::store(d + c, V::set1(f.pad));
    return;
  }
  for (int64_t c = 0; c < f.wq; c += L) V::store(d + c, load_range<V>(xr, c - f.p_w, f.in_w, f.pad));
}

template <class V>
__attribute__((always_inline)) inline void fill_row_s2(const DwRowsFill& f, const float* xr, float* d) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  if (!xr) {
    for (int64_t c = 0; c < f.wq; c += L) {
      V::store(d + c, V::set1(f.pad));
      V::store(d + f.plane + c, V::set1(f.pad));
    }
    return;
  }
  for (int64_t c = 0; c < f.wq; c += L) {
    const int64_t start = 2 * c - f.p_w;
    Reg e, o;
    V::deinterleave(load_range<V>(xr, start, f.in_w, f.pad), load_range<V>(xr, start + L, f.in_w, f.pad), e, o);
    V::store(d + c, e);
    V::store(d + f.plane + c, o);
  }
}

// Any other column stride, one column at a time.
inline void fill_row_any(const DwRowsFill& f, const float* xr, float* d) {
  for (int64_t qw = 0; qw < f.s_w; ++qw)
    for (int64_t c = 0; c < f.wq; ++c) {
      const int64_t iw = c * f.s_w + qw - f.p_w;
      d[qw * f.plane + c] = xr && iw >= 0 && iw < f.in_w ? xr[iw] : f.pad;
    }
}

/// The DwFillFn for V.
template <class V>
void fill(const DwRowsFill& f) {
  for (int64_t qh = 0; qh < f.s_h; ++qh)
    for (int64_t j = 0; j < f.rows; ++j) {
      const int64_t ih = f.row0 + j * f.s_h + qh - f.p_h;
      const float* xr = ih >= 0 && ih < f.in_h ? f.x + ih * f.in_w : nullptr;
      float* d = f.phases + qh * f.s_w * f.plane + j * f.wq;
      if (f.s_w == 1) {
        fill_row_s1<V>(f, xr, d);
      } else if (f.s_w == 2) {
        fill_row_s2<V>(f, xr, d);
      } else {
        fill_row_any(f, xr, d);
      }
    }
}

/// The kernels for V: null members where (k_h, s_h) has none.
template <class V>
DwRowsKernels kernels_for(int64_t k_h, int64_t s_h) {
  DwRowsKernels k;
  if (s_h == 1) {
    if (k_h == 3) k.band = &band<V, 3, 1>;
    if (k_h == 5) k.band = &band<V, 5, 1>;
    if (k_h == 7) k.band = &band<V, 7, 1>;
  } else if (s_h == 2) {
    if (k_h == 3) k.band = &band<V, 3, 2>;
    if (k_h == 5) k.band = &band<V, 5, 2>;
    if (k_h == 7) k.band = &band<V, 7, 2>;
  }
  if (k.band) k.fill = &fill<V>;
  return k;
}

}  // namespace kiln::kernels::dw_rows
