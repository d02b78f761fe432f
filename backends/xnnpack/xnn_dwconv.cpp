#include "xnn_dwconv.h"

#include "xnn_dwconv_avx2.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_XNN_X86 1
#endif

namespace kiln_xnnpack {

bool native_depthwise_supported() { return kernel_isa() != Isa::kNone; }

bool native_depthwise_fits(const std::vector<int64_t>& i, const std::vector<int64_t>& in) {
  if (i.size() < 12 || in.size() != 4) return false;
  const int64_t pt = i[0], pr = i[1], pb = i[2], pl = i[3];
  const bool pads_ok = pt >= 0 && pr >= 0 && pb >= 0 && pl >= 0 && pt < 3 && pr < 3 && pb < 3 && pl < 3;
  return pads_ok && i[4] == 3 && i[5] == 3 && i[6] == i[7] && (i[6] == 1 || i[6] == 2) && i[8] == 1 && i[9] == 1 &&
         i[10] == 1 && i[11] == in[3] && in[3] % 16 == 0 && in[1] > 0 && in[2] > 0;
}

#ifdef KILN_XNN_X86
namespace {

// Four interior output pixels from `rows` (3 input rows, null: padding),
// starting at input column ix0: the (3 * S + 3) input columns of a row are
// loaded once for all four.
template <size_t S>
__attribute__((target("avx512f"))) inline void block4(const float* const* rows, size_t ix0, size_t C, const __m512* w,
                                                      __m512* acc) {
  constexpr size_t kCols = 3 * S + 3;
  for (size_t ky = 0; ky < 3; ++ky) {
    if (!rows[ky]) continue;
    const float* p = rows[ky] + ix0 * C;
    __m512 col[kCols];
    for (size_t k = 0; k < kCols; ++k) col[k] = _mm512_loadu_ps(p + k * C);
    for (size_t j = 0; j < 4; ++j)
      for (size_t kx = 0; kx < 3; ++kx) acc[j] = _mm512_fmadd_ps(col[j * S + kx], w[ky * 3 + kx], acc[j]);
  }
}

// maskz: GCC 12's plain _mm512_max_ps/_min_ps trip -Wmaybe-uninitialized.
__attribute__((target("avx512f"))) inline __m512 clamp(__m512 v, __m512 lo, __m512 hi) {
  return _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, v, lo), hi);
}

// One output pixel at input column ix0 (may reach into the padding).
__attribute__((target("avx512f"))) inline __m512 pixel(const float* const* rows, long ix0, long W, size_t C,
                                                       const __m512* w, __m512 acc) {
  for (size_t ky = 0; ky < 3; ++ky) {
    if (!rows[ky]) continue;
    for (long kx = 0; kx < 3; ++kx) {
      const long ix = ix0 + kx;
      if (ix < 0 || ix >= W) continue;
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(rows[ky] + static_cast<size_t>(ix) * C), w[ky * 3 + static_cast<size_t>(kx)], acc);
    }
  }
  return acc;
}

// Output rows of 16 channels starting at c0, each from its three input rows
// (in_rows[3 r + ky], null: padding): the filter stays in registers across
// all the rows.
template <size_t S>
__attribute__((target("avx512f"))) void rows16(const DepthwiseShape& s, const float* const* in_rows, size_t nrows,
                                                const float* filter, const float* bias, float* out, size_t out_row,
                                                size_t c0) {
  const size_t C = s.c, IP = s.in_px ? s.in_px : C, OP = s.out_px ? s.out_px : C;
  __m512 w[9];
  for (size_t t = 0; t < 9; ++t) w[t] = _mm512_loadu_ps(filter + t * C + c0);
  const __m512 b = bias ? _mm512_loadu_ps(bias + c0) : _mm512_setzero_ps();
  const __m512 lo = _mm512_set1_ps(s.lo), hi = _mm512_set1_ps(s.hi);
  const long W = static_cast<long>(s.w), pl = static_cast<long>(s.pad_left);
  for (size_t r = 0; r < nrows; ++r, out += out_row) {
    const float* rows[3];
    for (size_t ky = 0; ky < 3; ++ky) rows[ky] = in_rows[3 * r + ky] ? in_rows[3 * r + ky] + c0 : nullptr;
    for (size_t ox = 0; ox < s.ow;) {
      const long ix0 = static_cast<long>(ox * S) - pl;
      // Four outputs whose taps are all inside the row: columns ix0 .. ix0 + 3S + 2.
      if (ix0 >= 0 && ox + 4 <= s.ow && ix0 + static_cast<long>(3 * S + 2) < W) {
        __m512 acc[4] = {b, b, b, b};
        block4<S>(rows, static_cast<size_t>(ix0), IP, w, acc);
        for (size_t j = 0; j < 4; ++j) _mm512_storeu_ps(out + (ox + j) * OP + c0, clamp(acc[j], lo, hi));
        ox += 4;
        continue;
      }
      _mm512_storeu_ps(out + ox * OP + c0, clamp(pixel(rows, ix0, W, IP, w, b), lo, hi));
      ++ox;
    }
  }
}

}  // namespace
#endif

void depthwise3x3_rows(const DepthwiseShape& s, const float* input, const float* filter, const float* bias,
                       float* output, size_t row_begin, size_t row_end) {
#ifdef KILN_XNN_X86
  for (size_t r = row_begin; r < row_end; ++r) {
    const size_t n = r / s.oh, oy = r % s.oh;
    const float* in = input + n * s.h * s.w * s.c;
    // The three input rows this output row reads (null: padding).
    const float* rows[3];
    for (size_t ky = 0; ky < 3; ++ky) {
      const long iy = static_cast<long>(oy * s.stride + ky) - static_cast<long>(s.pad_top);
      rows[ky] = iy >= 0 && iy < static_cast<long>(s.h) ? in + static_cast<size_t>(iy) * s.w * s.c : nullptr;
    }
    depthwise3x3_row(s, rows, filter, bias, output + (n * s.oh + oy) * s.ow * s.c, 0, s.c);
  }
#else
  (void)s, (void)input, (void)filter, (void)bias, (void)output, (void)row_begin, (void)row_end;
#endif
}

void depthwise3x3_row(const DepthwiseShape& s, const float* const rows[3], const float* filter, const float* bias,
                      float* output, size_t c_begin, size_t c_end) {
#ifdef KILN_XNN_X86
  for (size_t c0 = c_begin; c0 < c_end; c0 += 16) {
    if (s.isa == Isa::kAvx2) depthwise3x3_rows16_avx2(s, rows, 1, filter, bias, output, 0, c0);
    else if (s.isa != Isa::kAvx512) return;
    else if (s.stride == 1) rows16<1>(s, rows, 1, filter, bias, output, 0, c0);
    else rows16<2>(s, rows, 1, filter, bias, output, 0, c0);
  }
#else
  (void)s, (void)rows, (void)filter, (void)bias, (void)output, (void)c_begin, (void)c_end;
#endif
}

void depthwise3x3_rows16(const DepthwiseShape& s, const float* const* rows, size_t nrows, const float* filter,
                         const float* bias, float* output, size_t out_row) {
#ifdef KILN_XNN_X86
  if (s.isa == Isa::kAvx2) depthwise3x3_rows16_avx2(s, rows, nrows, filter, bias, output, out_row, 0);
  else if (s.isa != Isa::kAvx512) return;
  else if (s.stride == 1) rows16<1>(s, rows, nrows, filter, bias, output, out_row, 0);
  else rows16<2>(s, rows, nrows, filter, bias, output, out_row, 0);
#else
  (void)s, (void)rows, (void)nrows, (void)filter, (void)bias, (void)output, (void)out_row;
#endif
}

}  // namespace kiln_xnnpack
