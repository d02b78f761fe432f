#include "kernels/portable/util/pointwise.h"

#include <algorithm>

namespace kiln::kernels {

bool prefer_transposed_pointwise(int64_t m, int64_t n) {
  if (n < 2 || n > 256 || m < 16) return false;
  auto lane_use = [](int64_t len) { return static_cast<double>(len) / static_cast<double>((len + 15) / 16 * 16); };
  return lane_use(n) < 0.85 && lane_use(m) > lane_use(n) + 0.1;
}

void transpose_f32(const float* src, int64_t rows, int64_t cols, float* dst, ThreadPool* pool) {
  constexpr int64_t kB = 16;
  // Blocks of 16 columns; chunks of about 4096 elements.
  parallel_for(pool, (cols + kB - 1) / kB, std::max<int64_t>(1, 4096 / (kB * std::max<int64_t>(1, rows))),
               [&](int64_t b0, int64_t b1) {
                 for (int64_t j0 = b0 * kB; j0 < std::min(cols, b1 * kB); j0 += kB) {
                   const int64_t j1 = std::min(cols, j0 + kB);
                   for (int64_t i0 = 0; i0 < rows; i0 += kB) {
                     const int64_t i1 = std::min(rows, i0 + kB);
                     for (int64_t j = j0; j < j1; ++j)
                       for (int64_t i = i0; i < i1; ++i) dst[j * rows + i] = src[i * cols + j];
                   }
                 }
               });
}

GemmEpilogue TransposedStore::epilogue() const {
  GemmEpilogue ep;
  ep.apply = [](const void* ctx, float* c, int64_t ldc, int64_t rows, int64_t cols) {
    const TransposedStore& t = *static_cast<const TransposedStore*>(ctx);
    if (t.before) t.before(t.before_ctx, c, ldc, rows, cols);
    // Where the block sits in C: positions [r0, r0 + rows), channels [c0, c0 + cols).
    const int64_t offset = c - t.c, r0 = offset / t.ldc, c0 = offset % t.ldc;
    constexpr int64_t kB = 16;  // 16 x 16 pieces: reads stay within a few cache lines
    for (int64_t j0 = 0; j0 < cols; j0 += kB) {
      const int64_t j1 = std::min(cols, j0 + kB);
      for (int64_t i0 = 0; i0 < rows; i0 += kB) {
        const int64_t i1 = std::min(rows, i0 + kB);
        for (int64_t j = j0; j < j1; ++j) {
          float* yr = t.y + (c0 + j) * t.positions + r0;
          for (int64_t i = i0; i < i1; ++i) yr[i] = c[i * ldc + j];
        }
      }
    }
    if (t.after)
      for (int64_t j = 0; j < cols; ++j) t.after(t.after_ctx, t.y + (c0 + j) * t.positions + r0, c0 + j, r0, rows);
  };
  ep.apply_ctx = this;
  return ep;
}

}  // namespace kiln::kernels
