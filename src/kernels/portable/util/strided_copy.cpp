#include "kernels/portable/util/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels::layout {

namespace {

struct Bytes16 {
  uint64_t lo, hi;
};

// Work below this many elements runs on the calling thread: a parallel_for
// costs more than it saves.
constexpr int64_t kParallelElems = 1 << 15;
// Transposes are copied in square tiles of this side so both the rows read
// and the rows written stay in L1.
constexpr int64_t kTile = 32;

struct Dim {
  int64_t n;   // size
  int64_t ds;  // dst stride
  int64_t ss;  // src stride
};

// Calls fn(dst_offset, src_offset) for rows [begin, end) of the row-major
// space `outer`, stepping offsets incrementally (no div/mod per row).
template <class F>
void for_rows(const std::vector<Dim>& outer, int64_t begin, int64_t end, F&& fn) {
  const size_t r = outer.size();
  if (r == 0) {
    for (int64_t i = begin; i < end; ++i) fn(int64_t{0}, int64_t{0});
    return;
  }
  int64_t idx[64];
  std::vector<int64_t> heap;
  int64_t* ix = idx;
  if (r > 64) {
    heap.resize(r);
    ix = heap.data();
  }
  int64_t od = 0, os = 0, rem = begin;
  for (size_t k = r; k-- > 0;) {
    ix[k] = rem % outer[k].n;
    rem /= outer[k].n;
    od += ix[k] * outer[k].ds;
    os += ix[k] * outer[k].ss;
  }
  for (int64_t i = begin; i < end; ++i) {
    fn(od, os);
    for (size_t k = r; k-- > 0;) {
      od += outer[k].ds;
      os += outer[k].ss;
      if (++ix[k] < outer[k].n) break;
      od -= outer[k].ds * outer[k].n;
      os -= outer[k].ss * outer[k].n;
      ix[k] = 0;
    }
  }
}

template <class E>
void copy_run(E* d, const E* s, int64_t n) {
  if constexpr (std::is_same_v<E, std::string>) {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(E));
  }
}

// One tile of a transpose: dst[r * dst_row + c] = src[c * src_col + r] for
// r in [r0, r1), c in [c0, c1).
template <class E>
inline void copy_tile(E* dst, const E* src, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int64_t dst_row,
                      int64_t src_col) {
  int64_t c = c0;
#if defined(__SSE2__)
  if constexpr (sizeof(E) == 4 && !std::is_same_v<E, std::string>) {
    // 4x4 blocks through registers: four loads, an in-register transpose,
    // four stores, instead of sixteen scalar moves.
    for (; c + 4 <= c1; c += 4) {
      int64_t r = r0;
      for (; r + 4 <= r1; r += 4) {
        __m128 a = _mm_loadu_ps(reinterpret_cast<const float*>(src + (c + 0) * src_col + r));
        __m128 b = _mm_loadu_ps(reinterpret_cast<const float*>(src + (c + 1) * src_col + r));
        __m128 e = _mm_loadu_ps(reinterpret_cast<const float*>(src + (c + 2) * src_col + r));
        __m128 f = _mm_loadu_ps(reinterpret_cast<const float*>(src + (c + 3) * src_col + r));
        _MM_TRANSPOSE4_PS(a, b, e, f);
        _mm_storeu_ps(reinterpret_cast<float*>(dst + (r + 0) * dst_row + c), a);
        _mm_storeu_ps(reinterpret_cast<float*>(dst + (r + 1) * dst_row + c), b);
        _mm_storeu_ps(reinterpret_cast<float*>(dst + (r + 2) * dst_row + c), e);
        _mm_storeu_ps(reinterpret_cast<float*>(dst + (r + 3) * dst_row + c), f);
      }
      for (; r < r1; ++r)
        for (int64_t k = 0; k < 4; ++k) dst[r * dst_row + c + k] = src[(c + k) * src_col + r];
    }
  }
#endif
  for (; c < c1; ++c) {
    const E* s = src + c * src_col;
    E* d = dst + c;
    for (int64_t r = r0; r < r1; ++r) d[r * dst_row] = s[r];
  }
}

template <class E>
void strided_copy_t(E* dst, const E* src, std::vector<Dim> dims, ThreadPool* pool) {
  if (dims.empty()) {
    *dst = *src;
    return;
  }
  const Dim inner = dims.back();
  dims.pop_back();
  int64_t rows = 1;
  for (const Dim& d : dims) rows *= d.n;
  const int64_t total = rows * inner.n;
  ThreadPool* p = total >= kParallelElems ? pool : nullptr;
  const int64_t grain = std::max<int64_t>(1, kParallelElems / 4 / std::max<int64_t>(inner.n, 1));

  if (inner.ds == 1 && inner.ss == 1) {
    parallel_for(p, rows, grain, [&](int64_t b, int64_t e) {
      for_rows(dims, b, e, [&](int64_t od, int64_t os) { copy_run(dst + od, src + os, inner.n); });
    });
    return;
  }
  if (inner.ds == 1 && inner.ss == 0) {
    parallel_for(p, rows, grain, [&](int64_t b, int64_t e) {
      for_rows(dims, b, e, [&](int64_t od, int64_t os) { std::fill_n(dst + od, inner.n, src[os]); });
    });
    return;
  }
  // A transpose: the source is contiguous along some outer dim k. Copy
  // [dims[k], inner] in tiles so reads and writes both stay cache-resident.
  int k = -1;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].ss == 1) k = static_cast<int>(i);
  if (k >= 0 && inner.ds == 1 && inner.n >= 8 && dims[static_cast<size_t>(k)].n >= 8) {
    const Dim row = dims[static_cast<size_t>(k)];
    dims.erase(dims.begin() + k);
    int64_t outer_rows = 1;
    for (const Dim& d : dims) outer_rows *= d.n;
    const int64_t row_blocks = (row.n + kTile - 1) / kTile;
    const int64_t col_blocks = (inner.n + kTile - 1) / kTile;
    const int64_t blocks = row_blocks * col_blocks;
    parallel_for(p, outer_rows * blocks, std::max<int64_t>(1, kParallelElems / 4 / (kTile * kTile)),
                 [&](int64_t b, int64_t e) {
                   while (b < e) {
                     const int64_t orow = b / blocks;
                     const int64_t blk_end = std::min(e, (orow + 1) * blocks);
                     for_rows(dims, orow, orow + 1, [&](int64_t od, int64_t os) {
                       for (int64_t blk = b - orow * blocks; blk < blk_end - orow * blocks; ++blk) {
                         const int64_t r0 = (blk / col_blocks) * kTile, c0 = (blk % col_blocks) * kTile;
                         const int64_t r1 = std::min(r0 + kTile, row.n), c1 = std::min(c0 + kTile, inner.n);
                         copy_tile(dst + od, src + os, r0, r1, c0, c1, row.ds, inner.ss);
                       }
                     });
                     b = blk_end;
                   }
                 });
    return;
  }
  parallel_for(p, rows, grain, [&](int64_t b, int64_t e) {
    for_rows(dims, b, e, [&](int64_t od, int64_t os) {
      E* d = dst + od;
      const E* s = src + os;
      for (int64_t i = 0; i < inner.n; ++i) d[i * inner.ds] = s[i * inner.ss];
    });
  });
}

}  // namespace

void copy_elements(DType dtype, void* dst, const void* src, int64_t n) {
  if (n <= 0) return;
  if (dtype == DType::kString) {
    copy_run(static_cast<std::string*>(dst), static_cast<const std::string*>(src), n);
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(dtype));
  }
}

void fill_elements(DType dtype, void* dst, const void* value, int64_t n) {
  if (n <= 0) return;
  switch (dtype == DType::kString ? 0 : dtype_size(dtype)) {
    case 0: std::fill_n(static_cast<std::string*>(dst), n, *static_cast<const std::string*>(value)); break;
    case 1: std::memset(dst, *static_cast<const uint8_t*>(value), static_cast<size_t>(n)); break;
    case 2: std::fill_n(static_cast<uint16_t*>(dst), n, *static_cast<const uint16_t*>(value)); break;
    case 4: std::fill_n(static_cast<uint32_t*>(dst), n, *static_cast<const uint32_t*>(value)); break;
    case 8: std::fill_n(static_cast<uint64_t*>(dst), n, *static_cast<const uint64_t*>(value)); break;
    default: std::fill_n(static_cast<Bytes16*>(dst), n, *static_cast<const Bytes16*>(value)); break;
  }
}

void zero_elements(DType dtype, void* dst, int64_t n) {
  if (n <= 0) return;
  if (dtype == DType::kString) {
    auto* s = static_cast<std::string*>(dst);
    for (int64_t i = 0; i < n; ++i) s[i].clear();
  } else {
    std::memset(dst, 0, static_cast<size_t>(n) * dtype_size(dtype));
  }
}

void strided_copy(DType dtype, void* dst, std::span<const int64_t> dst_strides, const void* src,
                  std::span<const int64_t> src_strides, std::span<const int64_t> dims, ThreadPool* pool) {
  // Drop unit dims and merge neighbours that are contiguous in both tensors.
  std::vector<Dim> merged;
  merged.reserve(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t n = dims[i];
    if (n == 0) return;
    if (n == 1) continue;
    if (!merged.empty() && merged.back().ds == dst_strides[i] * n && merged.back().ss == src_strides[i] * n) {
      merged.back().n *= n;
      merged.back().ds = dst_strides[i];
      merged.back().ss = src_strides[i];
    } else {
      merged.push_back(Dim{n, dst_strides[i], src_strides[i]});
    }
  }
  if (dtype == DType::kString) {
    strided_copy_t(static_cast<std::string*>(dst), static_cast<const std::string*>(src), std::move(merged), pool);
    return;
  }
  switch (dtype_size(dtype)) {
    case 1: strided_copy_t(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), std::move(merged), pool); break;
    case 2:
      strided_copy_t(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), std::move(merged), pool);
      break;
    case 4:
      strided_copy_t(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src), std::move(merged), pool);
      break;
    case 8:
      strided_copy_t(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src), std::move(merged), pool);
      break;
    default:
      strided_copy_t(static_cast<Bytes16*>(dst), static_cast<const Bytes16*>(src), std::move(merged), pool);
      break;
  }
}

}  // namespace kiln::kernels::layout
