// Direct Conv for few output channels (conv_direct_small.h).
#include "kernels/portable/conv_direct_small.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/portable/cpu/x86/isa.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kCB = 8;      // output channels per packed weight block
constexpr int64_t kMaxPX = 32;  // the widest pixel block of any variant
constexpr int64_t kMaxTaps = 320;  // the most taps per output (Cin * kh * kw) the auto mode takes

DirectSmallMode initial_mode() {
  const char* env = std::getenv("KILN_CONV_DIRECT");
  if (env && std::strcmp(env, "off") == 0) return DirectSmallMode::kOff;
  if (env && std::strcmp(env, "always") == 0) return DirectSmallMode::kAlways;
  return DirectSmallMode::kAuto;
}

DirectSmallMode g_mode = initial_mode();
DirectSmallIsa g_isa = DirectSmallIsa::kBest;

// The geometry as 2-D (rank 1: one row) and the bordered, column-phase-split
// layout of one image: channel ci, padded row r, phase ph, column j holds
// input (r - pt, j * sw + ph - pl), zero outside the input.
struct Plan : WindowDims2 {
  int64_t hp, wq, rs, plane;
  std::vector<int64_t> taps;  // offset of tap (ci, a, e) from an output's base

  Plan(const WindowGeometry& g, int64_t cin) : WindowDims2(g) {
    hp = (oh - 1) * sh + (kh - 1) * dh + 1;
    wq = ow + kMaxPX + ((kw - 1) * dw) / sw;  // a full last pixel block reads zeros past the row
    rs = sw * wq;
    plane = hp * rs;
    taps.reserve(static_cast<size_t>(cin * kh * kw));
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t a = 0; a < kh; ++a)
        for (int64_t e = 0; e < kw; ++e) taps.push_back(ci * plane + a * dh * rs + ((e * dw) % sw) * wq + (e * dw) / sw);
  }
  int64_t base(int64_t oy) const { return oy * sh * rs; }
};

// Copies padded rows [r0, r1) of one image (row r of channel ci is item
// ci * hp + r) into the bordered layout.
void border(const Plan& p, const float* x, int64_t i0, int64_t i1, float* buf) {
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t ci = i / p.hp, r = i % p.hp;
    float* dst = buf + ci * p.plane + r * p.rs;
    const int64_t iy = r - p.pt;
    if (iy < 0 || iy >= p.ih) {
      std::fill_n(dst, p.rs, 0.f);
      continue;
    }
    const float* src = x + (ci * p.ih + iy) * p.iw;
    for (int64_t ph = 0; ph < p.sw; ++ph) {
      float* d = dst + ph * p.wq;
      // columns j with 0 <= j * sw + ph - pl < iw
      const int64_t j0 = std::min(p.wq, std::max<int64_t>(0, (p.pl - ph + p.sw - 1) / p.sw));
      const int64_t j1 = std::max(j0, std::min(p.wq, (p.iw + p.pl - ph + p.sw - 1) / p.sw));
      std::fill_n(d, j0, 0.f);
      const float* s = src + j0 * p.sw + ph - p.pl;
      if (p.sw == 1) {
        std::memcpy(d + j0, s, static_cast<size_t>(j1 - j0) * sizeof(float));
      } else {
        for (int64_t j = j0; j < j1; ++j) d[j] = s[(j - j0) * p.sw];
      }
      std::fill(d + j1, d + p.wq, 0.f);
    }
  }
}

struct Job {
  const Plan* p;
  const float* buf;    // bordered image
  const float* wp;     // packed weights
  int64_t cout, k;     // output channels, taps (Cin * kh * kw)
  int64_t blocks;      // channel blocks of kCB
  const float* bias;   // Cout or null
  const float* z;      // the image's Z planes or null
  float* y;            // the image's output planes
  float lo, hi;
};

// CB output channels x NV vectors of L pixels of an output row, from output
// offset out0, channels co0.. of the packed block `wb` (already offset to the
// first of them); stores the first `cvalid` channels and `rem` pixels.
// Vector types keep the accumulators in registers.
template <int CB, int NV, int L>
[[gnu::always_inline]] inline void block(const Job& j, const float* __restrict wb, const float* __restrict xb,
                                         int64_t co0, int64_t cvalid, int64_t out0, int64_t rem) {
  typedef float V __attribute__((vector_size(L * sizeof(float))));
  constexpr int PX = NV * L;
  V acc[CB][NV];
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[c][v] = V{};
  const int64_t* taps = j.p->taps.data();
  for (int64_t t = 0; t < j.k; ++t) {
    const float* xp = xb + taps[t];
    const float* wt = wb + t * kCB;
    V in[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) __builtin_memcpy(&in[v], xp + v * L, sizeof(V));
#pragma GCC unroll 8
    for (int c = 0; c < CB; ++c) {
      const V wc = wt[c] - V{};
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[c][v] += wc * in[v];
    }
  }
  const int64_t plane = j.p->oh * j.p->ow;
  const V lo = j.lo - V{}, hi = j.hi - V{};
#pragma GCC unroll 8
  for (int c = 0; c < CB; ++c) {
    if (c < cvalid) {
      const int64_t co = co0 + c;
      const V b = (j.bias ? j.bias[co] : 0.f) - V{};
      float* yc = j.y + co * plane + out0;
      const float* zc = j.z ? j.z + co * plane + out0 : nullptr;
      if (rem == PX) {
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
          V r = acc[c][v] + b;
          if (zc) {
            V zv;
            __builtin_memcpy(&zv, zc + v * L, sizeof(V));
            r += zv;
          }
          r = r < lo ? lo : r;
          r = r > hi ? hi : r;
          __builtin_memcpy(yc + v * L, &r, sizeof(V));
        }
      } else {
        float r[PX];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) {
          const V s = acc[c][v] + b;
          __builtin_memcpy(r + v * L, &s, sizeof(V));
        }
        for (int64_t q = 0; q < rem; ++q) yc[q] = std::min(std::max(r[q] + (zc ? zc[q] : 0.f), j.lo), j.hi);
      }
    }
  }
}

// Work items [t0, t1) of one image: item t is channel block t % blocks
// (kCB channels, computed CB at a time) of output row t / blocks, so the
// blocks of a row read its input rows while they are in cache.
template <int CB, int NV, int L>
[[gnu::always_inline]] inline void rows_t(const Job& j, int64_t t0, int64_t t1) {
  const Plan& p = *j.p;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t blk = t % j.blocks, oy = t / j.blocks;
    const float* wblk = j.wp + blk * j.k * kCB;
    const float* xrow = j.buf + p.base(oy);
    for (int64_t half = 0; half < kCB; half += CB) {
      const int64_t co0 = blk * kCB + half;
      if (co0 >= j.cout) break;
      const int64_t cvalid = std::min<int64_t>(CB, j.cout - co0);
      constexpr int64_t PX = NV * L;
      int64_t ox0 = 0;
      for (; ox0 + PX <= p.ow; ox0 += PX) block<CB, NV, L>(j, wblk + half, xrow + ox0, co0, cvalid, oy * p.ow + ox0, PX);
      // the tail: as few vectors as cover it
      for (int64_t rem = p.ow - ox0; rem > 0; ox0 += L, rem -= L) {
        if (NV > 2 && rem > 2 * L) {
          block<CB, NV, L>(j, wblk + half, xrow + ox0, co0, cvalid, oy * p.ow + ox0, rem);
          break;
        }
        if (NV > 1 && rem > L) {
          block<CB, (NV > 1 ? 2 : 1), L>(j, wblk + half, xrow + ox0, co0, cvalid, oy * p.ow + ox0, rem);
          break;
        }
        if (L >= 8 && rem <= L / 2) {  // half a vector (40 = 32 + 8 pixels)
          block<CB, 1, (L >= 8 ? L / 2 : L)>(j, wblk + half, xrow + ox0, co0, cvalid, oy * p.ow + ox0, rem);
          break;
        }
        block<CB, 1, L>(j, wblk + half, xrow + ox0, co0, cvalid, oy * p.ow + ox0, rem);
      }
    }
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"))) void rows_avx512(const Job& j, int64_t t0, int64_t t1) {
  rows_t<8, 2, 16>(j, t0, t1);
}
__attribute__((target("avx2,fma"))) void rows_avx2(const Job& j, int64_t t0, int64_t t1) { rows_t<4, 3, 8>(j, t0, t1); }
#endif
void rows_default(const Job& j, int64_t t0, int64_t t1) { rows_t<4, 2, 4>(j, t0, t1); }

using RowsFn = void (*)(const Job&, int64_t, int64_t);
// The best variant the CPU runs, capped by `cap`.
RowsFn pick_rows(DirectSmallIsa cap) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  const bool avx512 = cpu::kernel_isa() >= cpu::Isa::kAvx512;  // F, VL, DQ...: x86-64-v4
  const bool avx2 = cpu::kernel_isa() >= cpu::Isa::kAvx2;
  if (avx512 && cap == DirectSmallIsa::kBest) return rows_avx512;
  if (avx2 && cap != DirectSmallIsa::kBaseline) return rows_avx2;
#else
  (void)cap;
#endif
  return rows_default;
}

}  // namespace

void set_direct_small_mode(DirectSmallMode mode) { g_mode = mode; }
void set_direct_small_isa(DirectSmallIsa cap) { g_isa = cap; }

// Measured against im2col + GEMM (and the padded-rows path), 1 and 2
// threads, AVX-512: the direct kernel wins while the taps per output (K =
// Cin * kh * kw) are few, since the GEMM's packing costs per K row while its
// multiply is as fast: a 6x6 stride-2 3->16 stem at 320 0.62x, ResNet's 7x7
// 3->64 stem 0.78x, 3x3 stride-2 3->32 0.85x, 16->32 (K 144) 0.91x,
// 32->64 (K 288) 0.97x (kept on the GEMM: within noise); stride 1 (where Winograd does not take it): 3x3
// 8->16 at 128 0.68x, 16->16 at 80 0.67x, 32->32 at 40 0.9x, 64->64 1.0x,
// 5x5 16->16 at 80 0.79x. Output rows under 32 waste most of a 32-pixel
// block (32->32 on 20x20: 1.14x). 1x1 convs stay on the GEMM, which reads
// their input with no im2col (32->16 at 80x80: 1.56x, 64->64: 1.27x).
bool direct_small_gains(const WindowGeometry& g, int64_t cin, int64_t cout) {
  if (cout > 64 || g.out.back() < 32 || g.kernel_size() == 1) return false;
  int64_t stride = 1;
  for (int64_t s : g.stride) stride = std::max(stride, s);
  const int64_t k = cin * g.kernel_size();
  return stride == 1 ? k <= kMaxTaps : k <= 150;
}

void DirectSmallConv::prepare(const Tensor& w, int64_t group) {
  wp_.clear();
  if (g_mode == DirectSmallMode::kOff || group != 1 || w.dtype() != DType::kFloat32 || w.rank() < 3 ||
      w.rank() > 4 || w.numel() == 0 || w.dim(0) > 64)
    return;
  const int64_t taps = w.numel() / (w.dim(0) * w.dim(1));
  if (g_mode == DirectSmallMode::kAuto && (taps == 1 || w.dim(1) * taps > kMaxTaps))
    return;  // direct_small_gains never takes it: no second copy of W
  cout_ = w.dim(0);
  cin_ = w.dim(1);
  kh_ = w.rank() == 4 ? w.dim(2) : 1;
  kw_ = w.dim(w.rank() - 1);
  w_shape_ = w.shape();
  const int64_t k = cin_ * kh_ * kw_, blocks = (cout_ + kCB - 1) / kCB;
  wp_.assign(static_cast<size_t>(blocks * k * kCB), 0.f);
  const float* src = w.data<float>();
  for (int64_t co = 0; co < cout_; ++co)
    for (int64_t t = 0; t < k; ++t) wp_[static_cast<size_t>(((co / kCB) * k + t) * kCB + co % kCB)] = src[co * k + t];
}

bool DirectSmallConv::applies(const WindowGeometry& g, const Shape& w_shape) const {
  if (!ready() || w_shape != w_shape_ || g_mode == DirectSmallMode::kOff || g.rank() != w_shape.rank() - 2 ||
      g.out_size() <= 0)
    return false;
  return g_mode == DirectSmallMode::kAlways || direct_small_gains(g, cin_, cout_);
}

void DirectSmallConv::run(int64_t n, const WindowGeometry& g, const float* x, float* y, const ConvEpilogue& ep,
                          ThreadPool* pool) const {
  const RowsFn rows = pick_rows(g_isa);
  const Plan p(g, cin_);
  const int64_t k = cin_ * kh_ * kw_, blocks = (cout_ + kCB - 1) / kCB;
  const int64_t in_image = cin_ * p.ih * p.iw, out_plane = p.oh * p.ow, out_image = cout_ * out_plane;
  thread_local std::vector<float> scratch;  // the caller's; workers see it through `buf`
  if (scratch.size() < static_cast<size_t>(cin_ * p.plane)) scratch.resize(static_cast<size_t>(cin_ * p.plane));
  float* buf = scratch.data();
  const int64_t items = blocks * p.oh;
  const int64_t grain = std::max<int64_t>(1, 262144 / std::max<int64_t>(1, p.ow * k * kCB));
  for (int64_t img = 0; img < n; ++img) {
    const float* xi = x + img * in_image;
    parallel_for(pool, cin_ * p.hp, std::max<int64_t>(1, 16384 / p.rs),
                 [&](int64_t i0, int64_t i1) { border(p, xi, i0, i1, buf); });
    const Job j{&p, buf, wp_.data(), cout_, k, blocks, ep.bias, ep.z ? ep.z + img * out_image : nullptr,
                y + img * out_image, ep.lo, ep.hi};
    parallel_for(pool, items, grain, [&](int64_t t0, int64_t t1) {
      rows(j, t0, t1);
      if (!ep.act) return;
      for (int64_t t = t0; t < t1; ++t) {  // the activation over the finished rows
        const int64_t blk = t % blocks, oy = t / blocks;
        for (int64_t co = blk * kCB; co < std::min(cout_, (blk + 1) * kCB); ++co)
          ep.act(j.y + co * out_plane + oy * p.ow, p.ow, ep.act_ctx);
      }
    });
  }
}

}  // namespace kiln::kernels
