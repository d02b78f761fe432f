// The register kernel of the channel-packed depthwise convolution
// (conv_depthwise_packed.h), over the vector traits of
// depthwise_rows_kernel.h plus transpose(r) (r[i] lane j <-> r[j] lane i,
// kLanes x kLanes) and zero(). Include only from the per-ISA files.
#pragma once

#include "kernels/portable/conv_depthwise_packed.h"
#include "kernels/portable/cpu/x86/depthwise_rows_kernel.h"

namespace kiln::kernels::dw_packed {

// dst[pos(j)] (kLanes floats) = lane l holding src[l * stride + j], for the
// n floats j of each of `ch` rows of src (lanes ch.. hold zero); pos(j) is
// the row-major position in a map of `cols` columns at (row0 + j / w,
// col0 + j % w), and pixels whose row reaches `rows` are dropped.
template <class V>
__attribute__((always_inline)) inline void pack(const float* src, int64_t stride, int64_t ch, int64_t n, int64_t w,
                                                int64_t rows, int64_t cols, int64_t row0, int64_t col0, float* dst) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  int64_t r = row0, c = col0;  // where pixel j0 lands
  for (int64_t j0 = 0; j0 < n; j0 += L) {
    Reg v[L];
    const bool whole = j0 + L <= n;
#pragma GCC unroll 16
    for (int64_t l = 0; l < L; ++l) {
      if (l >= ch) {
        v[l] = V::zero();
      } else {
        v[l] = whole ? V::load(src + l * stride + j0) : V::load_window(src + l * stride, j0, n, 0.f);
      }
    }
    V::transpose(v);
#pragma GCC unroll 16
    for (int64_t i = 0; i < L; ++i) {
      if (j0 + i >= n || r >= rows) break;
      if (c < cols) V::store(dst + (r * cols + c) * L, v[i]);
      if (++c == col0 + w) {
        c = col0;
        ++r;
      }
    }
  }
}

// B outputs of row oh from column ow0, all taps, into g.out (packed).
template <class V, int B>
__attribute__((always_inline)) inline void block(const DwPackedGroup& g, typename V::Reg bias, int64_t oh,
                                                 int64_t ow0) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  Reg acc[B];
#pragma GCC unroll 8
  for (int b = 0; b < B; ++b) acc[b] = bias;
  const int64_t step = g.s_w * L;
  for (int64_t kh = 0; kh < g.k_h; ++kh) {
    const float* row = g.packed + ((oh * g.s_h + kh) * g.wp + ow0 * g.s_w) * L;
    const float* wt = g.wt + kh * g.k_w * L;
    for (int64_t kw = 0; kw < g.k_w; ++kw) {
      const Reg wv = V::load(wt + kw * L);
      const float* p = row + kw * L;
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[b] = V::fmadd(wv, V::load(p + b * step), acc[b]);
    }
  }
  const Reg lo = V::set1(g.lo), hi = V::set1(g.hi);
  float* o = g.out + (oh * g.out_w + ow0) * L;
#pragma GCC unroll 8
  for (int b = 0; b < B; ++b) {
    Reg v = acc[b];
    if (g.clamp) v = V::min(hi, V::max(lo, v));  // operands ordered so NaN stays NaN
    V::store(o + b * L, v);
  }
}

template <class V>
void run_block(const DwPackedGroup& g, typename V::Reg bias, int64_t oh, int64_t ow0, int64_t n) {
  switch (n) {
    case 1: block<V, 1>(g, bias, oh, ow0); break;
    case 2: block<V, 2>(g, bias, oh, ow0); break;
    case 3: block<V, 3>(g, bias, oh, ow0); break;
    case 4: block<V, 4>(g, bias, oh, ow0); break;
    case 5: block<V, 5>(g, bias, oh, ow0); break;
    case 6: block<V, 6>(g, bias, oh, ow0); break;
    case 7: block<V, 7>(g, bias, oh, ow0); break;
    default: block<V, 8>(g, bias, oh, ow0); break;
  }
}

/// The DwPackedFn for V.
template <class V>
void group(const DwPackedGroup& g) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  const int64_t taps = g.k_h * g.k_w, out_n = g.out_h * g.out_w;
  pack<V>(g.x, g.in_h * g.in_w, g.ch, g.in_h * g.in_w, g.in_w, g.hp, g.wp, g.p_t, g.p_l, g.packed);
  pack<V>(g.w, taps, g.ch, taps, taps, 1, taps, 0, 0, g.wt);
  const Reg bias = g.bias ? V::load_window(g.bias, 0, g.ch, 0.f) : V::zero();
  // Rows in blocks of up to 8 outputs, as even as the width allows.
  const int64_t blocks = (g.out_w + 7) / 8, per = (g.out_w + blocks - 1) / blocks;
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    for (int64_t ow0 = 0; ow0 < g.out_w; ow0 += per) run_block<V>(g, bias, oh, ow0, std::min(per, g.out_w - ow0));
  // Back to planes: lane l of output pixel j goes to y[l][j].
  for (int64_t j0 = 0; j0 < out_n; j0 += L) {
    Reg v[L];
#pragma GCC unroll 16
    for (int64_t i = 0; i < L; ++i) v[i] = j0 + i < out_n ? V::load(g.out + (j0 + i) * L) : V::zero();
    V::transpose(v);
    const int64_t n = std::min(L, out_n - j0);
    for (int64_t l = 0; l < g.ch; ++l) {
      float* yl = g.y + l * out_n + j0;
      if (n == L) {
        V::store(yl, v[l]);
      } else {
        V::store_part(yl, v[l], n);
      }
    }
  }
}

}  // namespace kiln::kernels::dw_packed
