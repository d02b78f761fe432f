// The AVX-512F SGEMM microkernel: a 12 x 32 tile, 24 zmm accumulators;
// broadcasts fold into the FMA. Built with -mavx512f (CMakeLists.txt); the
// engine calls it only on CPUs that have it.
#if defined(__x86_64__) || defined(__i386__)
// GCC 12's avx512fintrin.h initializes _mm512_undefined_ps() from itself,
// which -Wmaybe-uninitialized reports inside min/max; the value is unused.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "kernels/portable/cpu/x86/gemm_ukernel.h"

namespace kiln::kernels::gemm {
namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int64_t kLanes = 16, kMr = kAvx512Mr;
  static Reg zero() { return _mm512_setzero_ps(); }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static __mmask16 mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static Reg load_part(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store_part(float* p, Reg v, int64_t n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static Reg broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
};
static_assert(2 * Avx512::kLanes == kAvx512Nr);

}  // namespace

void ukernel_avx512(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mv, int64_t nv,
                    const TileStore& st) {
  ukernel_simd<Avx512>(kc, a, b, ldb, c, ldc, mv, nv, st);
}

}  // namespace kiln::kernels::gemm
#endif
