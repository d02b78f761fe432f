// Stride-1 Conv over the zero-bordered input read as rows (conv_padded_rows.h).
#include "kernels/portable/conv_padded_rows.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

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
struct Rows {
  int64_t ih, iw, oh, ow, kh, kw, dh, dw, pt, pl;
  int64_t hp, wp;  // the padded input: oh + (kh - 1) * dh rows of ow + (kw - 1) * dw
  explicit Rows(const WindowGeometry& g) {
    const bool two = g.rank() == 2;
    const size_t l = g.rank() - 1;
    ih = two ? g.in[0] : 1;
    oh = two ? g.out[0] : 1;
    kh = two ? g.kernel[0] : 1;
    dh = two ? g.dilation[0] : 1;
    pt = two ? g.pad_begin[0] : 0;
    iw = g.in[l];
    ow = g.out[l];
    kw = g.kernel[l];
    dw = g.dilation[l];
    pl = g.pad_begin[l];
    hp = oh + (kh - 1) * dh;
    wp = ow + (kw - 1) * dw;
  }
  // Columns of the GEMM: every padded row but the last, which stops at ow
  // (so the last tap's run ends at the padded plane's end).
  int64_t cols() const { return (oh - 1) * wp + ow; }
};

// B row p = (c, kh, kw): `plane`-strided channels of the padded input, each
// tap a run starting kh * dh * wp + kw * dw into it.
struct RowsSource final : BPanelSource {
  const float* xp;
  int64_t plane, wp, kh, kw, dh, dw;
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const override;
};

KILN_ISA_BODY void pack_rows_body(const RowsSource& s, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
                                    float* out) {
  static const float kZeros[8] = {};
  const int64_t taps = s.kh * s.kw;
  int64_t c = p0 / taps, t = p0 % taps;
  for (int64_t pp = 0; pp < kc; ++pp) {
    const float* src = s.xp + c * s.plane + (t / s.kw) * s.dh * s.wp + (t % s.kw) * s.dw + j0;
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
// rest of hp x wp zero.
void pad_input(const Rows& r, int64_t c0, int64_t c1, const float* x, float* xp) {
  const int64_t plane = r.hp * r.wp, rows = std::min(r.ih, r.hp - r.pt), cols = std::min(r.iw, r.wp - r.pl);
  for (int64_t c = c0; c < c1; ++c) {
    float* dst = xp + c * plane;
    const float* src = x + c * r.ih * r.iw;
    std::memset(dst, 0, static_cast<size_t>(r.pt * r.wp) * sizeof(float));
    for (int64_t y = 0; y < rows; ++y) {
      float* d = dst + (r.pt + y) * r.wp;
      std::memset(d, 0, static_cast<size_t>(r.pl) * sizeof(float));
      std::memcpy(d + r.pl, src + y * r.iw, static_cast<size_t>(cols) * sizeof(float));
      std::memset(d + r.pl + cols, 0, static_cast<size_t>(r.wp - r.pl - cols) * sizeof(float));
    }
    std::memset(dst + (r.pt + rows) * r.wp, 0, static_cast<size_t>((r.hp - r.pt - rows) * r.wp) * sizeof(float));
  }
}

int64_t vectors(int64_t n) { return (n + 15) / 16; }

}  // namespace

void set_padded_rows_mode(PaddedRowsMode mode) { g_mode = mode; }

bool padded_rows_gain(const WindowGeometry& g) {
  if (g_mode == PaddedRowsMode::kOff || g.rank() < 1 || g.rank() > 2 || g.out_size() <= 0) return false;
  for (size_t d = 0; d < g.rank(); ++d)
    if (g.stride[d] != 1 || g.pad_begin[d] < 0 || g.pad_end[d] < 0) return false;
  const Rows r(g);
  // Padding the input must cover every read: with stride 1 it does when the
  // padded plane holds the input at (pt, pl) (pads that cut the input are
  // handled by copying only what fits).
  if (r.hp <= 0 || r.wp <= 0 || r.pt > r.hp || r.pl > r.wp) return false;
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
  const double overwork = static_cast<double>(vectors(r.cols())) / static_cast<double>(vectors(g.out_size()));
  return overwork <= 1.15;
}

void conv_padded_rows(const WindowGeometry& g, int64_t cg, int64_t mg, const float* xg, const GemmOperand& a,
                      const GemmEpilogue& ep, const float* zg, float* yg, ThreadPool* pool) {
  const Rows r(g);
  const int64_t plane = r.hp * r.wp, cols = r.cols(), taps = r.kh * r.kw;
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
  float* xp = level.padded.get(cg * plane);
  float* c = level.product.get(mg * cols);
  parallel_for(pool, cg, std::max<int64_t>(1, 16384 / plane),
               [&](int64_t c0, int64_t c1) { pad_input(r, c0, c1, xg, xp); });
  RowsSource src;
  src.xp = xp;
  src.plane = plane;
  src.wp = r.wp;
  src.kh = r.kh;
  src.kw = r.kw;
  src.dh = r.dh;
  src.dw = r.dw;
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
        const float* co = c + o * cols + y * r.wp;
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
