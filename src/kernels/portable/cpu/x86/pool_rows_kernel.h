// The register kernels of the phase-row pools (pool_rows.h), written once
// over the vector traits of depthwise_rows_kernel.h, plus: max, add,
// Mask, no_nan(), nan_lanes(x) (the NaN lanes of x), mask_or, with_nan(v, m)
// (v with NaN in the lanes of m), div_or_zero(a, b) (a / b, 0 where b <= 0).
// Include only from the per-ISA files.
#pragma once

#include "kernels/portable/cpu/x86/depthwise_rows_kernel.h"
#include "kernels/portable/pool_rows.h"

namespace kiln::kernels::pool_rows {

// NV vectors of one output row from column c0, the last holding `tail`
// lanes: max (NaN wins) or sum over the window, then the average's divide.
template <class V, bool kMax, int NV>
__attribute__((always_inline)) inline void block(const PoolRowsBand& b, int64_t r, int64_t c0, int64_t tail) {
  using Reg = typename V::Reg;
  constexpr int64_t L = V::kLanes;
  Reg acc[NV];
  typename V::Mask nan[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    acc[v] = V::set1(kMax ? -__builtin_inff() : 0.f);
    nan[v] = V::no_nan();
  }
  for (int64_t kh = 0; kh < b.k_h; ++kh) {
    const float* row = b.phases + (kh % b.s_h) * b.s_w * b.plane + (r + kh / b.s_h) * b.wq + c0;
    for (int64_t kw = 0; kw < b.k_w; ++kw) {
      const float* p = row + b.col[kw];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const Reg x = V::load(p + v * L);
        if constexpr (kMax) {
          acc[v] = V::max(acc[v], x);
          nan[v] = V::mask_or(nan[v], V::nan_lanes(x));
        } else {
          acc[v] = V::add(acc[v], x);
        }
      }
    }
  }
  float* yr = b.y + r * b.out_w + c0;
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    Reg o = acc[v];
    if constexpr (kMax) {
      o = V::with_nan(o, nan[v]);
    } else {
      const Reg count = V::mul(V::set1(b.row_count[r]), V::load(b.col_count + c0 + v * L));
      o = V::div_or_zero(o, count);
    }
    if (v == NV - 1 && tail != L) {
      V::store_part(yr + v * L, o, tail);
    } else {
      V::store(yr + v * L, o);
    }
  }
}

/// The PoolRowsFn for V.
template <class V, bool kMax>
void band(const PoolRowsBand& b) {
  constexpr int64_t L = V::kLanes, NV = 2;
  const int64_t nvec = (b.out_w + L - 1) / L, tail = b.out_w - (nvec - 1) * L;
  for (int64_t r = 0; r < b.rows; ++r) {
    int64_t v0 = 0;
    for (; v0 + NV <= nvec; v0 += NV) block<V, kMax, NV>(b, r, v0 * L, v0 + NV == nvec ? tail : L);
    if (v0 < nvec) block<V, kMax, 1>(b, r, v0 * L, tail);
  }
}

template <class V>
PoolRowsKernels kernels_for() {
  PoolRowsKernels k;
  k.max = &band<V, true>;
  k.average = &band<V, false>;
  k.fill = &dw_rows::fill<V>;
  return k;
}

}  // namespace kiln::kernels::pool_rows
