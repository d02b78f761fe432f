// numpy-style batched matrix multiplication shared by MatMul, MatMulInteger,
// QLinearMatMul and Einsum: shape rules (1-D operands, broadcast batch dims)
// and a float32 driver on the SGEMM engine.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels {

/// How the batches of A [..., M, K] and B [..., K, N] pair up. A 1-D A is
/// [1, K] with M dropped from the output; a 1-D B is [K, 1] with N dropped.
struct MatMulPlan {
  Shape out_shape;
  int64_t m = 0, n = 0, k = 0;
  int64_t batches = 1;                 // product of the broadcast batch dims
  std::vector<int64_t> a_offset;       // per batch, element offset of its A matrix
  std::vector<int64_t> b_offset;       // per batch, element offset of its B matrix
  /// True when B is one matrix for every batch and A's batches are all
  /// distinct and contiguous: then A is one (batches * M) x K matrix.
  bool fold_a_batches = false;
};

/// Builds the plan; errors name the node and both shapes.
Result<MatMulPlan> plan_matmul(const Shape& a, const Shape& b);

/// out = A x B for float32 following `plan`; `packed_b`, when not null, is B
/// (2-D, K x N) packed once, and `packed_a` A (2-D, M x K). Runs batches in
/// parallel on `pool` when each is small. `epilogue` applies to every batch
/// (col_bias: N values).
void matmul_f32(const MatMulPlan& plan, const float* a, const float* b, const PackedMatrix* packed_b, float* out,
                ThreadPool* pool, const GemmEpilogue& epilogue = {}, const PackedMatrix* packed_a = nullptr);

}  // namespace kiln::kernels
