// Four rows of a matrix into four columns of a packed panel by 4x4 SSE2
// transposes: the A and transposed-B packing of the SGEMM engine (gemm.cpp)
// and the B blocks of small_matmul.cpp.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace kiln::kernels {

/// Row r (0..3) of kc values at src + r * ld goes to column r of a panel
/// `width` floats wide: value p of row r to dst[p * width + r]. Four loads
/// and four stores per 16 values instead of 16 strided stores (~2.5x faster
/// than the scalar gather), on every x86-64; a scalar loop elsewhere.
inline void interleave4(const float* src, int64_t ld, int64_t kc, float* dst, int64_t width) {
  const float* s0 = src;
  const float* s1 = s0 + ld;
  const float* s2 = s1 + ld;
  const float* s3 = s2 + ld;
  int64_t p = 0;
#if defined(__x86_64__) || defined(_M_X64)
  for (; p + 4 <= kc; p += 4) {
    __m128 x0 = _mm_loadu_ps(s0 + p), x1 = _mm_loadu_ps(s1 + p), x2 = _mm_loadu_ps(s2 + p), x3 = _mm_loadu_ps(s3 + p);
    _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
    _mm_storeu_ps(dst + p * width, x0);
    _mm_storeu_ps(dst + (p + 1) * width, x1);
    _mm_storeu_ps(dst + (p + 2) * width, x2);
    _mm_storeu_ps(dst + (p + 3) * width, x3);
  }
#endif
  for (; p < kc; ++p) {
    dst[p * width] = s0[p];
    dst[p * width + 1] = s1[p];
    dst[p * width + 2] = s2[p];
    dst[p * width + 3] = s3[p];
  }
}

}  // namespace kiln::kernels
