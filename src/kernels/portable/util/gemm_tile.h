// What the SGEMM engine (gemm.cpp) and its register microkernels
// (cpu/x86/gemm_*.cpp) share: the tile epilogue and the microkernel
// signature. Internal to the engine; kernels use gemm.h.
#pragma once

#include <cstdint>

namespace kiln::kernels::gemm {

// What the microkernel does with its MR x NR accumulator tile. The bias
// pointers are already offset to the tile's first row / column.
struct TileStore {
  float alpha = 1.f;
  float beta = 0.f;
  bool first = true;  // first K block: apply beta and the biases
  bool last = true;   // last K block: apply the clamp
  bool clamp = false;
  float lo = 0.f, hi = 0.f;
  const float* row_bias = nullptr;
  const float* col_bias = nullptr;
};

/// The epilogue for one tile whose accumulators were spilled to `acc` (row
/// stride `acc_ld`): the portable kernel's store, and the SIMD kernels' store
/// for partial edge tiles. Compiled for the baseline ISA (gemm.cpp).
void store_tile_scalar(const float* acc, int64_t acc_ld, float* c, int64_t ldc, int64_t mv, int64_t nv,
                       const TileStore& st);

/// C[0:mv, 0:nv] (row stride ldc) gets the MR x NR product of a packed A
/// sliver (kc x MR) and a packed B sliver (kc x NR), then the epilogue.
using MicroKernelFn = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t mv,
                               int64_t nv, const TileStore& st);

#if defined(__x86_64__) || defined(__i386__)
/// The x86 microkernels (cpu/x86/gemm_avx2.cpp, gemm_avx512.cpp), each
/// compiled for its ISA; call only when the CPU has it.
inline constexpr int64_t kAvx2Mr = 6, kAvx2Nr = 16;
inline constexpr int64_t kAvx512Mr = 12, kAvx512Nr = 32;
void ukernel_avx2(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t mv, int64_t nv,
                  const TileStore& st);
void ukernel_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t mv, int64_t nv,
                    const TileStore& st);
#endif

}  // namespace kiln::kernels::gemm
