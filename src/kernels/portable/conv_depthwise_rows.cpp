// Depthwise convolution on wide maps: the driver of the row kernels
// (conv_depthwise_rows.h).
//
// Each task is one band of output rows of one input channel. It copies the
// input rows the band reads into phase rows (zero padding around them; with
// column stride s_w the row is split into s_w phases, so every tap is a
// unit-stride read), then runs the register kernel for each of the
// channel's outputs (the depth multiplier) and the epilogue over the band
// while it is in cache. The copy is one pass over the input; the kernel
// keeps a block of output rows in registers and loads each input vector
// once per kernel column for all the rows it feeds.
#include "kernels/portable/conv_depthwise_rows.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "kernels/portable/cpu/x86/isa.h"

namespace kiln::kernels {

namespace {

// Set by the tests to run one ISA's kernels: 0 auto, 1 AVX-512, 2 AVX2,
// 3 none (the baseline kernels of conv_depthwise.cpp and pool.cpp).
std::atomic<int> g_forced_isa{0};

// The CPU's level capped by $KILN_CPU_ISA (cpu/x86/isa.h).
bool cpu_avx512() { return cpu::kernel_isa() >= cpu::Isa::kAvx512; }
bool cpu_avx2() { return cpu::kernel_isa() >= cpu::Isa::kAvx2; }

// Narrower rows waste most of a vector's lanes (the channel-packed kernels
// of conv_depthwise_packed.h take maps up to 20 wide).
constexpr int64_t kMinOutputWidth = 8;
// Output rows per kernel block (both ISAs), the unit of a band.
constexpr int64_t kBlockRows = 4;
// The phase rows of a sub-band: about half of a 32 KiB L1 data cache.
constexpr int64_t kL1Floats = 4096;

// How the output rows are cut into bands: enough tasks for every thread.
struct BandPlan {
  int64_t bands = 1, band_rows = 0;
};

BandPlan plan_bands(const DepthwiseConv& p, int64_t threads) {
  BandPlan b;
  const int64_t units = p.n * p.c, blocks = (p.out_h + kBlockRows - 1) / kBlockRows;
  // At least four tasks per thread where the rows allow, so that two or
  // three threads get even shares of a few channels.
  const int64_t want = 4 * threads;
  if (units < want) b.bands = std::min(blocks, (want + units - 1) / units);
  b.band_rows = (blocks + b.bands - 1) / b.bands * kBlockRows;
  b.bands = (p.out_h + b.band_rows - 1) / b.band_rows;
  return b;
}

// Asks for the input rows the next fill reads (the next sub-band, or the
// next task's first one) while the kernel computes this one: the fill reads
// each input float once, so without this it waits on memory (maps of
// 56..112 at stride 2 measured 10-20% faster with it).
void prefetch_next(const DepthwiseConv& p, const DwRowsFill& fill, int64_t rows, int64_t sub_rows, int64_t band1,
                   bool next_task) {
  const int64_t next0 = fill.row0 / p.s_h + rows;  // next sub-band's first output row
  const float* xc = fill.x;
  int64_t first_ih = 0, count = 0;
  if (next0 < band1) {
    first_ih = next0 * p.s_h - p.p_h + (p.k_h - 1) + 1 - p.s_h;  // rows not read yet
    count = std::min(sub_rows, band1 - next0) * p.s_h;
  } else if (next_task) {
    xc += p.in_h * p.in_w;  // the next channel (band splits aside, the next task's)
    first_ih = 0;
    count = std::min(sub_rows * p.s_h + p.k_h, p.in_h);
  }
  first_ih = std::max<int64_t>(0, first_ih);
  const int64_t last_ih = std::min(p.in_h, first_ih + count);
  if (last_ih <= first_ih) return;
  const char* a = reinterpret_cast<const char*>(xc + first_ih * p.in_w);
  const char* b = reinterpret_cast<const char*>(xc + last_ih * p.in_w);
  for (; a < b; a += 64) __builtin_prefetch(a, 0, 3);
}

}  // namespace

bool depthwise_rows_force_isa(int isa) {
  if ((isa == 1 && !cpu_avx512()) || (isa == 2 && !cpu_avx2()) || isa < 0 || isa > 3) return false;
  g_forced_isa.store(isa);
  return true;
}

int phase_rows_isa() {
  const int forced = g_forced_isa.load(std::memory_order_relaxed);
  if (forced == 3) return 0;
  if (forced != 2 && cpu_avx512()) return 1;
  if (forced != 1 && cpu_avx2()) return 2;
  return 0;
}

DwRowsKernels depthwise_rows_kernels(int64_t k_h, int64_t s_h) {
#if defined(__x86_64__) || defined(__i386__)
  const int isa = phase_rows_isa();
  if (isa == 1) return depthwise_rows_kernels_avx512(k_h, s_h);
  if (isa == 2) return depthwise_rows_kernels_avx2(k_h, s_h);
#else
  (void)k_h;
  (void)s_h;
#endif
  return {};
}

bool depthwise_rows_applies(const DepthwiseConv& p) {
  return p.d_h == 1 && p.d_w == 1 && p.k_w <= kDwRowsMaxKw && p.out_w >= kMinOutputWidth && p.out_h >= 1 && p.p_h >= 0 && p.p_w >= 0 &&
         depthwise_rows_kernels(p.k_h, p.s_h).band != nullptr;
}

void depthwise_rows_f32(const DepthwiseConv& p, const float* x, const float* w, const float* bias, float* y,
                        ThreadPool* pool, const DepthwiseEpilogue& ep) {
  const DwRowsKernels kernels = depthwise_rows_kernels(p.k_h, p.s_h);
  const int64_t threads = pool ? pool->num_threads() : 1;
  const BandPlan plan = plan_bands(p, threads);
  const int64_t taps = p.k_h * p.k_w, out_plane = p.out_h * p.out_w, halo = (p.k_h - 1) / p.s_h;
  const int64_t wq = (p.out_w + (p.k_w - 1) / p.s_w + kDwRowsMaxLanes - 1) / kDwRowsMaxLanes * kDwRowsMaxLanes;
  // A task's band runs as sub-bands whose phase rows fit in L1 with room to
  // spare, so that the kernel reads what the fill has just written.
  const int64_t row_floats = p.s_h * p.s_w * wq;
  const int64_t fit = kL1Floats / row_floats - halo - kDwRowsSlackRows;
  const int64_t sub_rows = std::min(plan.band_rows, std::max<int64_t>(kBlockRows, fit / kBlockRows * kBlockRows));
  const int64_t plane = (sub_rows + halo + kDwRowsSlackRows) * wq;
  const int64_t buffer = p.s_h * p.s_w * plane + kDwRowsMaxLanes;
  const int64_t tasks = p.n * p.c * plan.bands;
  const int64_t per_task = std::max<int64_t>(1, p.mult * plan.band_rows * p.out_w * taps);
  const int64_t grain = phase_rows_grain(tasks, threads, per_task);
  parallel_for(pool, tasks, grain, [&](int64_t begin, int64_t end) {
    // Zeroed once per chunk: the slack rows past a sub-band's last fill and
    // the floats after the last plane are read only for discarded outputs,
    // and stay finite.
    PhaseScratch phases(buffer);
    DwRowsBand band;
    band.phases = phases.data();
    band.wq = wq;
    band.plane = plane;
    band.s_w = p.s_w;
    band.k_w = p.k_w;
    for (int64_t kw = 0; kw < p.k_w; ++kw) band.col[kw] = (kw % p.s_w) * plane + kw / p.s_w;
    band.out_w = p.out_w;
    band.lo = ep.lo;
    band.hi = ep.hi;
    band.clamp = ep.clamps();
    DwRowsFill fill;
    fill.in_h = p.in_h;
    fill.in_w = p.in_w;
    fill.p_h = p.p_h;
    fill.p_w = p.p_w;
    fill.s_h = p.s_h;
    fill.s_w = p.s_w;
    fill.phases = phases.data();
    fill.wq = wq;
    fill.plane = plane;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t u = t / plan.bands, band0 = (t % plan.bands) * plan.band_rows;
      const int64_t band1 = std::min(band0 + plan.band_rows, p.out_h);
      const int64_t img = u / p.c, ic = u % p.c;
      fill.x = x + u * p.in_h * p.in_w;
      for (int64_t oh0 = band0; oh0 < band1; oh0 += sub_rows) {
        const int64_t rows = std::min(sub_rows, band1 - oh0);
        fill.row0 = oh0 * p.s_h;
        fill.rows = rows + halo;
        kernels.fill(fill);
        prefetch_next(p, fill, rows, sub_rows, band1, t + 1 < end);
        band.rows = rows;
        for (int64_t j = 0; j < p.mult; ++j) {
          const int64_t oc = ic * p.mult + j;
          band.w = w + oc * taps;
          band.bias = bias ? bias[oc] : 0.f;
          band.y = y + (img * p.c * p.mult + oc) * out_plane + oh0 * p.out_w;
          kernels.band(band);
          if (ep.apply) ep.apply(ep.ctx, band.y, rows * p.out_w);
        }
      }
    }
  });
}

}  // namespace kiln::kernels
