// The AVX2 + FMA SGEMM microkernel: a 6 x 16 tile, 12 ymm accumulators, 2 for
// B, 1 for broadcasts. Built with -mavx2 -mfma (CMakeLists.txt); the engine
// calls it only on CPUs that have both.
#if defined(__x86_64__) || defined(__i386__)
#include "kernels/portable/cpu/x86/gemm_ukernel.h"

namespace kiln::kernels::gemm {
namespace {

struct Avx2 {
  using Reg = __m256;
  static constexpr int64_t kLanes = 8, kMr = kAvx2Mr;
  static Reg zero() { return _mm256_setzero_ps(); }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static __m256i mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Reg load_part(const float* p, int64_t n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store_part(float* p, Reg v, int64_t n) { _mm256_maskstore_ps(p, mask(n), v); }
  static Reg broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
};
static_assert(2 * Avx2::kLanes == kAvx2Nr);

}  // namespace

void ukernel_avx2(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mv, int64_t nv,
                  const TileStore& st) {
  ukernel_simd<Avx2>(kc, a, b, ldb, c, ldc, mv, nv, st);
}

}  // namespace kiln::kernels::gemm
#endif
