// 2-D MaxPool (without Indices) and AveragePool for float32 on the phase rows
// of the wide-map depthwise convolution (conv_depthwise_rows.h): every
// window tap is a unit-stride vector read whatever the stride, the padding
// is -inf or zero in the phase rows, and output rows are written whole.
// The register kernels are compiled once per ISA (cpu/x86/phase_rows_*.cpp).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/portable/conv_depthwise_rows.h"

namespace kiln::kernels {

/// One 2-D pool over `planes` planes of in_h x in_w (dilation 1; pads at the
/// end are implied by the output size, ceil_mode overhang included).
struct PoolRows2D {
  int64_t planes = 1, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int64_t k_h = 1, k_w = 1, s_h = 1, s_w = 1, p_t = 0, p_l = 0;
  bool is_max = true;
  /// Average only: the taps counted per output row (out_h floats) and per
  /// output column (out_w floats); an output divides by their product, and
  /// is 0 where that is 0.
  const float* row_count = nullptr;
  const float* col_count = nullptr;
};

/// One band of output rows of one plane, read from phase rows as
/// DwRowsBand describes them (any s_h here, planes (qh, qw) plane apart).
struct PoolRowsBand {
  const float* phases = nullptr;
  int64_t wq = 0, plane = 0, s_h = 1, s_w = 1, k_h = 1, k_w = 1;
  int64_t col[kDwRowsMaxKw] = {};  // per kw: (kw % s_w) * plane + kw / s_w
  int64_t rows = 0, out_w = 0;
  float* y = nullptr;                  // the band's first output row; rows are out_w apart
  const float* row_count = nullptr;    // average: per band row
  const float* col_count = nullptr;    // average: per output column, readable up to a whole vector
};

using PoolRowsFn = void (*)(const PoolRowsBand& band);

/// One ISA's pool kernels; null members where the CPU has none.
struct PoolRowsKernels {
  PoolRowsFn max = nullptr, average = nullptr;
  DwFillFn fill = nullptr;
};

#if defined(__x86_64__) || defined(__i386__)
PoolRowsKernels pool_rows_kernels_avx512();
PoolRowsKernels pool_rows_kernels_avx2();
#endif

/// Whether pool_rows_f32 takes g on this CPU and is the faster path for it
/// (kernel widths up to kDwRowsMaxKw, rows wide enough to fill vectors; not
/// max pools of stride 1, which pool.cpp's separable passes run faster).
bool pool_rows_applies(const PoolRows2D& g);

/// The pool of every plane, split over (plane, band of output rows). NaN in
/// a max window wins it.
void pool_rows_f32(const PoolRows2D& g, const float* x, float* y, ThreadPool* pool);

}  // namespace kiln::kernels
