// Channel-packed depthwise convolution on small maps (conv_depthwise_packed.h):
// the driver. Each task is one group of channels of one image.
#include "kernels/portable/conv_depthwise_packed.h"

#include <algorithm>
#include <vector>

#include "kernels/portable/conv_depthwise_rows.h"

namespace kiln::kernels {

namespace {

// Wider maps run as fast or faster on the row kernels (conv_depthwise_rows.h),
// without the two transposes (measured at 28 wide: 3x3 even, 5x5 15% slower
// packed; at 14 and 7 wide packed is 1.4-1.9x faster).
constexpr int64_t kDwPackedMaxWidth = 20;

DwPackedKernel packed_kernel() {
#if defined(__x86_64__) || defined(__i386__)
  const int isa = phase_rows_isa();
  if (isa == 1) return depthwise_packed_kernel_avx512();
  if (isa == 2) return depthwise_packed_kernel_avx2();
#endif
  return {};
}

}  // namespace

bool depthwise_packed_applies(const DepthwiseConv& p) {
  return p.mult == 1 && p.d_h == 1 && p.d_w == 1 && p.out_w <= kDwPackedMaxWidth && p.out_h >= 1 && p.out_w >= 1 &&
         p.p_h >= 0 && p.p_w >= 0 && packed_kernel().fn != nullptr;
}

void depthwise_packed_f32(const DepthwiseConv& p, const float* x, const float* w, const float* bias, float* y,
                          ThreadPool* pool, const DepthwiseEpilogue& ep) {
  const DwPackedKernel kernel = packed_kernel();
  const int64_t lanes = kernel.lanes, groups = (p.c + lanes - 1) / lanes, tasks = p.n * groups;
  const int64_t taps = p.k_h * p.k_w, in_plane = p.in_h * p.in_w, out_plane = p.out_h * p.out_w;
  const int64_t hp = (p.out_h - 1) * p.s_h + p.k_h, wp = (p.out_w - 1) * p.s_w + p.k_w;
  const int64_t threads = pool ? pool->num_threads() : 1;
  // Chunks of at least ~64k multiply-adds, yet at least one per thread.
  const int64_t per_task = std::max<int64_t>(1, lanes * out_plane * taps);
  const int64_t grain = std::max<int64_t>(1, std::min((tasks + threads - 1) / threads, (int64_t{1} << 16) / per_task));
  parallel_for(pool, tasks, grain, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> packed, scratch;
    struct Release {  // tall maps: buffers past 1M floats are not kept for the process
      ~Release() {
        for (std::vector<float>* v : {&packed, &scratch})
          if (v->capacity() > (size_t{1} << 20)) std::vector<float>().swap(*v);
      }
    } release;
    // Zeroed once per chunk: every group writes the same interior positions.
    packed.assign(static_cast<size_t>(hp * wp * lanes), 0.f);
    scratch.resize(static_cast<size_t>((taps + out_plane) * lanes));
    DwPackedGroup g;
    g.in_h = p.in_h;
    g.in_w = p.in_w;
    g.out_h = p.out_h;
    g.out_w = p.out_w;
    g.k_h = p.k_h;
    g.k_w = p.k_w;
    g.s_h = p.s_h;
    g.s_w = p.s_w;
    g.p_t = p.p_h;
    g.p_l = p.p_w;
    g.hp = hp;
    g.wp = wp;
    g.lo = ep.lo;
    g.hi = ep.hi;
    g.clamp = ep.clamps();
    g.packed = packed.data();
    g.wt = scratch.data();
    g.out = scratch.data() + taps * lanes;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t img = t / groups, c0 = (t % groups) * lanes;
      g.ch = std::min(lanes, p.c - c0);
      g.x = x + (img * p.c + c0) * in_plane;
      g.w = w + c0 * taps;
      g.bias = bias ? bias + c0 : nullptr;
      g.y = y + (img * p.c + c0) * out_plane;
      kernel.fn(g);
      if (ep.apply) ep.apply(ep.ctx, g.y, g.ch * out_plane);
    }
  });
}

}  // namespace kiln::kernels
