// Conv over the zero-bordered input read as rows (conv_padded_rows.h).
#include "kernels/portable/conv_padded_rows.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/portable/cpu/x86/isa.h"
#include "kernels/portable/util/scratch.h"

namespace kiln::kernels {

namespace {

PaddedRowsMode initial_mode() {
  const char* env = std::getenv("KILN_CONV_ROWS");
  if (env && std::strcmp(env, "off") == 0) return PaddedRowsMode::kOff;
  if (env && std::strcmp(env, "always") == 0) return PaddedRowsMode::kAlways;
  return PaddedRowsMode::kAuto;
}

PaddedRowsMode g_mode = initial_mode();

// The geometry as 2-D (rank 1: one row), padded to what the outputs read.
// With stride s the padded input is split into s_h * s_w phase planes,
// plane (a, b) holding padded rows a, a + s_h, ... and columns b, b + s_w,
// ...: tap (kh, kw) of output (oy, ox) reads padded (oy * s_h + kh * dh,
// ox * s_w + kw * dw), which is row oy + kh * dh / s_h, column ox + kw * dw
// / s_w of plane (kh * dh % s_h, kw * dw % s_w). Numbered over the phase
// plane's width, every tap's outputs are again one contiguous run. Stride 1
// has one plane, the zero-bordered input itself.
struct Rows : WindowDims2 {
  int64_t hp, wp;  // the padded input the outputs read: (oh - 1) * sh + (kh - 1) * dh + 1 rows, alike for columns
  int64_t hq, wq;  // one phase plane: ceil(hp / sh) x ceil(wp / sw)
  explicit Rows(const WindowGeometry& g) : WindowDims2(g) {
    hp = (oh - 1) * sh + (kh - 1) * dh + 1;
    wp = (ow - 1) * sw + (kw - 1) * dw + 1;
    hq = (hp + sh - 1) / sh;
    wq = (wp + sw - 1) / sw;
  }
  int64_t plane() const { return hq * wq; }               // one phase plane
  int64_t channel() const { return sh * sw * plane(); }  // all phase planes of one channel
  // Columns of the GEMM: every plane row but the last, which stops at ow
  // (so the last tap's run ends inside its phase plane).
  int64_t cols() const { return (oh - 1) * wq + ow; }
};

// B row p = (c, kh, kw): `channel`-strided channels of the phase planes,
// each tap a run into its plane (Rows).
struct RowsSource final : BPanelSource {
  const float* xp;
  int64_t channel, plane, wq, kh, kw, dh, dw, sh, sw;
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const override;
};

KILN_ISA_BODY void pack_rows_body(const RowsSource& s, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
                                    float* out) {
  static const float kZeros[8] = {};
  const int64_t taps = s.kh * s.kw;
  int64_t c = p0 / taps, t = p0 % taps;
  for (int64_t pp = 0; pp < kc; ++pp) {
    const int64_t y = (t / s.kw) * s.dh, x = (t % s.kw) * s.dw;
    const float* src = s.xp + c * s.channel + ((y % s.sh) * s.sw + x % s.sw) * s.plane + (y / s.sh) * s.wq +
                       x / s.sw + j0;
    detail::PanelWriter<float> w{out + pp * nr, 0, nr, kc, 0.f, kZeros};
    w.emit(src, 1, nc);
    if (w.lane != 0) w.emit(nullptr, 0, nr - w.lane);
    if (++t == taps) {
      t = 0;
      ++c;
    }
  }
}
KILN_ISA_DISPATCH(pack_rows, pack_rows_body);

void RowsSource::pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const {
  pack_rows(*this, p0, kc, j0, nc, nr, out);
}

// xp[c] = X[c] with its zero border: pt rows above, pl columns left, and the
// rest of hp x wp zero, split into its phase planes (Rows).
KILN_ISA_BODY void pad_input_body(const Rows& r, int64_t c0, int64_t c1, const float* x, float* xp) {
  const int64_t plane = r.plane();
  for (int64_t c = c0; c < c1; ++c) {
    const float* src = x + c * r.ih * r.iw;
    for (int64_t a = 0; a < r.sh; ++a) {
      for (int64_t b = 0; b < r.sw; ++b) {
        float* dst = xp + c * r.channel() + (a * r.sw + b) * plane;
        // Plane columns j read input column j * sw + b - pl: inside for j in [lo, hi).
        const int64_t lo = std::min(r.wq, r.pl > b ? (r.pl - b + r.sw - 1) / r.sw : int64_t{0});
        const int64_t hi = std::max(lo, std::min(r.wq, r.iw + r.pl - b > 0 ? (r.iw + r.pl - b - 1) / r.sw + 1 : 0));
        for (int64_t i = 0; i < r.hq; ++i) {
          float* d = dst + i * r.wq;
          const int64_t y = i * r.sh + a - r.pt;
          if (y < 0 || y >= r.ih || hi == lo) {
            std::memset(d, 0, static_cast<size_t>(r.wq) * sizeof(float));
            continue;
          }
          std::memset(d, 0, static_cast<size_t>(lo) * sizeof(float));
          const float* s = src + y * r.iw + lo * r.sw + b - r.pl;
          if (r.sw == 1)
            std::memcpy(d + lo, s, static_cast<size_t>(hi - lo) * sizeof(float));
          else if (r.sw == 2)
            detail::PanelWriter<float>::copy_stride2(d + lo, s, hi - lo);
          else
            for (int64_t j = lo; j < hi; ++j) d[j] = s[(j - lo) * r.sw];
          std::memset(d + hi, 0, static_cast<size_t>(r.wq - hi) * sizeof(float));
        }
      }
    }
  }
}
KILN_ISA_DISPATCH(pad_input, pad_input_body);

int64_t vectors(int64_t n) { return (n + 15) / 16; }

// Strides above this take im2col: the phase planes multiply the passes over
// the input and the strided copies into them.
constexpr int64_t kMaxStride = 2;

}  // namespace

void set_padded_rows_mode(PaddedRowsMode mode) { g_mode = mode; }

bool padded_rows_gain(const WindowGeometry& g, int64_t cg) {
  if (g_mode == PaddedRowsMode::kOff || g.rank() < 1 || g.rank() > 2 || g.out_size() <= 0) return false;
  for (size_t d = 0; d < g.rank(); ++d)
    if (g.stride[d] < 1 || g.stride[d] > kMaxStride || g.pad_begin[d] < 0 || g.pad_end[d] < 0) return false;
  const Rows r(g);
  if (r.hp <= 0 || r.wp <= 0) return false;
  if (g_mode == PaddedRowsMode::kAlways) return true;
  // The GEMM's extra columns (in 16-lane vectors) against im2col's. Within
  // that, rows measured as fast or faster (1 thread, CPU time per run) from
  // 7x7 to 112x112 maps, 8 to 512 channels: 1.6-2.5x on group convs with 8
  // channels per group and on 32-channel outputs at 7x7-14x14, 1.0-1.1x on
  // 64-512 channels at 7x7-56x56 and 16 channels at 112x112, 1.2x on a 5x5
  // conv at 64x64. Wider rows amortize im2col's pieces and the two extra
  // passes (bordering, dropping columns) cost more: 128x128 1.04x and
  // 224x224 1.11x slower.
  if (r.ow > 112) return false;
  // Stride 2, 1 thread: 1.45-1.5x faster on grouped convs (8 channels per
  // group, 56x56 to 14x14 inputs; ResNeXt's 4 per group), 0-6% on 16 to 256
  // channels at 224x224 to 14x14; but 10% slower on a 3-channel 3x3 stem at
  // 224x224 and 37% at 128x128, where the GEMM (K = 27) is cheap against
  // splitting the input into phases and copying the rows out of the scratch.
  if ((r.sh > 1 || r.sw > 1) && cg * r.kh * r.kw < 32) return false;
  const double overwork = static_cast<double>(vectors(r.cols())) / static_cast<double>(vectors(g.out_size()));
  return overwork <= 1.15;
}

void conv_padded_rows(const WindowGeometry& g, int64_t cg, int64_t mg, const float* xg, const GemmOperand& a,
                      const GemmEpilogue& ep, const float* zg, float* yg, ThreadPool* pool) {
  const Rows r(g);
  const int64_t channel = r.channel(), cols = r.cols(), taps = r.kh * r.kw;
  // Scratch per nesting level: a thread waiting inside the GEMM below may run
  // another node's chunk (ThreadPool::wait_helping), which may be this
  // function again, on this thread, while these buffers are still read.
  struct Level {
    Scratch padded, product;
  };
  thread_local std::vector<std::unique_ptr<Level>> levels;
  thread_local size_t depth = 0;
  if (levels.size() <= depth) levels.push_back(std::make_unique<Level>());
  Level& level = *levels[depth];
  struct Enter {
    size_t& d;
    explicit Enter(size_t& depth_ref) : d(depth_ref) { ++d; }
    ~Enter() { --d; }
  } enter(depth);
  float* xp = level.padded.get(cg * channel);
  float* c = level.product.get(mg * cols);
  parallel_for(pool, cg, std::max<int64_t>(1, 16384 / channel),
               [&](int64_t c0, int64_t c1) { pad_input(r, c0, c1, xg, xp); });
  RowsSource src;
  src.xp = xp;
  src.channel = channel;
  src.plane = r.plane();
  src.wq = r.wq;
  src.kh = r.kh;
  src.kw = r.kw;
  src.dh = r.dh;
  src.dw = r.dw;
  src.sh = r.sh;
  src.sw = r.sw;
  // With Z the clamp and the activation wait for the sum (they run below).
  GemmEpilogue gemm_ep = ep;
  if (zg) {
    gemm_ep = GemmEpilogue{};
    gemm_ep.row_bias = ep.row_bias;
    gemm_ep.col_bias = ep.col_bias;
  }
  sgemm_ex(mg, cols, cg * taps, 1.f, a, GemmOperand::from_source(src), 0.f, c, cols, pool, gemm_ep);
  const int64_t out_plane = r.oh * r.ow;
  const bool clamp = ep.clamp_min > -std::numeric_limits<float>::infinity() ||
                     ep.clamp_max < std::numeric_limits<float>::infinity();
  parallel_for(pool, mg, std::max<int64_t>(1, 16384 / out_plane), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      float* yo = yg + o * out_plane;
      for (int64_t y = 0; y < r.oh; ++y) {
        const float* co = c + o * cols + y * r.wq;
        if (!zg) {
          std::memcpy(yo + y * r.ow, co, static_cast<size_t>(r.ow) * sizeof(float));
          continue;
        }
        const float* zo = zg + o * out_plane + y * r.ow;
        for (int64_t x = 0; x < r.ow; ++x) yo[y * r.ow + x] = co[x] + zo[x];
      }
      if (!zg) continue;
      if (clamp)
        for (int64_t i = 0; i < out_plane; ++i) yo[i] = std::min(std::max(yo[i], ep.clamp_min), ep.clamp_max);
      if (ep.apply) ep.apply(ep.apply_ctx, yo, out_plane, 1, out_plane);
    }
  });
}

}  // namespace kiln::kernels
