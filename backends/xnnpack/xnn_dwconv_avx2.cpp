// The AVX2+FMA depthwise kernel (see xnn_dwconv_avx2.h). Functions using
// AVX2 carry the target attribute; the file is built with the library's
// baseline flags (as xnn_gemm_avx2.cpp).
#include "xnn_dwconv_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_XNN_X86 1
#endif

namespace kiln_xnnpack {

#ifdef KILN_XNN_X86
namespace {

constexpr size_t kBlock = 4;  // output pixels per step

// kBlock interior output pixels (all taps inside the row) from the three
// input rows (null: padding), starting at input column ix0: the
// (kBlock - 1) S + 3 columns of a row are loaded once, each added into
// every output that reads it. 9 filter vectors + 4 accumulators + a column
// fit the 16 registers.
template <size_t S>
__attribute__((target("avx2,fma"))) inline void block(const float* const* rows, size_t ix0, size_t P,
                                                      const __m256* w, __m256* acc) {
  constexpr size_t kCols = (kBlock - 1) * S + 3;
  for (size_t ky = 0; ky < 3; ++ky) {
    if (!rows[ky]) continue;
    const float* p = rows[ky] + ix0 * P;
#pragma GCC unroll 9
    for (size_t k = 0; k < kCols; ++k) {
      const __m256 col = _mm256_loadu_ps(p + k * P);
#pragma GCC unroll 4
      for (size_t j = 0; j < kBlock; ++j) {
        // Output j reads columns j S .. j S + 2.
        if (k >= j * S && k < j * S + 3) acc[j] = _mm256_fmadd_ps(col, w[ky * 3 + k - j * S], acc[j]);
      }
    }
  }
}

// One output pixel at input column ix0 (may reach into the padding).
__attribute__((target("avx2,fma"))) inline __m256 pixel(const float* const* rows, long ix0, long W, size_t P,
                                                        const __m256* w, __m256 acc) {
  for (size_t ky = 0; ky < 3; ++ky) {
    if (!rows[ky]) continue;
    for (long kx = 0; kx < 3; ++kx) {
      const long ix = ix0 + kx;
      if (ix < 0 || ix >= W) continue;
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(rows[ky] + static_cast<size_t>(ix) * P), w[ky * 3 + static_cast<size_t>(kx)],
                            acc);
    }
  }
  return acc;
}

__attribute__((target("avx2"))) inline __m256 clamp(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_min_ps(_mm256_max_ps(v, lo), hi);
}

// 8 channels (c0 .. c0 + 7) of the output rows.
template <size_t S>
__attribute__((target("avx2,fma"))) void rows8(const DepthwiseShape& s, const float* const* in_rows, size_t nrows,
                                               const float* filter, const float* bias, float* out, size_t out_row,
                                               size_t c0) {
  const size_t C = s.c, IP = s.in_px ? s.in_px : C, OP = s.out_px ? s.out_px : C;
  __m256 w[9];
  for (size_t t = 0; t < 9; ++t) w[t] = _mm256_loadu_ps(filter + t * C + c0);
  const __m256 b = bias ? _mm256_loadu_ps(bias + c0) : _mm256_setzero_ps();
  const long W = static_cast<long>(s.w), pl = static_cast<long>(s.pad_left);
  for (size_t r = 0; r < nrows; ++r, out += out_row) {
    const float* rows[3];
    for (size_t ky = 0; ky < 3; ++ky) rows[ky] = in_rows[3 * r + ky] ? in_rows[3 * r + ky] + c0 : nullptr;
    for (size_t ox = 0; ox < s.ow;) {
      const long ix0 = static_cast<long>(ox * S) - pl;
      if (ix0 >= 0 && ox + kBlock <= s.ow && ix0 + static_cast<long>((kBlock - 1) * S + 2) < W) {
        __m256 acc[kBlock] = {b, b, b, b};
        block<S>(rows, static_cast<size_t>(ix0), IP, w, acc);
        const __m256 lo = _mm256_set1_ps(s.lo), hi = _mm256_set1_ps(s.hi);
        for (size_t j = 0; j < kBlock; ++j) _mm256_storeu_ps(out + (ox + j) * OP + c0, clamp(acc[j], lo, hi));
        ox += kBlock;
        continue;
      }
      _mm256_storeu_ps(out + ox * OP + c0,
                       clamp(pixel(rows, ix0, W, IP, w, b), _mm256_set1_ps(s.lo), _mm256_set1_ps(s.hi)));
      ++ox;
    }
  }
}

}  // namespace

void depthwise3x3_rows16_avx2(const DepthwiseShape& s, const float* const* rows, size_t nrows, const float* filter,
                              const float* bias, float* output, size_t out_row, size_t c0) {
  // Wide rows: row by row, both halves of a row one after the other, so the
  // second reads the input lines the first brought into L1 (half by half
  // over all the rows of a band, its ring, ~32 KB per 16 channels at 56
  // pixels, came from L2 twice: the 112-pixel stride-2 layer of mobilenet_v2
  // took 1.7x the AVX-512 kernel's time, 1.45x so). Narrow rows: half by
  // half (loading the filter once a row cost more than it saved at 7 pixels).
  const size_t step = s.ow >= 16 ? 1 : nrows;
  for (size_t r = 0; r < nrows; r += step, rows += 3 * step, output += out_row * step)
    for (size_t half = c0; half < c0 + 16; half += 8) {
      if (s.stride == 1) rows8<1>(s, rows, step, filter, bias, output, out_row, half);
      else rows8<2>(s, rows, step, filter, bias, output, out_row, half);
    }
}
#else
void depthwise3x3_rows16_avx2(const DepthwiseShape&, const float* const*, size_t, const float*, const float*, float*,
                              size_t, size_t) {}
#endif

}  // namespace kiln_xnnpack
