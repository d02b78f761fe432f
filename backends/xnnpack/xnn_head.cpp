#include "xnn_head.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_XNN_X86 1
#endif

namespace kiln_xnnpack {

namespace {

size_t round16(size_t c) { return (c + 15) / 16 * 16; }

// Columns of the next block of accumulate() when `left` (16n) are left:
// 128, then one block of 64, 32 and 16 as needed.
size_t block_width(size_t left) { return left >= 128 ? 128 : left >= 64 ? 64 : left >= 32 ? 32 : 16; }

// Images [0, n) of y[:, 0:cols) += x[:, 0:rows) . w[0:rows, 0:cols), in
// plain C++ (a CPU without the plugin's variants: not run by the plugin,
// whose fused blocks need one, but keeps the class whole).
void accumulate_scalar(size_t n, const float* x, size_t ldx, size_t rows, const float* w, size_t ldw, size_t cols,
                       float* y, size_t ldy) {
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < rows; ++k) {
      const float a = x[i * ldx + k];
      for (size_t c = 0; c < cols; ++c) y[i * ldy + c] += a * w[k * ldw + c];
    }
}

#ifdef KILN_XNN_X86
// J vectors of 16 columns of every image's row of y: the accumulators stay
// in registers over the panel's rows, one FMA per weight loaded (a block
// of 32 rows x 128 columns, 16 KB, is read from L1 again for each image).
template <size_t J>
__attribute__((target("avx512f,fma"))) void block512(size_t n, const float* x, size_t ldx, size_t rows, const float* w,
                                                     size_t ldw, float* y, size_t ldy) {
  for (size_t i = 0; i < n; ++i, x += ldx, y += ldy) {
    __m512 acc[J];
    for (size_t j = 0; j < J; ++j) acc[j] = _mm512_loadu_ps(y + 16 * j);
    const float* wk = w;
    for (size_t k = 0; k < rows; ++k, wk += ldw) {
      const __m512 a = _mm512_set1_ps(x[k]);
      for (size_t j = 0; j < J; ++j) acc[j] = _mm512_fmadd_ps(a, _mm512_loadu_ps(wk + 16 * j), acc[j]);
    }
    for (size_t j = 0; j < J; ++j) _mm512_storeu_ps(y + 16 * j, acc[j]);
  }
}

// The AVX2+FMA variant: J vectors of 8 columns.
template <size_t J>
__attribute__((target("avx2,fma"))) void block256(size_t n, const float* x, size_t ldx, size_t rows, const float* w,
                                                  size_t ldw, float* y, size_t ldy) {
  for (size_t i = 0; i < n; ++i, x += ldx, y += ldy) {
    __m256 acc[J];
    for (size_t j = 0; j < J; ++j) acc[j] = _mm256_loadu_ps(y + 8 * j);
    const float* wk = w;
    for (size_t k = 0; k < rows; ++k, wk += ldw) {
      const __m256 a = _mm256_broadcast_ss(x + k);
      for (size_t j = 0; j < J; ++j) acc[j] = _mm256_fmadd_ps(a, _mm256_loadu_ps(wk + 8 * j), acc[j]);
    }
    for (size_t j = 0; j < J; ++j) _mm256_storeu_ps(y + 8 * j, acc[j]);
  }
}
#endif

}  // namespace

HeadFc::HeadFc(const float* w, const float* bias, size_t outputs, size_t k, float lo, float hi)
    : outputs_(outputs), k_(k), ld_(round16(outputs)), isa_(kernel_isa()), lo_(lo), hi_(hi),
      w_(k * ld_) {
  float* packed = w_.data();
  // Panel by panel (32 rows, the last fewer), column block by column block
  // (as accumulate() takes them), a block's rows one after the other.
  for (size_t k0 = 0; k0 < k; k0 += kPanelRows) {
    const size_t rows = std::min(kPanelRows, k - k0);
    float* panel = packed + k0 * ld_;
    for (size_t c0 = 0, width = 0; c0 < ld_; c0 += width) {
      width = block_width(ld_ - c0);
      for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < width && c0 + j < outputs; ++j)
          panel[c0 * rows + r * width + j] = w[(c0 + j) * k + k0 + r];
    }
  }
  bias_.assign(outputs, 0.0f);
  if (bias) std::copy(bias, bias + outputs, bias_.begin());
}

PackedGemm::Prefetch HeadFc::rows(size_t k0, size_t k1) const {
  return {w_.data() + k0 * ld_, (k1 - k0) * ld_ * sizeof(float)};
}

void HeadFc::accumulate(size_t n, const float* x, size_t ldx, size_t k0, size_t k1, float* y) const {
  const size_t rows = k1 - k0;
  const float* panel = w_.data() + k0 * ld_;
  for (size_t c = 0, width = 0; c < ld_; c += width) {
    width = block_width(ld_ - c);
    const float* wb = panel + c * rows;  // the block's rows, `width` floats each
#ifdef KILN_XNN_X86
    if (isa_ == Isa::kAvx512) {
      if (width == 128) block512<8>(n, x, ldx, rows, wb, width, y + c, ld_);
      else if (width == 64) block512<4>(n, x, ldx, rows, wb, width, y + c, ld_);
      else if (width == 32) block512<2>(n, x, ldx, rows, wb, width, y + c, ld_);
      else block512<1>(n, x, ldx, rows, wb, width, y + c, ld_);
      continue;
    }
    if (isa_ == Isa::kAvx2) {
      if (width == 128) {  // two halves of 64 columns
        block256<8>(n, x, ldx, rows, wb, width, y + c, ld_);
        block256<8>(n, x, ldx, rows, wb + 64, width, y + c + 64, ld_);
      } else if (width == 64) {
        block256<8>(n, x, ldx, rows, wb, width, y + c, ld_);
      } else if (width == 32) {
        block256<4>(n, x, ldx, rows, wb, width, y + c, ld_);
      } else {
        block256<2>(n, x, ldx, rows, wb, width, y + c, ld_);
      }
      continue;
    }
#endif
    accumulate_scalar(n, x, ldx, rows, wb, width, width, y + c, ld_);
  }
}

void HeadFc::finish(size_t n, const float* parts, size_t count, size_t stride, float* out, size_t o0,
                    size_t o1) const {
  for (size_t i = 0; i < n; ++i) {
    float* oi = out + i * outputs_;
    for (size_t o = o0; o < o1; ++o) oi[o] = bias_[o];
    for (size_t p = 0; p < count; ++p) {
      const float* part = parts + p * stride + i * ld_;
      for (size_t o = o0; o < o1; ++o) oi[o] += part[o];
    }
    for (size_t o = o0; o < o1; ++o) oi[o] = std::min(std::max(oi[o], lo_), hi_);
  }
}

}  // namespace kiln_xnnpack
