// Small float32 matrix products without the GEMM engine's packing: the
// per-head products of attention (Q K^T, softmax(.) V; e.g. 48 x 48 x 32),
// thousands of them per run, each too small for packed panels and cache
// blocking to pay for themselves.
#pragma once

#include <cstdint>

namespace kiln::kernels {

/// A rows x cols float matrix with element (r, c) at p[r * rs + c * cs]
/// (any strides: the operands of TransposedMatMul are views of Q, K, V).
struct StridedMatrix {
  const float* p = nullptr;
  int64_t rs = 0;
  int64_t cs = 0;
};

/// The largest k small_matmul_f32 takes (its copy of B's columns lives on
/// the stack: k x 32 floats).
inline constexpr int64_t kSmallMatMulMaxK = 512;

/// c[i * ldc + j] = alpha * sum_p A(i, p) B(p, j) for an m x k A and a k x n
/// B, on the calling thread, for 1 <= k <= kSmallMatMulMaxK (the caller
/// checks). Sums run over p in order with fused multiply-adds where the CPU
/// has them; AVX-512 and AVX2 variants are picked at run time.
void small_matmul_f32(int64_t m, int64_t n, int64_t k, float alpha, StridedMatrix a, StridedMatrix b, float* c,
                      int64_t ldc);

/// Whether small_matmul_f32 beats the GEMM engine at the current ISA level:
/// only with AVX-512 (its 16-float vectors are one zmm there; at AVX2 GCC
/// lowers them piecewise and bert_encoder ran 1.7x slower than through the
/// engine). Callers take the engine otherwise.
bool small_matmul_pays();

/// For tests: the same product through one variant (0: AVX-512, 1: AVX2+FMA,
/// 2: baseline); false, computing nothing, where this CPU lacks it.
bool small_matmul_f32_variant(int variant, int64_t m, int64_t n, int64_t k, float alpha, StridedMatrix a,
                              StridedMatrix b, float* c, int64_t ldc);

}  // namespace kiln::kernels
