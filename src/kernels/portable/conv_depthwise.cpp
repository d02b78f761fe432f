// Depthwise convolution as one flat multi-tap loop per channel.
//
// The zero-padded input plane is split by stride into s_h * s_w phase planes
// of Hq x Wq floats: phase (qh, qw) holds padded[r * s_h + qh][c * s_w + qw].
// Tap (kh, kw) of output (oh, ow) reads padded[oh * s_h + kh * d_h]
// [ow * s_w + kw * d_w], which is phase ((kh d_h) % s_h, (kw d_w) % s_w) at
// row oh + (kh d_h) / s_h, column ow + (kw d_w) / s_w. With Wq = out_w +
// ((k_w - 1) d_w) / s_w, output (oh, ow) at flat index oh * Wq + ow reads
// flat index (oh * Wq + ow) + offset(tap) of its phase: every tap is a
// contiguous, unit-stride read whatever the stride and dilation, and the
// whole plane (all rows at once, so 7x7 maps fill vectors too) is one loop
// of k_h * k_w fused multiply-adds per output over 16-float vectors. Columns
// ow >= out_w of the flat result are discarded when it is copied out.
//
// 3x3 with column stride 2 keeps a kernel of its own that reads the input in
// place (stride 2 picks the even lanes of two loads): with nine taps the
// phase copy costs about as much as the arithmetic, and there it measured
// 15% slower than reading in place.
#include "kernels/portable/conv_depthwise.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "kernels/portable/conv_depthwise_packed.h"
#include "kernels/portable/conv_depthwise_rows.h"
#include "kernels/portable/util/cv_common.h"

namespace kiln::kernels {

namespace {

typedef float Vec16 __attribute__((vector_size(64)));
typedef int Idx16 __attribute__((vector_size(64)));

constexpr int64_t kLanes = 16;
constexpr int64_t kBlock = 4 * kLanes;  // outputs per step: four independent accumulators

// y = min(max(y, lo), hi), NaN staying NaN; in this form it vectorizes (to
// max/min with the operands ordered for NaN), not to branches.
KILN_ISA_BODY
void clamp_plane_body(float* y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = y[i];
    v = v < lo ? lo : v;
    y[i] = v > hi ? hi : v;
  }
}
KILN_ISA_DISPATCH(clamp_plane, clamp_plane_body);

// The epilogue over one finished plane (the paths that copy the plane out).
void plane_epilogue(const DepthwiseEpilogue& ep, float* y, int64_t n) {
  if (ep.clamps()) clamp_plane(y, n, ep.lo, ep.hi);
  if (ep.apply) ep.apply(ep.ctx, y, n);
}


// out[i] = bias + sum_t w[t] * src[t][i] for i < n rounded up to kBlock
// (out and every src[t] must have that many floats readable / writable).
KILN_ISA_BODY
void multi_tap_body(float* out, int64_t n, const float* const* src, const float* w, int64_t taps, float bias) {
  const int64_t n_lanes = (n + kLanes - 1) / kLanes * kLanes;
  int64_t i = 0;
  for (; i + kBlock <= n_lanes; i += kBlock) {
    Vec16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    a0 += bias;
    a1 += bias;
    a2 += bias;
    a3 += bias;
    for (int64_t t = 0; t < taps; ++t) {
      const float* s = src[t] + i;
      const float wt = w[t];
      Vec16 v0, v1, v2, v3;
      std::memcpy(&v0, s, sizeof v0);
      std::memcpy(&v1, s + kLanes, sizeof v1);
      std::memcpy(&v2, s + 2 * kLanes, sizeof v2);
      std::memcpy(&v3, s + 3 * kLanes, sizeof v3);
      a0 += wt * v0;
      a1 += wt * v1;
      a2 += wt * v2;
      a3 += wt * v3;
    }
    std::memcpy(out + i, &a0, sizeof a0);
    std::memcpy(out + i + kLanes, &a1, sizeof a1);
    std::memcpy(out + i + 2 * kLanes, &a2, sizeof a2);
    std::memcpy(out + i + 3 * kLanes, &a3, sizeof a3);
  }
  for (; i < n_lanes; i += kLanes) {
    Vec16 a = {};
    a += bias;
    for (int64_t t = 0; t < taps; ++t) {
      Vec16 v;
      std::memcpy(&v, src[t] + i, sizeof v);
      a += w[t] * v;
    }
    std::memcpy(out + i, &a, sizeof a);
  }
}
KILN_ISA_DISPATCH(multi_tap, multi_tap_body);

// The per-thread scratch: phase planes, the flat result and the tap table.
struct Layout {
  int64_t hq = 0, wq = 0;       // phase plane rows and columns
  int64_t flat = 0;             // out_h * wq, the outputs computed per channel
  int64_t flat_padded = 0;      // flat rounded up to a whole step
  int64_t plane = 0;            // floats per phase plane
  int64_t planes_floats = 0;    // all phase planes
  int64_t phases_floats = 0;    // all phase planes plus read slack
  std::vector<int64_t> offset;  // per tap: phase plane start + row/column offset, in floats
};

Layout make_layout(const DepthwiseConv& p) {
  Layout l;
  l.wq = p.out_w + ((p.k_w - 1) * p.d_w) / p.s_w;
  l.hq = p.out_h + ((p.k_h - 1) * p.d_h) / p.s_h;
  l.flat = p.out_h * l.wq;
  l.flat_padded = (l.flat + kBlock - 1) / kBlock * kBlock;
  l.plane = l.hq * l.wq;
  // A tap reads at most (rows_off * wq + col_off) + flat_padded floats from
  // its phase start, and rows_off * wq + col_off + flat < plane + wq: the
  // last phase's reads end within wq + flat_padded floats after the planes.
  l.planes_floats = p.s_h * p.s_w * l.plane;
  l.phases_floats = l.planes_floats + l.wq + l.flat_padded;
  for (int64_t kh = 0; kh < p.k_h; ++kh)
    for (int64_t kw = 0; kw < p.k_w; ++kw) {
      const int64_t rh = kh * p.d_h, rw = kw * p.d_w;
      const int64_t phase = (rh % p.s_h) * p.s_w + rw % p.s_w;
      l.offset.push_back(phase * l.plane + (rh / p.s_h) * l.wq + rw / p.s_w);
    }
  return l;
}

// even[c] = src[2c], odd[c] = src[2c + 1] for c < n.
KILN_ISA_BODY
void deinterleave2_body(const float* __restrict src, int64_t n, float* __restrict even, float* __restrict odd) {
  for (int64_t c = 0; c < n; ++c) {
    even[c] = src[2 * c];
    odd[c] = src[2 * c + 1];
  }
}
KILN_ISA_DISPATCH(deinterleave2, deinterleave2_body);

// Phase rows of one input row `xr` (in_w floats): dst[qw * plane + c] =
// padded[c * s_w + qw], where padded column pc is xr[pc - p_w] or zero.
void fill_phase_row(const DepthwiseConv& p, const Layout& l, const float* xr, float* dst) {
  auto at = [&](int64_t pc) { return pc >= p.p_w && pc - p.p_w < p.in_w ? xr[pc - p.p_w] : 0.f; };
  if (p.s_w == 1) {
    const int64_t lo = std::min(p.p_w, l.wq), hi = std::max(lo, std::min(l.wq, p.p_w + p.in_w));
    std::fill_n(dst, lo, 0.f);
    std::copy_n(xr + (lo - p.p_w), hi - lo, dst + lo);
    std::fill(dst + hi, dst + l.wq, 0.f);
    return;
  }
  int64_t lo = 0, hi = 0;  // with s_w == 2: columns c whose both phases are inside the row
  if (p.s_w == 2) {
    lo = std::min(l.wq, (p.p_w + 1) / 2);
    hi = p.in_w - 2 + p.p_w >= 0 ? std::max(lo, std::min(l.wq, (p.in_w - 2 + p.p_w) / 2 + 1)) : lo;
    if (hi > lo) deinterleave2(xr + (2 * lo - p.p_w), hi - lo, dst + lo, dst + l.plane + lo);
  }
  for (int64_t qw = 0; qw < p.s_w; ++qw) {
    float* d = dst + qw * l.plane;
    for (int64_t c = 0; c < lo; ++c) d[c] = at(c * p.s_w + qw);
    for (int64_t c = hi; c < l.wq; ++c) d[c] = at(c * p.s_w + qw);
  }
}

// Fills the phase planes of one input channel `xc` ([in_h][in_w]).
void fill_phases(const DepthwiseConv& p, const Layout& l, const float* xc, float* phases) {
  for (int64_t qh = 0; qh < p.s_h; ++qh) {
    float* plane = phases + qh * p.s_w * l.plane;
    for (int64_t r = 0; r < l.hq; ++r) {
      const int64_t ih = r * p.s_h + qh - p.p_h;
      if (ih >= 0 && ih < p.in_h) {
        fill_phase_row(p, l, xc + ih * p.in_w, plane + r * l.wq);
      } else {
        for (int64_t qw = 0; qw < p.s_w; ++qw) std::fill_n(plane + qw * l.plane + r * l.wq, l.wq, 0.f);
      }
    }
  }
}

// 3x3, column stride 2, one output row: 16 outputs per step held in one
// vector, 9 taps from up to three input rows. `rows[k]` is input row
// oh * s_h - pad + k (in_w floats), or null in the padding. Columns
// [ow_lo, ow_hi) must have all three taps inside the row; vector steps also
// stop before reading past it.
KILN_ISA_BODY
void depthwise3x3_s2_row_body(float* y, int64_t ow_lo, int64_t ow_hi, const float* const* rows, const float* w, float bias,
                         int64_t pad, int64_t in_w) {
  [[maybe_unused]] const Idx16 evens = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  constexpr int64_t kSpan = 34;  // floats one 16-wide step reads
  int64_t ow = ow_lo;
  for (; ow + 16 <= ow_hi && ow * 2 - pad + kSpan <= in_w; ow += 16) {
    Vec16 acc = {};
    acc += bias;
    for (int k = 0; k < 3; ++k) {
      if (!rows[k]) continue;
      const float* x = rows[k] + ow * 2 - pad;
      for (int kw = 0; kw < 3; ++kw) {
        Vec16 v, next;
        std::memcpy(&v, x + kw, sizeof v);
        std::memcpy(&next, x + kw + 16, sizeof next);
#if defined(__clang__)
        v = __builtin_shufflevector(v, next, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
#else
        v = __builtin_shuffle(v, next, evens);
#endif
        acc += w[k * 3 + kw] * v;
      }
    }
    std::memcpy(y + ow, &acc, sizeof acc);
  }
  for (; ow < ow_hi; ++ow) {
    float acc = bias;
    for (int k = 0; k < 3; ++k) {
      if (!rows[k]) continue;
      const float* x = rows[k] + ow * 2 - pad;
      acc += w[k * 3] * x[0] + w[k * 3 + 1] * x[1] + w[k * 3 + 2] * x[2];
    }
    y[ow] = acc;
  }
}
KILN_ISA_DISPATCH(depthwise3x3_s2_row, depthwise3x3_s2_row_body);

// One output plane of a 3x3 conv with column stride 2 (dilation 1). Narrow
// rows (maps up to 48 wide) go through a zero-padded copy of the input
// (`padded`, zero where the input does not land: see depthwise3x3_s2) so
// whole rows run as vector steps; wide rows run the interior columns as
// vector steps and the edge columns one by one.
void depthwise3x3_s2_plane(const DepthwiseConv& p, const float* xp, const float* wp, float b0, float* yp,
                           float* padded, float* ytmp) {
  const int64_t out_w16 = (p.out_w + 15) / 16 * 16;
  if (p.out_w < 48) {
    const int64_t padded_w = out_w16 * 2 + 34;  // what the vector steps read
    for (int64_t ih = 0; ih < p.in_h; ++ih)
      std::copy_n(xp + ih * p.in_w, std::min(p.in_w, padded_w - p.p_w), padded + ih * padded_w + p.p_w);
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      const float* rows[3];
      for (int64_t kh = 0; kh < 3; ++kh) {
        const int64_t ih = oh * p.s_h - p.p_h + kh;
        rows[kh] = ih >= 0 && ih < p.in_h ? padded + ih * padded_w : nullptr;
      }
      depthwise3x3_s2_row(ytmp, 0, out_w16, rows, wp, b0, 0, padded_w);
      std::copy_n(ytmp, p.out_w, yp + oh * p.out_w);
    }
    return;
  }
  // Interior columns: all three taps inside the row.
  const int64_t lo = std::min(p.out_w, (p.p_w + 1) / 2);
  const int64_t hi = std::max(lo, std::min(p.out_w, p.in_w - 3 + p.p_w >= 0 ? (p.in_w - 3 + p.p_w) / 2 + 1 : 0));
  for (int64_t oh = 0; oh < p.out_h; ++oh) {
    const float* rows[3];
    for (int64_t kh = 0; kh < 3; ++kh) {
      const int64_t ih = oh * p.s_h - p.p_h + kh;
      rows[kh] = ih >= 0 && ih < p.in_h ? xp + ih * p.in_w : nullptr;
    }
    float* yrow = yp + oh * p.out_w;
    depthwise3x3_s2_row(yrow, lo, hi, rows, wp, b0, p.p_w, p.in_w);
    for (int64_t ow = 0; ow < p.out_w; ++ow) {
      if (ow == lo) ow = hi;
      if (ow >= p.out_w) break;
      float acc = b0;
      for (int64_t kh = 0; kh < 3; ++kh) {
        if (!rows[kh]) continue;
        for (int64_t kw = 0; kw < 3; ++kw) {
          const int64_t iw = ow * 2 - p.p_w + kw;
          if (iw >= 0 && iw < p.in_w) acc += wp[kh * 3 + kw] * rows[kh][iw];
        }
      }
      yrow[ow] = acc;
    }
  }
}

bool is_3x3_s2(const DepthwiseConv& p) {
  return p.k_h == 3 && p.k_w == 3 && p.d_h == 1 && p.d_w == 1 && p.s_w == 2;
}

// The planes of units [begin, end) of a 3x3 column-stride-2 conv.
void depthwise3x3_s2(const DepthwiseConv& p, const float* x, const float* w, const float* bias, float* y,
                     const DepthwiseEpilogue& ep, int64_t begin, int64_t end, std::vector<float>& padded, std::vector<float>& ytmp) {
  const int64_t out_w16 = (p.out_w + 15) / 16 * 16;
  // Zeroed once: the planes' copies land on the same columns every time.
  if (p.out_w < 48) padded.assign(static_cast<size_t>(p.in_h * (out_w16 * 2 + 34)), 0.f);
  ytmp.resize(static_cast<size_t>(out_w16));
  for (int64_t u = begin; u < end; ++u)
    for (int64_t j = 0; j < p.mult; ++j) {
      const int64_t img = u / p.c, oc = (u % p.c) * p.mult + j;
      float* yp = y + ((img * p.c * p.mult) + oc) * p.out_h * p.out_w;
      depthwise3x3_s2_plane(p, x + u * p.in_h * p.in_w, w + oc * 9, bias ? bias[oc] : 0.f, yp, padded.data(),
                            ytmp.data());
      plane_epilogue(ep, yp, p.out_h * p.out_w);
    }
}

// ------------------------------------------------- output-width phase planes
//
// When every input column lands in an output-wide phase plane
// (ceil(in_w / s_w) <= out_w: "same" padding and the like) and maps are
// narrow (up to kMaxOutputWidth),
// the phase planes are out_w wide, so the flat index of an output in its
// plane is also its index in Y: outputs are computed straight into Y, with
// the epilogue in registers, and there is no copy out. A tap of output
// column ow then reads phase column ow + dc; where that falls outside the
// row (or the input column outside the input), it reads a neighbour and the
// tap's partial sum is masked to zero (a bit mask, so NaN or Inf in the
// neighbour never leaks). Rows outside the input are zero rows of the
// phase planes. For stride 1 with in_w == out_w the fill is one copy of the
// plane.

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Wider maps keep the padded planes: their rows fill whole vector steps, and
// the masks cost more there (measured: 56 and 112 wide, 5-15%) than the
// copy out does.
constexpr int64_t kMaxOutputWidth = 32;

bool fits_output_width(const DepthwiseConv& p) {
  return p.out_w <= kMaxOutputWidth && (p.in_w + p.s_w - 1) / p.s_w <= p.out_w;
}

struct OutLayout {
  int64_t top = 0, rows = 0;  // phase rows stored: phase row r at r + top, r in [-top, rows - top)
  int64_t front = 0;          // zero floats before the first phase plane
  int64_t plane = 0;          // floats per phase plane: rows * out_w
  int64_t total = 0;          // floats of the buffer, slack included
  std::vector<int64_t> offset;  // per tap (kh, kw): buffer offset read by output 0
  std::vector<int32_t> col;     // per kw: input column of output column 0 (kw * d_w - p_w)
  std::vector<uint8_t> masked;  // per kw: whether some output column's tap falls outside
  int32_t ow0[kBlock] = {};     // output column of flat index i < kBlock
};

OutLayout make_out_layout(const DepthwiseConv& p) {
  OutLayout l;
  const int64_t min_dr = floor_div(-p.p_h, p.s_h), max_dr = floor_div((p.k_h - 1) * p.d_h - p.p_h, p.s_h);
  const int64_t min_dc = floor_div(-p.p_w, p.s_w), max_dc = floor_div((p.k_w - 1) * p.d_w - p.p_w, p.s_w);
  l.top = std::max<int64_t>(0, -min_dr);
  l.rows = l.top + p.out_h + std::max<int64_t>(0, max_dr);
  l.front = (std::max<int64_t>(0, -min_dc) + kLanes - 1) / kLanes * kLanes;
  l.plane = l.rows * p.out_w;
  // Reads end before front + planes + max_dc + (flat rounded up to a step).
  l.total = l.front + p.s_h * p.s_w * l.plane + std::max<int64_t>(0, max_dc) + kBlock;
  for (int64_t kh = 0; kh < p.k_h; ++kh)
    for (int64_t kw = 0; kw < p.k_w; ++kw) {
      const int64_t rh = kh * p.d_h - p.p_h, rw = kw * p.d_w - p.p_w;
      const int64_t dr = floor_div(rh, p.s_h), dc = floor_div(rw, p.s_w);
      const int64_t phase = (rh - dr * p.s_h) * p.s_w + (rw - dc * p.s_w);
      l.offset.push_back(l.front + phase * l.plane + (l.top + dr) * p.out_w + dc);
    }
  for (int64_t i = 0; i < kBlock; ++i) l.ow0[i] = static_cast<int32_t>(i % p.out_w);
  for (int64_t kw = 0; kw < p.k_w; ++kw) {
    const int64_t c0 = kw * p.d_w - p.p_w;
    l.col.push_back(static_cast<int32_t>(c0));
    l.masked.push_back(c0 < 0 || (p.out_w - 1) * p.s_w + c0 >= p.in_w);
  }
  return l;
}

// Fills the phase planes of input channel `xc` into `buf` (zeroed once per
// chunk: what is never written, rows and columns outside the input, stays 0).
void fill_out_phases(const DepthwiseConv& p, const OutLayout& l, const float* xc, float* buf) {
  float* base = buf + l.front;
  if (p.s_h == 1 && p.s_w == 1 && p.in_w == p.out_w) {
    const int64_t r0 = std::max<int64_t>(0, -l.top), r1 = std::min(p.in_h, l.rows - l.top);
    if (r1 > r0) std::memcpy(base + (r0 + l.top) * p.out_w, xc + r0 * p.in_w, static_cast<size_t>((r1 - r0) * p.in_w) * 4);
    return;
  }
  for (int64_t a = 0; a < p.s_h; ++a)
    for (int64_t q = 0; q < l.rows; ++q) {
      const int64_t ih = (q - l.top) * p.s_h + a;
      if (ih < 0 || ih >= p.in_h) continue;
      const float* xr = xc + ih * p.in_w;
      float* dst = base + a * p.s_w * l.plane + q * p.out_w;
      if (p.s_w == 1) {
        std::memcpy(dst, xr, static_cast<size_t>(std::min(p.in_w, p.out_w)) * 4);
      } else if (p.s_w == 2) {
        const int64_t pairs = std::min(p.out_w, p.in_w / 2);
        deinterleave2(xr, pairs, dst, dst + l.plane);
        if (pairs < p.out_w && 2 * pairs < p.in_w) dst[pairs] = xr[2 * pairs];
      } else {
        for (int64_t b = 0; b < p.s_w; ++b)
          for (int64_t c = 0; c < p.out_w && c * p.s_w + b < p.in_w; ++c) dst[b * l.plane + c] = xr[c * p.s_w + b];
      }
    }
}

struct OutPlaneArgs {
  const DepthwiseConv* p;
  const OutLayout* l;
  const float* buf;  // the phase buffer
  const float* w;    // this channel's k_h * k_w taps
  float bias;
  float lo, hi;
  bool clamp;
};

// One output plane (out_h * out_w floats at y), four vectors per step.
KILN_ISA_BODY
void out_plane_body(const OutPlaneArgs& a, float* y) {
  const DepthwiseConv& p = *a.p;
  const OutLayout& l = *a.l;
  const int64_t n = p.out_h * p.out_w, kh_n = p.k_h, kw_n = p.k_w;
  const Vec16 lo = Vec16{} + a.lo, hi = Vec16{} + a.hi;
  const int32_t in_w = static_cast<int32_t>(p.in_w), s_w = static_cast<int32_t>(p.s_w);
  const int32_t out_w = static_cast<int32_t>(p.out_w), step = static_cast<int32_t>(kLanes % p.out_w);
  Idx16 ow[4];  // output column of each lane
  std::memcpy(ow, l.ow0, sizeof ow);
  for (int64_t i = 0; i < n; i += kBlock) {
    Vec16 acc[4];
    for (int v = 0; v < 4; ++v) acc[v] = Vec16{} + a.bias;
    for (int64_t kw = 0; kw < kw_n; ++kw) {
      Vec16 g[4] = {};
      for (int64_t kh = 0; kh < kh_n; ++kh) {
        const int64_t t = kh * kw_n + kw;
        const float* s = a.buf + l.offset[static_cast<size_t>(t)] + i;
        const float wt = a.w[t];
        for (int v = 0; v < 4; ++v) {
          Vec16 x;
          std::memcpy(&x, s + v * kLanes, sizeof x);
          g[v] += wt * x;
        }
      }
      if (!l.masked[static_cast<size_t>(kw)]) {
        for (int v = 0; v < 4; ++v) acc[v] += g[v];
        continue;
      }
      const int32_t c0 = l.col[static_cast<size_t>(kw)];
      for (int v = 0; v < 4; ++v) {
        const Idx16 c = ow[v] * s_w + c0;
        // Sign-bit arithmetic, not compares: GCC would scalarize a compare
        // turned into a vector without AVX-512DQ.
        const Idx16 keep = ~((c | (in_w - 1 - c)) >> 31);
        const Idx16 bits = __builtin_bit_cast(Idx16, g[v]) & keep;
        acc[v] += __builtin_bit_cast(Vec16, bits);
      }
    }
    for (int v = 0; v < 4; ++v) {
      if (a.clamp) {  // NaN stays NaN
        acc[v] = acc[v] < lo ? lo : acc[v];
        acc[v] = acc[v] > hi ? hi : acc[v];
      }
      const int64_t at = i + v * kLanes;
      if (at + kLanes <= n) {
        std::memcpy(y + at, &acc[v], sizeof acc[v]);
      } else if (at < n) {
        std::memcpy(y + at, &acc[v], static_cast<size_t>(n - at) * sizeof(float));
      }
      // Advance each lane's column by kBlock = 4 vectors.
      for (int r = 0; r < 4; ++r) {
        ow[v] += step;
        ow[v] -= ((out_w - 1 - ow[v]) >> 31) & out_w;
      }
    }
  }
}
KILN_ISA_DISPATCH(out_plane, out_plane_body);

// The output planes of units [begin, end) on output-wide phase planes.
void depthwise_out_width(const DepthwiseConv& p, const OutLayout& l, const float* x, const float* w,
                         const float* bias, float* y, const DepthwiseEpilogue& ep, int64_t begin, int64_t end,
                         std::vector<float>& buf) {
  buf.assign(static_cast<size_t>(l.total), 0.f);
  const int64_t taps = p.k_h * p.k_w, out_plane_n = p.out_h * p.out_w;
  OutPlaneArgs a{&p, &l, buf.data(), nullptr, 0.f, ep.lo, ep.hi, ep.clamps()};
  for (int64_t u = begin; u < end; ++u) {
    const int64_t img = u / p.c, ic = u % p.c;
    fill_out_phases(p, l, x + u * p.in_h * p.in_w, buf.data());
    for (int64_t j = 0; j < p.mult; ++j) {
      const int64_t oc = ic * p.mult + j;
      a.w = w + oc * taps;
      a.bias = bias ? bias[oc] : 0.f;
      float* yp = y + (img * p.c * p.mult + oc) * out_plane_n;
      out_plane(a, yp);
      if (ep.apply) ep.apply(ep.ctx, yp, out_plane_n);
    }
  }
}
}  // namespace

void depthwise_conv_f32(const DepthwiseConv& p, const float* x, const float* w, const float* bias, float* y,
                        ThreadPool* pool, const DepthwiseEpilogue& ep) {
  // With AVX2 or AVX-512: small maps with the channels in the lanes, wide
  // maps along the rows (measured 1.2-2.5x faster than the kernels below,
  // which remain for other CPUs, depth multipliers > 1 with narrow maps,
  // dilations, and k_h outside 3/5/7 on wide maps).
  if (depthwise_packed_applies(p)) {
    depthwise_packed_f32(p, x, w, bias, y, pool, ep);
    return;
  }
  if (depthwise_rows_applies(p)) {
    depthwise_rows_f32(p, x, w, bias, y, pool, ep);
    return;
  }
  // 3x3 column-stride-2 keeps its in-place kernel where one vector covers an
  // output row (measured on 28 -> 14 maps: 15% faster; 56 -> 28 maps: the
  // output-wide planes 14% faster).
  const bool out_width = fits_output_width(p) && !(is_3x3_s2(p) && p.out_w <= kLanes);
  const Layout l = out_width ? Layout{} : make_layout(p);
  const OutLayout ol = out_width ? make_out_layout(p) : OutLayout{};
  const int64_t taps = p.k_h * p.k_w, out_plane = p.out_h * p.out_w;
  const int64_t units = p.n * p.c;  // (image, input channel): one phase fill, mult outputs
  // Chunks of at least ~32k multiply-adds, yet at least one per thread.
  const int64_t per_unit = std::max<int64_t>(1, p.mult * out_plane * taps);
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t grain =
      std::max<int64_t>(1, std::min((units + threads - 1) / threads, (int64_t{1} << 15) / per_unit));
  parallel_for(pool, units, grain, [&](int64_t begin, int64_t end) {
    // Per-thread scratch kept between calls; buffers past kKeepFloats (huge
    // planes) are released after the chunk instead of held for the process.
    constexpr size_t kKeepFloats = size_t{1} << 20;
    thread_local std::vector<float> phases, flat;
    thread_local std::vector<const float*> src;
    struct Release {
      ~Release() {
        for (std::vector<float>* v : {&phases, &flat})
          if (v->capacity() > kKeepFloats) std::vector<float>().swap(*v);
      }
    } release;
    if (out_width) {
      depthwise_out_width(p, ol, x, w, bias, y, ep, begin, end, phases);
      return;
    }
    if (is_3x3_s2(p)) {
      depthwise3x3_s2(p, x, w, bias, y, ep, begin, end, phases, flat);
      return;
    }
    if (phases.size() < static_cast<size_t>(l.phases_floats)) phases.resize(static_cast<size_t>(l.phases_floats));
    if (flat.size() < static_cast<size_t>(l.flat_padded)) flat.resize(static_cast<size_t>(l.flat_padded));
    // The slack after the planes is read only for discarded outputs; keep it
    // finite (zero) so those lanes never see NaN or denormals.
    std::fill(phases.begin() + l.planes_floats, phases.begin() + l.phases_floats, 0.f);
    src.resize(static_cast<size_t>(taps));
    for (int64_t t = 0; t < taps; ++t) src[static_cast<size_t>(t)] = phases.data() + l.offset[static_cast<size_t>(t)];
    for (int64_t u = begin; u < end; ++u) {
      const int64_t img = u / p.c, ic = u % p.c;
      fill_phases(p, l, x + u * p.in_h * p.in_w, phases.data());
      for (int64_t j = 0; j < p.mult; ++j) {
        const int64_t oc = ic * p.mult + j;
        multi_tap(flat.data(), l.flat, src.data(), w + oc * taps, taps, bias ? bias[oc] : 0.f);
        float* yp = y + (img * p.c * p.mult + oc) * out_plane;
        if (l.wq == p.out_w) {
          std::copy_n(flat.data(), out_plane, yp);
        } else {
          for (int64_t oh = 0; oh < p.out_h; ++oh) std::copy_n(flat.data() + oh * l.wq, p.out_w, yp + oh * p.out_w);
        }
        plane_epilogue(ep, yp, out_plane);
      }
    }
  });
}

}  // namespace kiln::kernels
