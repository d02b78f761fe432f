// Phase-row pools (pool_rows.h): the driver. Each task is one band of
// output rows of one plane, run as sub-bands whose phase rows fit in L1:
// fill the phase rows (-inf or zero padding), then one pass of the kernel
// per output row, every tap a vector read.
#include "kernels/portable/pool_rows.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace kiln::kernels {

namespace {

// Narrower rows waste most of a vector's lanes; pool.cpp's flat passes
// take them.
constexpr int64_t kMinOutputWidth = 8;
// Phase rows of a sub-band: about half of a 32 KiB L1 data cache.
constexpr int64_t kL1Floats = 4096;

PoolRowsKernels pool_kernels() {
#if defined(__x86_64__) || defined(__i386__)
  const int isa = phase_rows_isa();
  if (isa == 1) return pool_rows_kernels_avx512();
  if (isa == 2) return pool_rows_kernels_avx2();
#endif
  return {};
}

}  // namespace

bool pool_rows_applies(const PoolRows2D& g) {
  // pool.cpp's separable passes measured faster (CPU time) for max pools of
  // stride 1: no column is computed in vain there, and k_h + k_w taps beat
  // k_h k_w (3x3 on 28 wide: 10%; 5x5 on 20 and 40 wide: 1.4-2x).
  if (g.is_max && g.s_h == 1 && g.s_w == 1) return false;
  return g.k_w <= kDwRowsMaxKw && g.k_h >= 1 && g.k_w >= 1 && g.out_w >= kMinOutputWidth && g.out_h >= 1 &&
         g.p_t >= 0 && g.p_l >= 0 && g.s_h >= 1 && g.s_w >= 1 && (g.is_max || (g.row_count && g.col_count)) &&
         pool_kernels().fill != nullptr;
}

void pool_rows_f32(const PoolRows2D& g, const float* x, float* y, ThreadPool* pool) {
  const PoolRowsKernels kernels = pool_kernels();
  const PoolRowsFn fn = g.is_max ? kernels.max : kernels.average;
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t halo = (g.k_h - 1) / g.s_h;
  const int64_t wq = (g.out_w + (g.k_w - 1) / g.s_w + kDwRowsMaxLanes - 1) / kDwRowsMaxLanes * kDwRowsMaxLanes;
  const int64_t row_floats = g.s_h * g.s_w * wq;
  // Bands: four tasks per thread where planes are few.
  int64_t bands = 1;
  if (g.planes < 4 * threads) bands = std::min(g.out_h, (4 * threads + g.planes - 1) / g.planes);
  const int64_t band_rows = (g.out_h + bands - 1) / bands;
  bands = (g.out_h + band_rows - 1) / band_rows;
  const int64_t sub_rows = std::min(band_rows, std::max<int64_t>(1, kL1Floats / row_floats - halo));
  const int64_t plane = (sub_rows + halo) * wq, buffer = g.s_h * g.s_w * plane + kDwRowsMaxLanes;
  // The column counts padded to whole vectors (read past out_w, discarded).
  std::vector<float> col_count;
  if (!g.is_max) {
    col_count.assign(static_cast<size_t>(wq + kDwRowsMaxLanes), 1.f);
    std::copy_n(g.col_count, g.out_w, col_count.begin());
  }
  const int64_t tasks = g.planes * bands;
  const int64_t per_task = std::max<int64_t>(1, band_rows * g.out_w * g.k_h * g.k_w);
  const int64_t grain = phase_rows_grain(tasks, threads, per_task);
  parallel_for(pool, tasks, grain, [&](int64_t begin, int64_t end) {
    // The floats after the last plane are read only for discarded outputs.
    PhaseScratch phases(buffer);
    PoolRowsBand band;
    band.phases = phases.data();
    band.wq = wq;
    band.plane = plane;
    band.s_h = g.s_h;
    band.s_w = g.s_w;
    band.k_h = g.k_h;
    band.k_w = g.k_w;
    for (int64_t kw = 0; kw < g.k_w; ++kw) band.col[kw] = (kw % g.s_w) * plane + kw / g.s_w;
    band.out_w = g.out_w;
    band.col_count = col_count.data();
    DwRowsFill fill;
    fill.in_h = g.in_h;
    fill.in_w = g.in_w;
    fill.p_h = g.p_t;
    fill.p_w = g.p_l;
    fill.s_h = g.s_h;
    fill.s_w = g.s_w;
    fill.pad = g.is_max ? -std::numeric_limits<float>::infinity() : 0.f;
    fill.phases = phases.data();
    fill.wq = wq;
    fill.plane = plane;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t pl = t / bands, band0 = (t % bands) * band_rows, band1 = std::min(band0 + band_rows, g.out_h);
      fill.x = x + pl * g.in_h * g.in_w;
      for (int64_t oh0 = band0; oh0 < band1; oh0 += sub_rows) {
        fill.row0 = oh0 * g.s_h;
        band.rows = std::min(sub_rows, band1 - oh0);
        fill.rows = band.rows + halo;
        kernels.fill(fill);
        band.y = y + pl * g.out_h * g.out_w + oh0 * g.out_w;
        band.row_count = g.row_count ? g.row_count + oh0 : nullptr;
        fn(band);
      }
    }
  });
}

}  // namespace kiln::kernels
