// Packing a constant GEMM operand once per model rather than once per load:
// asks the active PrepackStore (kernels/prepack.h) for bytes packed
// earlier under this process's layout, and offers fresh packings to it.
#pragma once

#include <string_view>

#include "kernels/kernel.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels {

/// PackedMatrix::pack_a(trans, m, k, a, lda) for `init`'s node, or the same
/// bytes from the active PrepackStore (kernels/prepack.h). `slot` tells apart several packings of one node
/// (Conv: one per group).
PackedMatrix pack_a_for(const KernelInit& init, std::string_view slot, bool trans, int64_t m, int64_t k,
                        const float* a, int64_t lda);
/// The same for PackedMatrix::pack_b.
PackedMatrix pack_b_for(const KernelInit& init, std::string_view slot, bool trans, int64_t k, int64_t n,
                        const float* b, int64_t ldb);

}  // namespace kiln::kernels
