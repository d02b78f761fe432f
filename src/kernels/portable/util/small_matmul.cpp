// Small matrix products (see small_matmul.h).
//
// B is copied 16 or 32 columns at a time into a zero-padded block on the
// stack (k x NB, row-major; a transposed B such as K^T is transposed by the
// copy), then each group of R rows of A runs against the block with R x NB
// accumulators in registers: per p, one broadcast of A(i, p) per row and
// one fused multiply-add per vector of the block. A is read in place through
// its strides. The copy moves k * NB values for m * k * NB multiply-adds:
// 1/m of the product.
#include "kernels/portable/util/small_matmul.h"

#include <algorithm>
#include <cstring>

#include "kernels/portable/cpu/x86/isa.h"
#include "kernels/portable/util/interleave4.h"

#if defined(__GNUC__) && !defined(__clang__)
// FMA contraction for the accumulations (a * b + acc on vectors).
#pragma GCC optimize("fp-contract=fast")
#endif

namespace kiln::kernels {

namespace {

// 16 floats; lowered to one zmm, two ymm or four xmm by the target of the
// function it is inlined into.
typedef float V16 __attribute__((vector_size(64), aligned(64)));

// Columns [j0, j0 + cols) of B, rows 0..k, into blk[p * nb + j] (zeros past
// cols).
[[gnu::always_inline]] inline void copy_b_block(StridedMatrix b, int64_t k, int64_t j0, int64_t cols, int nb,
                                                float* blk) {
  if (b.cs == 1) {
    for (int64_t p = 0; p < k; ++p) {
      const float* src = b.p + p * b.rs + j0;
      float* dst = blk + p * nb;
      std::memcpy(dst, src, static_cast<size_t>(cols) * sizeof(float));
      std::fill(dst + cols, dst + nb, 0.f);
    }
    return;
  }
  // Column j of B is contiguous or strided over p: walk each column once.
  if (cols < nb)
    for (int64_t p = 0; p < k; ++p) std::fill(blk + p * nb + cols, blk + (p + 1) * nb, 0.f);
  int64_t j = 0;
  if (b.rs == 1)  // B^T stored row-major (K of Q K^T): four of its rows at a time
    for (; j + 4 <= cols; j += 4) interleave4(b.p + (j0 + j) * b.cs, b.cs, k, blk + j, nb);
  for (; j < cols; ++j) {
    const float* src = b.p + (j0 + j) * b.cs;
    for (int64_t p = 0; p < k; ++p) blk[p * nb + j] = src[p * b.rs];
  }
}

// R rows of A (from row i) times the block: NV vectors of 16 columns.
template <int R, int NV>
[[gnu::always_inline]] inline void rows_block(StridedMatrix a, int64_t i, int64_t k, const float* blk, float alpha,
                                              float* c, int64_t ldc, int64_t cols) {
  V16 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = V16{};
  const float* ap = a.p + i * a.rs;
  for (int64_t p = 0; p < k; ++p) {
    V16 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = *reinterpret_cast<const V16*>(blk + p * (16 * NV) + 16 * v);
    for (int r = 0; r < R; ++r) {
      const float x = ap[r * a.rs + p * a.cs];
      for (int v = 0; v < NV; ++v) acc[r][v] += x * bv[v];
    }
  }
  for (int r = 0; r < R; ++r) {
    float* dst = c + (i + r) * ldc;
    if (cols == 16 * NV) {
      for (int v = 0; v < NV; ++v) {
        const V16 y = acc[r][v] * alpha;
        std::memcpy(dst + 16 * v, &y, sizeof(V16));
      }
    } else {
      alignas(64) float tmp[16 * NV];
      for (int v = 0; v < NV; ++v) *reinterpret_cast<V16*>(tmp + 16 * v) = acc[r][v] * alpha;
      std::memcpy(dst, tmp, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}

// Every row of A times one block of NV vectors (its copy in `blk`).
template <int R, int NV>
[[gnu::always_inline]] inline void block_rows(int64_t m, int64_t k, float alpha, StridedMatrix a, const float* blk,
                                              float* cj, int64_t ldc, int64_t cols) {
  int64_t i = 0;
  for (; i + R <= m; i += R) rows_block<R, NV>(a, i, k, blk, alpha, cj, ldc, cols);
  // The last m % R rows, one call of their own height.
  switch (m - i) {
    case 1: rows_block<1, NV>(a, i, k, blk, alpha, cj, ldc, cols); break;
    case 2: rows_block<2, NV>(a, i, k, blk, alpha, cj, ldc, cols); break;
    case 3: rows_block<3, NV>(a, i, k, blk, alpha, cj, ldc, cols); break;
    case 4: if constexpr (R > 4) rows_block<4, NV>(a, i, k, blk, alpha, cj, ldc, cols); break;
    case 5: if constexpr (R > 5) rows_block<5, NV>(a, i, k, blk, alpha, cj, ldc, cols); break;
    default: break;
  }
}

template <int R, int NV>
[[gnu::always_inline]] inline void run(int64_t m, int64_t n, int64_t k, float alpha, StridedMatrix a, StridedMatrix b,
                                       float* c, int64_t ldc) {
  constexpr int kNb = 16 * NV;
  alignas(64) float blk[kSmallMatMulMaxK * kNb];
  for (int64_t j0 = 0; j0 < n; j0 += kNb) {
    const int64_t cols = std::min<int64_t>(kNb, n - j0);
    if (NV > 1 && cols <= 16) {  // a last block of at most 16 columns: one vector wide, no padded half
      copy_b_block(b, k, j0, cols, 16, blk);
      block_rows<R, 1>(m, k, alpha, a, blk, c + j0, ldc, cols);
    } else {
      copy_b_block(b, k, j0, cols, kNb, blk);
      block_rows<R, NV>(m, k, alpha, a, blk, c + j0, ldc, cols);
    }
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KILN_SMALL_MATMUL_X86 1
// AVX-512: 4 rows x 32 columns (8 zmm accumulators, 2 block loads and 4
// broadcasts per 8 FMAs). AVX2: 6 rows x 16 columns (12 ymm accumulators).
__attribute__((target("avx512f,avx2,fma"))) void run_avx512(int64_t m, int64_t n, int64_t k, float alpha,
                                                           StridedMatrix a, StridedMatrix b, float* c, int64_t ldc) {
  run<4, 2>(m, n, k, alpha, a, b, c, ldc);
}
__attribute__((target("avx2,fma"))) void run_avx2(int64_t m, int64_t n, int64_t k, float alpha, StridedMatrix a,
                                                  StridedMatrix b, float* c, int64_t ldc) {
  run<6, 1>(m, n, k, alpha, a, b, c, ldc);
}
#endif

void run_baseline(int64_t m, int64_t n, int64_t k, float alpha, StridedMatrix a, StridedMatrix b, float* c,
                  int64_t ldc) {
  run<2, 1>(m, n, k, alpha, a, b, c, ldc);
}

using RunFn = void (*)(int64_t, int64_t, int64_t, float, StridedMatrix, StridedMatrix, float*, int64_t);

RunFn variant_fn(int variant) {
#if defined(KILN_SMALL_MATMUL_X86)
  const cpu::Isa isa = cpu::kernel_isa();  // the CPU's level, capped by $KILN_CPU_ISA
  if (variant == 0) return isa >= cpu::Isa::kAvx512 ? run_avx512 : nullptr;
  if (variant == 1) return isa >= cpu::Isa::kAvx2 ? run_avx2 : nullptr;
#endif
  return variant == 2 ? run_baseline : nullptr;
}

RunFn pick() {
  for (int v = 0;; ++v)
    if (RunFn fn = variant_fn(v)) return fn;
}

}  // namespace

bool small_matmul_pays() { return cpu::kernel_isa() >= cpu::Isa::kAvx512; }

void small_matmul_f32(int64_t m, int64_t n, int64_t k, float alpha, StridedMatrix a, StridedMatrix b, float* c,
                      int64_t ldc) {
  pick()(m, n, k, alpha, a, b, c, ldc);
}

bool small_matmul_f32_variant(int variant, int64_t m, int64_t n, int64_t k, float alpha, StridedMatrix a,
                              StridedMatrix b, float* c, int64_t ldc) {
  const RunFn fn = variant_fn(variant);
  if (fn) fn(m, n, k, alpha, a, b, c, ldc);
  return fn != nullptr;
}

}  // namespace kiln::kernels
