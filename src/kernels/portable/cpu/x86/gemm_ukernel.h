// The SGEMM register microkernel, written once over a vector-traits type V
// and instantiated per ISA in gemm_avx2.cpp and gemm_avx512.cpp, each
// compiled with its own -m flags. Include only from those files: everything
// here is inlined into the per-ISA function, so no ISA-specific code can
// leak into baseline callers through a shared inline definition.
//
// V provides:
//   using Reg;                               one vector of kLanes floats
//   static constexpr int64_t kLanes, kMr;    tile: kMr rows x 2 * kLanes columns
//   zero(), load(p), store(p, v), broadcast(p), set1(x),
//   load_part(p, n), store_part(p, v, n)     the first n (1..kLanes) lanes
//   add(a, b), mul(a, b), fmadd(a, b, c) (a * b + c), min(a, b), max(a, b)
//
// Edge tiles (fewer than kMr rows or 2 * kLanes columns of C) run a variant
// compiled for exactly their row count and vector count, with a masked store
// for a partial last vector: no work on rows that do not exist and no scalar
// store pass (C's edges are common in convolutions: Cout = 16 or 32, 7x7 and
// 14x14 maps).
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "kernels/portable/util/gemm_tile.h"

namespace kiln::kernels::gemm {

// R rows (<= kMr) and H vectors (1 or 2) of C; `nv` columns, of which the
// last vector holds nv - (H - 1) * kLanes (1..kLanes). A's panel is kMr
// wide whatever R is; B's rows are `ldb` apart (2 * kLanes when packed) and
// only the H vectors that C's columns need are read.
template <class V, int R, int H>
__attribute__((always_inline)) inline void ukernel_rh(int64_t kc, const float* a, const float* b, int64_t ldb,
                                                      float* c, int64_t ldc, int64_t nv, const TileStore& st) {
  using Reg = typename V::Reg;
  constexpr int64_t kMr = V::kMr, kL = V::kLanes;
  Reg acc[R][H];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) acc[i][h] = V::zero();
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
  }
  for (int64_t p = 0; p < kc; ++p) {
    Reg bv[H];
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) bv[h] = V::load(b + h * kL);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const Reg av = V::broadcast(a + i);
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) acc[i][h] = V::fmadd(av, bv[h], acc[i][h]);
    }
    a += kMr;
    b += ldb;
  }
  const int64_t tail = nv - (H - 1) * kL;  // lanes of the last vector
  const Reg alpha = V::set1(st.alpha);
  const Reg beta = V::set1(st.beta);
  const Reg lo = V::set1(st.lo);
  const Reg hi = V::set1(st.hi);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    float* crow = c + i * ldc;
#pragma GCC unroll 2
    for (int h = 0; h < H; ++h) {
      const bool part = h == H - 1 && tail != kL;
      auto load = [&](const float* p) { return part ? V::load_part(p, tail) : V::load(p); };
      Reg v = acc[i][h];
      if (st.alpha != 1.f) v = V::mul(v, alpha);
      if (st.first) {
        if (st.beta != 0.f) v = V::fmadd(beta, load(crow + h * kL), v);
        if (st.row_bias) v = V::add(v, V::set1(st.row_bias[i]));
        if (st.col_bias) v = V::add(v, load(st.col_bias + h * kL));
      } else {
        v = V::add(v, load(crow + h * kL));
      }
      if (st.last && st.clamp) v = V::min(V::max(v, lo), hi);
      if (part) V::store_part(crow + h * kL, v, tail);
      else V::store(crow + h * kL, v);
    }
  }
}

template <class V, int R, int H>
void ukernel_rh_fn(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t nv,
                   const TileStore& st) {
  ukernel_rh<V, R, H>(kc, a, b, ldb, c, ldc, nv, st);
}

using RowsHalvesFn = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t, int64_t,
                              const TileStore&);

// The variants for 1..kMr rows, one vector then two: table[(rows - 1) * 2 + halves - 1].
template <class V, int... I>
constexpr auto make_rh_table(std::integer_sequence<int, I...>) {
  return std::array<RowsHalvesFn, sizeof...(I)>{&ukernel_rh_fn<V, I / 2 + 1, I % 2 + 1>...};
}

/// The MicroKernelFn for V: dispatches the tile to the variant for its
/// rows and vectors.
template <class V>
inline void ukernel_simd(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mv,
                         int64_t nv, const TileStore& st) {
  constexpr int64_t kMr = V::kMr, kL = V::kLanes;
  if (mv == kMr && nv == 2 * kL) {
    ukernel_rh<V, static_cast<int>(kMr), 2>(kc, a, b, ldb, c, ldc, nv, st);
    return;
  }
  static constexpr auto table = make_rh_table<V>(std::make_integer_sequence<int, static_cast<int>(2 * kMr)>());
  table[static_cast<size_t>((mv - 1) * 2 + (nv > kL ? 1 : 0))](kc, a, b, ldb, c, ldc, nv, st);
}

}  // namespace kiln::kernels::gemm
