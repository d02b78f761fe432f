// The AVX2 + FMA phase-row kernels: the wide-map depthwise convolution in
// blocks of 4 rows x 2 ymm (16 columns), 8 accumulators, the taps of one
// kernel column in registers; the pools; the phase-row fill.
// Built with -mavx2 -mfma (CMakeLists.txt); conv_depthwise_rows.cpp calls
// them only on CPUs that have both.
#if defined(__x86_64__) || defined(__i386__)
#include "kernels/portable/cpu/x86/depthwise_packed_kernel.h"
#include "kernels/portable/cpu/x86/depthwise_rows_kernel.h"
#include "kernels/portable/cpu/x86/pool_rows_kernel.h"

namespace kiln::kernels {
namespace {

struct Avx2 {
  using Reg = __m256;
  static constexpr int64_t kLanes = 8;
  static constexpr int kRows = 4, kVecs = 2;
  static Reg set1(float x) { return _mm256_set1_ps(x); }
  static Reg zero() { return _mm256_setzero_ps(); }
  // r[i] lane j <-> r[j] lane i: pairs of rows interleaved, then quads
  // within 128-bit lanes, then the 128-bit lanes across two registers.
  static void transpose(Reg (&r)[8]) {
    Reg t[8];
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; ++g) {  // r[4g + m], 128-bit lane k: column 4k + m of rows 4g..4g+3
      r[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
      r[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
      r[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
      r[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int m = 0; m < 4; ++m) {
      t[m] = _mm256_permute2f128_ps(r[m], r[4 + m], 0x20);
      t[4 + m] = _mm256_permute2f128_ps(r[m], r[4 + m], 0x31);
    }
    for (int i = 0; i < 8; ++i) r[i] = t[i];
  }
  static Reg load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Reg v) { _mm256_storeu_ps(p, v); }
  static __m256i mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static Reg load_window(const float* row, int64_t start, int64_t n, float pad) {
    const int64_t lo = std::max<int64_t>(0, -start), hi = std::min<int64_t>(kLanes, n - start);
    if (hi <= lo) return _mm256_set1_ps(pad);
    // The address may lie before the row; the masked-off lanes are never read.
    const auto* at = reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) + start * 4);
    const __m256i in = _mm256_andnot_si256(mask(lo), mask(hi));
    return _mm256_blendv_ps(_mm256_set1_ps(pad), _mm256_maskload_ps(at, in), _mm256_castsi256_ps(in));
  }
  static void store_part(float* p, Reg v, int64_t n) { _mm256_maskstore_ps(p, mask(n), v); }
  static void deinterleave(Reg a, Reg b, Reg& even, Reg& odd) {
    // Within each 128-bit half: a0 a2 b0 b2 | a4 a6 b4 b6; then the 64-bit
    // quarters reordered to a0 a2 a4 a6 b0 b2 b4 b6.
    const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  static Reg fmadd(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static Reg min(Reg a, Reg b) { return _mm256_min_ps(a, b); }
  static Reg max(Reg a, Reg b) { return _mm256_max_ps(a, b); }
  static Reg add(Reg a, Reg b) { return _mm256_add_ps(a, b); }
  static Reg mul(Reg a, Reg b) { return _mm256_mul_ps(a, b); }
  using Mask = __m256;
  static Mask no_nan() { return _mm256_setzero_ps(); }
  static Mask nan_lanes(Reg x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }
  static Mask mask_or(Mask a, Mask b) { return _mm256_or_ps(a, b); }
  static Reg with_nan(Reg v, Mask m) { return _mm256_blendv_ps(v, _mm256_set1_ps(__builtin_nanf("")), m); }
  static Reg div_or_zero(Reg a, Reg b) {
    return _mm256_and_ps(_mm256_div_ps(a, b), _mm256_cmp_ps(b, _mm256_setzero_ps(), _CMP_GT_OQ));
  }
};
static_assert(Avx2::kLanes <= kDwRowsMaxLanes && Avx2::kRows - 1 <= kDwRowsSlackRows);

}  // namespace

DwRowsKernels depthwise_rows_kernels_avx2(int64_t k_h, int64_t s_h) { return dw_rows::kernels_for<Avx2>(k_h, s_h); }
PoolRowsKernels pool_rows_kernels_avx2() { return pool_rows::kernels_for<Avx2>(); }
DwPackedKernel depthwise_packed_kernel_avx2() { return {&dw_packed::group<Avx2>, Avx2::kLanes}; }

}  // namespace kiln::kernels
#endif
