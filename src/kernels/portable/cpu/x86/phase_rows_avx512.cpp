// The AVX-512F phase-row kernels: the wide-map depthwise convolution in
// blocks of 4 rows x 4 zmm (64 columns), 16 accumulators, the taps of one
// kernel column in registers; the pools; the phase-row fill.
// Built with -mavx512f (CMakeLists.txt); conv_depthwise_rows.cpp calls them
// only on CPUs that have it.
#if defined(__x86_64__) || defined(__i386__)
// GCC 12's avx512fintrin.h initializes _mm512_undefined_ps() from itself,
// which -Wmaybe-uninitialized reports inside min/max; the value is unused.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "kernels/portable/cpu/x86/depthwise_packed_kernel.h"
#include "kernels/portable/cpu/x86/depthwise_rows_kernel.h"
#include "kernels/portable/cpu/x86/pool_rows_kernel.h"

namespace kiln::kernels {
namespace {

struct Avx512 {
  using Reg = __m512;
  static constexpr int64_t kLanes = 16;
  static constexpr int kRows = 4, kVecs = 4;
  static Reg set1(float x) { return _mm512_set1_ps(x); }
  static Reg zero() { return _mm512_setzero_ps(); }
  // r[i] lane j <-> r[j] lane i: pairs of rows interleaved, then quads
  // within 128-bit lanes, then the 128-bit lanes across four registers.
  static void transpose(Reg (&r)[16]) {
    Reg t[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; ++g) {  // r[4g + m], 128-bit lane k: column 4k + m of rows 4g..4g+3
      r[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
      r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
      r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
      r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int m = 0; m < 4; ++m) {
      const Reg v0 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x44), v1 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xEE);
      const Reg v2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x44);
      const Reg v3 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xEE);
      t[m] = _mm512_shuffle_f32x4(v0, v2, 0x88);
      t[4 + m] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
      t[8 + m] = _mm512_shuffle_f32x4(v1, v3, 0x88);
      t[12 + m] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
    for (int i = 0; i < 16; ++i) r[i] = t[i];
  }
  static Reg load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm512_storeu_ps(p, v); }
  static unsigned mask(int64_t n) { return (1u << n) - 1u; }
  static Reg load_window(const float* row, int64_t start, int64_t n, float pad) {
    const int64_t lo = std::max<int64_t>(0, -start), hi = std::min<int64_t>(kLanes, n - start);
    if (hi <= lo) return _mm512_set1_ps(pad);
    // The address may lie before the row; the masked-off lanes are never read.
    const auto* at = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + start * 4);
    return _mm512_mask_loadu_ps(_mm512_set1_ps(pad), static_cast<__mmask16>(mask(hi) & ~mask(lo)), at);
  }
  static void store_part(float* p, Reg v, int64_t n) { _mm512_mask_storeu_ps(p, static_cast<__mmask16>(mask(n)), v); }
  static void deinterleave(Reg a, Reg b, Reg& even, Reg& odd) {
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    even = _mm512_permutex2var_ps(a, ie, b);
    odd = _mm512_permutex2var_ps(a, io, b);
  }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static Reg min(Reg a, Reg b) { return _mm512_min_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm512_max_ps(a, b); }
  static Reg add(Reg a, Reg b) { return _mm512_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm512_mul_ps(a, b); }
  using Mask = __mmask16;
  static Mask no_nan() { return 0; }
  static Mask nan_lanes(Reg x) { return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); }
  static Mask mask_or(Mask a, Mask b) { return static_cast<Mask>(a | b); }
  static Reg with_nan(Reg v, Mask m) { return _mm512_mask_mov_ps(v, m, _mm512_set1_ps(__builtin_nanf(""))); }
  static Reg div_or_zero(Reg a, Reg b) {
    return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(b, _mm512_setzero_ps(), _CMP_GT_OQ), a, b);
  }
};
static_assert(Avx512::kLanes <= kDwRowsMaxLanes && Avx512::kRows - 1 <= kDwRowsSlackRows);

}  // namespace

DwRowsKernels depthwise_rows_kernels_avx512(int64_t k_h, int64_t s_h) { return dw_rows::kernels_for<Avx512>(k_h, s_h); }
PoolRowsKernels pool_rows_kernels_avx512() { return pool_rows::kernels_for<Avx512>(); }
DwPackedKernel depthwise_packed_kernel_avx512() { return {&dw_packed::group<Avx512>, Avx512::kLanes}; }

}  // namespace kiln::kernels
#endif
