// The SGEMM register microkernel, written once over a vector-traits type V
// and instantiated per ISA in gemm_avx2.cpp and gemm_avx512.cpp, each
// compiled with its own -m flags. Include only from those files: everything
// here is inlined into the per-ISA function, so no ISA-specific code can
// leak into baseline callers through a shared inline definition.
//
// V provides:
//   using Reg;                               one vector of kLanes floats
//   static constexpr int64_t kLanes, kMr;    tile: kMr rows x 2 * kLanes columns
//   zero(), load(p), store_aligned(p, v), broadcast(p), set1(x),
//   add(a, b), mul(a, b), fmadd(a, b, c) (a * b + c), min(a, b), max(a, b)
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/portable/util/gemm_tile.h"

namespace kiln::kernels::gemm {

template <class V>
__attribute__((always_inline)) inline void ukernel_simd(int64_t kc, const float* a, const float* b, float* c,
                                                        int64_t ldc, int64_t mv, int64_t nv, const TileStore& st) {
  using Reg = typename V::Reg;
  constexpr int64_t kMr = V::kMr, kL = V::kLanes, kNr = 2 * V::kLanes;
  Reg acc[kMr][2];
#pragma GCC unroll 16
  for (int64_t i = 0; i < kMr; ++i) {
    acc[i][0] = V::zero();
    acc[i][1] = V::zero();
    if (i < mv) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kc; ++p) {
    const Reg b0 = V::load(b);
    const Reg b1 = V::load(b + kL);
#pragma GCC unroll 16
    for (int64_t i = 0; i < kMr; ++i) {
      const Reg av = V::broadcast(a + i);
      acc[i][0] = V::fmadd(av, b0, acc[i][0]);
      acc[i][1] = V::fmadd(av, b1, acc[i][1]);
    }
    a += kMr;
    b += kNr;
  }
  if (mv != kMr || nv != kNr) {
    alignas(64) float tmp[kMr * kNr];
    for (int64_t i = 0; i < kMr; ++i) {
      V::store_aligned(tmp + i * kNr, acc[i][0]);
      V::store_aligned(tmp + i * kNr + kL, acc[i][1]);
    }
    store_tile_scalar<V>(tmp, kNr, c, ldc, mv, nv, st);
    return;
  }
  const Reg alpha = V::set1(st.alpha);
  const Reg beta = V::set1(st.beta);
  const Reg lo = V::set1(st.lo);
  const Reg hi = V::set1(st.hi);
#pragma GCC unroll 16
  for (int64_t i = 0; i < kMr; ++i) {
    float* crow = c + i * ldc;
#pragma GCC unroll 2
    for (int64_t h = 0; h < 2; ++h) {
      Reg v = acc[i][h];
      if (st.alpha != 1.f) v = V::mul(v, alpha);
      if (st.first) {
        if (st.beta != 0.f) v = V::fmadd(beta, V::load(crow + h * kL), v);
        if (st.row_bias) v = V::add(v, V::set1(st.row_bias[i]));
        if (st.col_bias) v = V::add(v, V::load(st.col_bias + h * kL));
      } else {
        v = V::add(v, V::load(crow + h * kL));
      }
      if (st.last && st.clamp) v = V::min(V::max(v, lo), hi);
      V::store(crow + h * kL, v);
    }
  }
}

}  // namespace kiln::kernels::gemm
