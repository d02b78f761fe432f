// Phase-B matchers (optimizer.h) for the patterns transformer exports leave
// to portable kernels: GPT-2's tanh Gelu, and a Linear layer on a 3-D (or
// untyped) input, MatMul + bias Add, with the Gelu after it, as one node.
#pragma once

#include <cstddef>
#include <vector>

#include "optimizer/matcher.h"
#include "optimizer/optimizer.h"

namespace kiln::optimizer {

/// The domain of the fused nodes below (Kiln-private: only phase B makes
/// them, for the portable kernels), and the op of the fused Linear layer:
/// MatMul(A, B) + bias, then an optional activation ("activation": "Gelu" or
/// "GeluTanh"), one pass over the product. Inputs A (any rank), B (a
/// matrix), bias ([N]).
inline constexpr const char* kKilnDomain = "kiln";
inline constexpr const char* kMatMulBiasOp = "MatMulBias";

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ending at node `ni` (the
/// last Mul), with the cube as Pow(x, 3) or x * x * x and the products in
/// any order (GPT-2's gelu_new, torch's GELU(approximate="tanh")): Gelu with
/// approximate "tanh". Counted as "gelu tanh".
void match_gelu_tanh(Matcher& m, size_t ni, std::vector<Fusion>* out);

/// MatMul at node `ni` whose B is a constant float32 matrix and whose A is
/// not known to be 2-D (2-D MatMul + Add becomes Gemm), read only by an Add
/// of a constant float32 [N] bias: MatMulBias. Counted as "matmul+bias".
void match_matmul_bias(Matcher& m, size_t ni, std::vector<Fusion>* out);

/// MatMul at node `ni` with a Transpose before either input (read only by
/// it) or after it (its only reader) that leaves one of each matrix's two
/// strides at 1 (the output's last axis stays last): kiln TransposedMatMul
/// with the perms (perm_a, perm_b, perm_y), the GEMM reading and writing
/// strided matrices where the Transposes would copy (attention's per-head
/// Q K^T and P V in torch's exports). A Mul or Div by a scalar constant of
/// an input (before or after its Transpose) or of the product goes into the
/// GEMM's alpha (attention's 1 / sqrt(d)). Not when B is a constant (MatMul
/// packs weights once). Counted as "transpose+matmul", or "matmul+scale"
/// when only scales went in.
void match_transposed_matmul(Matcher& m, size_t ni, std::vector<Fusion>* out);

/// After the matchers: a MatMulBias proposal, or a Gemm proposal of a 2-D
/// MatMul + [N] bias, whose output only a Gelu reads (a Gelu node or a
/// "gelu" / "gelu tanh" proposal) becomes one MatMulBias with that
/// activation, which the GEMM applies to each block of the product while it
/// is in cache. Counted as "matmul+bias+gelu".
void merge_matmul_activation(Matcher& m, std::vector<Fusion>* out);

}  // namespace kiln::optimizer
