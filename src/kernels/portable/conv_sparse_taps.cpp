// Conv by kernel tap over the outputs each tap reaches (conv_sparse_taps.h).
#include "kernels/portable/conv_sparse_taps.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/portable/util/gemm_prepack.h"
#include "kernels/portable/util/scratch.h"

namespace kiln::kernels {

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

// The outputs o in [0, out) whose input o * s - pad + k * d is in [0, in).
void tap_interval(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad, int64_t* lo, int64_t* hi) {
  *lo = std::clamp<int64_t>(ceil_div(pad - k * d, s), 0, out);
  *hi = std::clamp<int64_t>(floor_div(in - 1 + pad - k * d, s) + 1, 0, out);
}

// Rows p (input channels) and columns j (a tap's output box, row-major) of
// one tap's B: X[c, iy0 + by * sh, ix0 + bx * sw] for j = by * bw + bx. Every
// read is inside the input (the box is where the tap reaches it).
struct BoxGeometry {
  const float* x;  // image
  int64_t plane, in_w;
  int64_t iy0, ix0, sh, sw;
  int64_t bw;  // box width
};

KILN_ISA_BODY void pack_box_panels_body(const BoxGeometry& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                                          int64_t nr, float* out) {
  static const float kZeros[8] = {};
  for (int64_t pp = 0; pp < kc; ++pp) {
    const float* xc = b.x + (p0 + pp) * b.plane;
    detail::PanelWriter<float> w{out + pp * nr, 0, nr, kc, 0.f, kZeros};
    for (int64_t j = j0, end = j0 + nc; j < end;) {
      const int64_t by = j / b.bw, bx = j % b.bw, run = std::min(b.bw - bx, end - j);
      w.emit(xc + (b.iy0 + by * b.sh) * b.in_w + b.ix0 + bx * b.sw, b.sw, run);
      j += run;
    }
    if (w.lane != 0) w.emit(nullptr, 0, nr - w.lane);
  }
}
KILN_ISA_DISPATCH(pack_box_panels, pack_box_panels_body);

class BoxSource final : public BPanelSource {
 public:
  explicit BoxSource(const BoxGeometry& b) : b_(b) {}
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const override {
    pack_box_panels(b_, p0, kc, j0, nc, nr, out);
  }

 private:
  BoxGeometry b_;
};


// Y's box [lo, hi) of every channel += the matching rows of C (cout x box).
void add_box(const TapBox& box, const float* c, int64_t cout, int64_t out_size, int64_t ow, float* y,
             ThreadPool* pool) {
  const int64_t bh = box.hi[0] - box.lo[0], bw = box.hi[1] - box.lo[1];
  parallel_for(pool, cout, std::max<int64_t>(1, 8192 / (bh * bw)), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t r = 0; r < bh; ++r) {
        float* yr = y + o * out_size + (box.lo[0] + r) * ow + box.lo[1];
        const float* cr = c + o * bh * bw + r * bw;
        for (int64_t t = 0; t < bw; ++t) yr[t] += cr[t];
      }
  });
}

// y = clamp(y + z, lo, hi) then act, per output plane.
void finish(float* y, int64_t planes, int64_t plane, const ConvEpilogue& ep, ThreadPool* pool) {
  const bool clamp = ep.clamps();
  if (!ep.z && !clamp && !ep.act) return;
  parallel_for(pool, planes, std::max<int64_t>(1, 16384 / plane), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* yp = y + p * plane;
      if (ep.z) {
        const float* zp = ep.z + p * plane;
        for (int64_t i = 0; i < plane; ++i) yp[i] += zp[i];
      }
      if (clamp)
        for (int64_t i = 0; i < plane; ++i) yp[i] = std::min(std::max(yp[i], ep.lo), ep.hi);
      if (ep.act) ep.act(yp, plane, ep.act_ctx);
    }
  });
}

}  // namespace

std::vector<TapBox> tap_boxes(const WindowGeometry& g) {
  const WindowDims2 d(g);
  std::vector<TapBox> boxes(static_cast<size_t>(d.kh * d.kw));
  for (int64_t a = 0; a < d.kh; ++a)
    for (int64_t b = 0; b < d.kw; ++b) {
      TapBox& box = boxes[static_cast<size_t>(a * d.kw + b)];
      tap_interval(d.ih, d.oh, a, d.sh, d.dh, d.pt, &box.lo[0], &box.hi[0]);
      tap_interval(d.iw, d.ow, b, d.sw, d.dw, d.pl, &box.lo[1], &box.hi[1]);
    }
  return boxes;
}

bool SparseTapConv::sparse_enough(const WindowGeometry& g) {
  if (g.rank() < 1 || g.rank() > 2 || g.out_size() <= 0) return false;
  int64_t live = 0;
  for (const TapBox& b : tap_boxes(g)) live += b.size();
  return static_cast<double>(live) <=
         kMaxLiveFraction * static_cast<double>(g.kernel_size()) * static_cast<double>(g.out_size());
}

void SparseTapConv::prepare(const KernelInit& init, const Tensor& w, int64_t group, const WindowAttrs& attrs) {
  taps_.clear();
  if (group != 1 || w.dtype() != DType::kFloat32 || (w.rank() != 3 && w.rank() != 4) || w.dim(1) < kMinChannels)
    return;
  if (init.inputs.empty() || !init.inputs[0].type) return;
  const ir::ValueType& t = *init.inputs[0].type;
  if (!t.has_shape || t.dims.size() != w.rank() || !t.dims[1].known() || t.dims[1].value != w.dim(1)) return;
  std::vector<int64_t> in;
  for (size_t d = 2; d < t.dims.size(); ++d) {
    if (!t.dims[d].known()) return;
    in.push_back(t.dims[d].value);
  }
  Result<WindowGeometry> g = resolve_window(attrs, in, w.shape().dims().subspan(2));
  if (!g.ok() || !sparse_enough(*g)) return;
  const float* wd = w.data<float>();
  if (!std::all_of(wd, wd + w.numel(), [](float v) { return std::isfinite(v); })) return;
  cout_ = w.dim(0);
  cin_ = w.dim(1);
  const int64_t taps = g->kernel_size();
  const std::vector<TapBox> boxes = tap_boxes(*g);
  std::vector<float> slice(static_cast<size_t>(cout_ * cin_));
  taps_.resize(static_cast<size_t>(taps));
  for (int64_t tap = 0; tap < taps; ++tap) {
    if (boxes[static_cast<size_t>(tap)].size() == 0) continue;
    for (int64_t o = 0; o < cout_; ++o)
      for (int64_t c = 0; c < cin_; ++c) slice[static_cast<size_t>(o * cin_ + c)] = wd[(o * cin_ + c) * taps + tap];
    taps_[static_cast<size_t>(tap)] =
        pack_a_for(init, "sparse-taps-v1/T" + std::to_string(tap), false, cout_, cin_, slice.data(), cin_);
  }
}

bool SparseTapConv::applies(const WindowGeometry& g, const Shape& w_shape) const {
  if (!ready() || w_shape.rank() < 3 || w_shape[0] != cout_ || w_shape[1] != cin_ ||
      g.kernel_size() != static_cast<int64_t>(taps_.size()) || !sparse_enough(g))
    return false;
  const std::vector<TapBox> boxes = tap_boxes(g);
  for (size_t t = 0; t < boxes.size(); ++t)
    if (boxes[t].size() > 0 && taps_[t].empty()) return false;
  return true;
}

void SparseTapConv::run(int64_t n, const WindowGeometry& g, const float* x, float* y, const ConvEpilogue& ep,
                        ThreadPool* pool) const {
  const WindowDims2 d(g);
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const std::vector<TapBox> boxes = tap_boxes(g);
  // A tap that reaches every output goes first: it writes Y (and the bias).
  int64_t full = -1;
  for (size_t t = 0; t < boxes.size() && full < 0; ++t)
    if (boxes[t].size() == out_size) full = static_cast<int64_t>(t);
  std::vector<int64_t> order;
  if (full >= 0) order.push_back(full);
  for (int64_t t = 0; t < static_cast<int64_t>(boxes.size()); ++t)
    if (t != full && boxes[static_cast<size_t>(t)].size() > 0) order.push_back(t);
  thread_local Scratch scratch;
  for (int64_t img = 0; img < n; ++img) {
    const float* xi = x + img * cin_ * in_size;
    float* yi = y + img * cout_ * out_size;
    if (full < 0)
      parallel_for(pool, cout_, std::max<int64_t>(1, 16384 / out_size), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) std::fill_n(yi + o * out_size, out_size, ep.bias ? ep.bias[o] : 0.f);
      });
    for (int64_t t : order) {
      const TapBox& box = boxes[static_cast<size_t>(t)];
      const int64_t bw = box.hi[1] - box.lo[1], cols = box.size();
      const BoxGeometry geo{xi, in_size, d.iw, box.lo[0] * d.sh - d.pt + (t / d.kw) * d.dh,
                            box.lo[1] * d.sw - d.pl + (t % d.kw) * d.dw, d.sh, d.sw, bw};
      const BoxSource source(geo);
      // The whole input plane in order (the centre tap of a "same" conv): read in place.
      const bool whole_input = geo.iy0 == 0 && geo.ix0 == 0 && d.sh == 1 && d.sw == 1 && bw == d.iw && cols == in_size;
      const GemmOperand b = whole_input ? GemmOperand::raw(xi, in_size) : GemmOperand::from_source(source);
      const GemmOperand a = GemmOperand::prepacked(taps_[static_cast<size_t>(t)]);
      GemmEpilogue gep;
      if (t == full) gep.row_bias = ep.bias;
      if (bw == d.ow) {  // whole output rows: C is a column range of Y
        sgemm_ex(cout_, cols, cin_, 1.f, a, b, t == full ? 0.f : 1.f, yi + box.lo[0] * d.ow, out_size, pool, gep);
      } else {
        float* c = scratch.get(cout_ * cols);
        sgemm_ex(cout_, cols, cin_, 1.f, a, b, 0.f, c, cols, pool, gep);
        add_box(box, c, cout_, out_size, d.ow, yi, pool);
      }
    }
  }
  ConvEpilogue rest = ep;
  finish(y, n * cout_, out_size, rest, pool);
}

}  // namespace kiln::kernels
