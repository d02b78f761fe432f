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
/// for partial edge tiles. `Isa` is a type local to the calling file, so each
/// ISA's file gets its own (vectorized for that ISA) copy and none can stand
/// in for another at link time.
template <class Isa>
inline void store_tile_scalar(const float* acc, int64_t acc_ld, float* c, int64_t ldc, int64_t mv, int64_t nv,
                              const TileStore& st) {
  for (int64_t i = 0; i < mv; ++i) {
    float* crow = c + i * ldc;
    const float* arow = acc + i * acc_ld;
    for (int64_t j = 0; j < nv; ++j) {
      float v = st.alpha * arow[j];
      if (st.first) {
        if (st.beta != 0.f) v += st.beta * crow[j];
        if (st.row_bias) v += st.row_bias[i];
        if (st.col_bias) v += st.col_bias[j];
      } else {
        v += crow[j];
      }
      if (st.last && st.clamp) v = v < st.lo ? st.lo : (v > st.hi ? st.hi : v);
      crow[j] = v;
    }
  }
}

/// C[0:mv, 0:nv] (row stride ldc) gets the MR x NR product of a packed A
/// sliver (kc x MR) and a B sliver of kc rows of NR values `ldb` apart
/// (ldb == NR: packed; else B's own rows, read in place), then the epilogue.
using MicroKernelFn = void (*)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc,
                               int64_t mv, int64_t nv, const TileStore& st);

#if defined(__x86_64__) || defined(__i386__)
/// The x86 microkernels (cpu/x86/gemm_avx2.cpp, gemm_avx512.cpp), each
/// compiled for its ISA; call only when the CPU has it.
inline constexpr int64_t kAvx2Mr = 6, kAvx2Nr = 16;
inline constexpr int64_t kAvx512Mr = 12, kAvx512Nr = 32;
void ukernel_avx2(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mv,
                  int64_t nv, const TileStore& st);
void ukernel_avx512(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mv,
                    int64_t nv, const TileStore& st);
#endif

}  // namespace kiln::kernels::gemm
