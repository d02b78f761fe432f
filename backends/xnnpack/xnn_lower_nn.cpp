// Lowering of the layers with weights and windows: Conv, Gemm, MatMul,
// pooling, BatchNormalization, Resize, Pad.
#include <cmath>
#include <limits>

#include "xnn_lowerer.h"

namespace kiln_xnnpack {

namespace {

struct Window {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
};

std::vector<int64_t> ints_attr(const Node& n, const char* name, std::vector<int64_t> dflt) {
  kiln::sdk::Attribute a = n.find_attribute(name);
  return a ? a.as_ints() : dflt;
}

// Reads kernel/strides/dilations/pads/auto_pad of a 2-D window op on input
// [N, C, H, W]; `kernel` is the kernel when it is not an attribute.
Window window(const Node& n, const std::vector<int64_t>& x, std::vector<int64_t> kernel, bool dilations) {
  if (x.size() != 4) decline(n.op_type() + " on a rank-" + std::to_string(x.size()) + " tensor (XNNPACK: 2-D, NCHW input)");
  if (kernel.empty()) kernel = ints_attr(n, "kernel_shape", {});
  if (kernel.size() != 2) decline(n.op_type() + " without a 2-D kernel_shape");
  const std::vector<int64_t> s = ints_attr(n, "strides", {1, 1});
  const std::vector<int64_t> d = dilations ? ints_attr(n, "dilations", {1, 1}) : std::vector<int64_t>{1, 1};
  std::vector<int64_t> p = ints_attr(n, "pads", {0, 0, 0, 0});
  if (s.size() != 2 || d.size() != 2 || p.size() != 4) decline(n.op_type() + " with strides, dilations or pads of the wrong length");
  Window w{kernel[0], kernel[1], s[0], s[1], d[0], d[1], p[0], p[1], p[2], p[3]};
  for (int64_t v : {w.kh, w.kw, w.sh, w.sw, w.dh, w.dw})
    if (v < 1) decline(n.op_type() + " with a kernel, stride or dilation < 1");
  for (int64_t v : p)
    if (v < 0) decline(n.op_type() + " with negative pads");
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  if (ap == "VALID") {
    w.pt = w.pl = w.pb = w.pr = 0;
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    auto same = [&](int64_t in, int64_t k, int64_t st, int64_t dl, int64_t* b, int64_t* e) {
      const int64_t o = (in + st - 1) / st;
      const int64_t total = std::max<int64_t>(0, (o - 1) * st + (k - 1) * dl + 1 - in);
      *b = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      *e = total - *b;
    };
    same(x[2], w.kh, w.sh, w.dh, &w.pt, &w.pb);
    same(x[3], w.kw, w.sw, w.dw, &w.pl, &w.pr);
  } else if (ap != "NOTSET") {
    decline(n.op_type() + " with auto_pad " + ap);
  }
  return w;
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t b, int64_t e, bool ceil) {
  const int64_t span = in + b + e - ((k - 1) * d + 1);
  if (span < 0) return 0;
  return (ceil ? (span + s - 1) / s : span / s) + 1;
}

std::vector<int64_t> window_ints(const Window& w, bool dilations) {
  std::vector<int64_t> v = {w.pt, w.pr, w.pb, w.pl, w.kh, w.kw, w.sh, w.sw};
  if (dilations) v.insert(v.end(), {w.dh, w.dw});
  return v;
}

void check_out(const Node& n, const std::vector<int64_t>& y, int64_t oh, int64_t ow) {
  if (y.size() != 4 || y[2] != oh || y[3] != ow) {
    decline(n.op_type() + " output shape " + kiln::sdk::dims_string(y.data(), y.size()) + " disagrees with its window (" +
            std::to_string(oh) + "x" + std::to_string(ow) + ")");
  }
}

// Of the (output, tap) pairs along one axis, the share whose tap reads the
// input rather than padding.
double axis_density(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pad) {
  int64_t live = 0;
  for (int64_t t = 0; t < k; ++t)
    for (int64_t o = 0; o < out; ++o) {
      const int64_t i = o * s - pad + t * d;
      live += i >= 0 && i < in;
    }
  return out * k > 0 ? static_cast<double>(live) / static_cast<double>(out * k) : 1.0;
}

double density_of(const Window& w, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  return axis_density(x[2], y[2], w.kh, w.sh, w.dh, w.pt) * axis_density(x[3], y[3], w.kw, w.sw, w.dw, w.pl);
}

}  // namespace

double conv_tap_density(const Node& n) {
  try {
    if (n.op_type() != "Conv" || n.num_inputs() < 2 || !n.input(0) || !n.input(1)) return 1.0;
    const std::vector<int64_t> x = n.input(0).dims(), y = n.output(0).dims(), wd = n.input(1).dims();
    if (x.size() != 4 || y.size() != 4 || wd.size() != 4 || !n.input(0).is_static() || !n.output(0).is_static())
      return 1.0;
    return density_of(window(n, x, {wd[2], wd[3]}, true), x, y);
  } catch (const kiln::sdk::Error&) {
    return 1.0;  // a window the plugin declines anyway
  }
}

void Lowerer::lower_conv(const Node& n) {
  const std::vector<int64_t> x = dims(n.input(0)), y = dims(n.output(0));
  std::vector<int64_t> wd;
  const std::vector<float> w = constant(n, 1, &wd);
  if (wd.size() != 4) decline("Conv weight of rank " + std::to_string(wd.size()) + " (XNNPACK: 2-D convolutions)");
  const Window win = window(n, x, {wd[2], wd[3]}, true);
  const int64_t group = n.attr_int("group", 1);
  const int64_t m = wd[0], cg = wd[1], c = x[1];
  if (group < 1 || c % group || m % group || cg * group != c) decline("Conv group does not match the channels");
  check_out(n, y, out_size(x[2], win.kh, win.sh, win.dh, win.pt, win.pb, false),
            out_size(x[3], win.kw, win.sw, win.dw, win.pl, win.pr, false));
  uint32_t bias = kNoValue;
  if (n.num_inputs() > 2 && n.input(2)) {
    std::vector<int64_t> bd;
    std::vector<float> b = constant(n, 2, &bd);
    if (static_cast<int64_t>(b.size()) != m) decline("Conv bias does not have one value per output channel");
    bias = prog_.add_constant({m}, std::move(b));
  }
  const uint32_t xin = in(n, 0);
  const size_t khw = static_cast<size_t>(win.kh * win.kw);
  std::vector<float> f(w.size());
  std::vector<int64_t> ints = window_ints(win, true);
  OpKind kind = OpKind::kConv;
  if (group > 1 && group == c) {  // depthwise: filter [1, kh, kw, M], output channel m reads input m / (M / C)
    kind = OpKind::kDepthwise;
    // This XNNPACK has depthwise microkernels of 3, 4, 9 and 25 taps (and a
    // per-channel multiply-add for 1x1); any other window becomes a grouped
    // convolution, one tiny GEMM per channel (convnext_tiny's 7x7 at
    // 96x56x56: 8.3 ms against portable kernels' 0.68).
    if (khw != 1 && khw != 3 && khw != 4 && khw != 9 && khw != 25) {
      decline("depthwise Conv " + std::to_string(win.kh) + "x" + std::to_string(win.kw) +
              ": this XNNPACK has depthwise kernels of 1, 3, 4, 9 and 25 taps only (others run as one small GEMM "
              "per channel, ~10x slower than portable kernels)");
    }
    for (size_t o = 0; o < static_cast<size_t>(m); ++o)
      for (size_t k = 0; k < khw; ++k) f[k * static_cast<size_t>(m) + o] = w[o * khw + k];
    ints.insert(ints.end(), {m / c, c});
    wd = {1, win.kh, win.kw, m};
  } else {  // filter [M, kh, kw, C / group]
    const size_t cgs = static_cast<size_t>(cg);
    for (size_t o = 0; o < static_cast<size_t>(m); ++o)
      for (size_t ci = 0; ci < cgs; ++ci)
        for (size_t k = 0; k < khw; ++k) f[(o * khw + k) * cgs + ci] = w[(o * cgs + ci) * khw + k];
    ints.insert(ints.end(), {group, cg, m / group});
    wd = {m, win.kh, win.kw, cg};
  }
  const uint32_t filter = prog_.add_constant(wd, std::move(f));
  emit(kind, {xin, filter, bias}, out(n)).ints = std::move(ints);
}

void Lowerer::lower_gemm(const Node& n) {
  if (n.attr_int("transA", 0) != 0) decline("Gemm with transA = 1");
  const std::vector<int64_t> a = dims(n.input(0));
  std::vector<int64_t> bd;
  std::vector<float> b = constant(n, 1, &bd);
  if (a.size() != 2 || bd.size() != 2) decline("Gemm operands are not 2-D");
  const bool tb = n.attr_int("transB", 0) != 0;
  const int64_t k = tb ? bd[1] : bd[0], nn = tb ? bd[0] : bd[1];
  if (k != a[1]) decline("Gemm inner dimensions disagree");
  const float alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  std::vector<float> f(b.size());
  for (int64_t o = 0; o < nn; ++o)
    for (int64_t i = 0; i < k; ++i) {
      const size_t src = static_cast<size_t>(tb ? o * k + i : i * nn + o);
      f[static_cast<size_t>(o * k + i)] = alpha * b[src];
    }
  uint32_t bias = kNoValue;
  if (n.num_inputs() > 2 && n.input(2)) {
    std::vector<int64_t> cd;
    std::vector<float> c = constant(n, 2, &cd);
    const bool row = numel(cd) == nn && (cd.size() == 1 || (cd.size() == 2 && cd[0] == 1));
    if (!row && c.size() != 1) decline("Gemm bias C of shape " + kiln::sdk::dims_string(cd.data(), cd.size()) + " is not a row vector");
    std::vector<float> bv(static_cast<size_t>(nn));
    for (size_t o = 0; o < bv.size(); ++o) bv[o] = beta * c[row ? o : 0];
    bias = prog_.add_constant({nn}, std::move(bv));
  }
  const uint32_t x = in(n, 0);
  const uint32_t filter = prog_.add_constant({nn, k}, std::move(f));
  emit(OpKind::kFullyConnected, {x, filter, bias}, out(n));
}

void Lowerer::lower_matmul(const Node& n) {
  const std::vector<int64_t> a = dims(n.input(0));
  if (!n.input(1).is_constant()) decline("MatMul with a run-time second operand (this XNNPACK has no batched matmul)");
  std::vector<int64_t> bd;
  std::vector<float> b = constant(n, 1, &bd);
  if (bd.size() != 2) decline("MatMul with a constant of rank " + std::to_string(bd.size()) + " (XNNPACK: 2-D weights)");
  if (a.size() < 2 || a.size() == 4) decline("MatMul on a rank-" + std::to_string(a.size()) + " tensor");
  const int64_t k = bd[0], nn = bd[1];
  if (a.back() != k) decline("MatMul inner dimensions disagree");
  std::vector<float> f(b.size());
  for (int64_t o = 0; o < nn; ++o)
    for (int64_t i = 0; i < k; ++i) f[static_cast<size_t>(o * k + i)] = b[static_cast<size_t>(i * nn + o)];
  const uint32_t x = in(n, 0);
  const uint32_t filter = prog_.add_constant({nn, k}, std::move(f));
  emit(OpKind::kFullyConnected, {x, filter, kNoValue}, out(n));
}

void Lowerer::lower_pool(const Node& n) {
  const std::string op = n.op_type();
  const std::vector<int64_t> x = dims(n.input(0)), y = dims(n.output(0));
  if (op == "GlobalAveragePool") {
    if (x.size() != 4) decline("GlobalAveragePool on a rank-" + std::to_string(x.size()) + " tensor");
    const uint32_t xin = in(n, 0);
    emit(OpKind::kGlobalAveragePool, {xin}, out(n));
    return;
  }
  const bool is_max = op == "MaxPool";
  Window w = window(n, x, {}, is_max);
  if (w.kh * w.kw < 2) decline(op + " with a 1x1 window");
  if (is_max && n.attr_int("storage_order", 0) != 0) decline("MaxPool with storage_order = 1");
  const bool ceil = n.attr_int("ceil_mode", 0) != 0;
  const int64_t oh = out_size(x[2], w.kh, w.sh, w.dh, w.pt, w.pb, ceil), ow = out_size(x[3], w.kw, w.sw, w.dw, w.pl, w.pr, ceil);
  check_out(n, y, oh, ow);
  // ceil_mode: the last window may hang over the end; for MaxPool extra end
  // padding (ignored by XNNPACK's max) gives the same result.
  const int64_t extra_h = (oh - 1) * w.sh + (w.kh - 1) * w.dh + 1 - (x[2] + w.pt + w.pb);
  const int64_t extra_w = (ow - 1) * w.sw + (w.kw - 1) * w.dw + 1 - (x[3] + w.pl + w.pr);
  if (extra_h > 0 || extra_w > 0) {
    if (!is_max) decline("AveragePool with ceil_mode that adds a partial window");
    w.pb += std::max<int64_t>(0, extra_h);
    w.pr += std::max<int64_t>(0, extra_w);
  }
  if (!is_max && n.attr_int("count_include_pad", 0) != 0 && (w.pt || w.pl || w.pb || w.pr))
    decline("AveragePool with count_include_pad = 1 and padding (XNNPACK excludes padding)");
  const uint32_t xin = in(n, 0);
  emit(is_max ? OpKind::kMaxPool : OpKind::kAveragePool, {xin}, out(n)).ints = window_ints(w, is_max);
}

void Lowerer::lower_batchnorm(const Node& n) {
  if (n.attr_int("training_mode", 0) != 0) decline("BatchNormalization in training mode");
  if (n.opset() < 7) decline("BatchNormalization before opset 7 (spatial/is_test attributes)");
  const std::vector<int64_t> x = dims(n.input(0));
  if (x.size() != 4 && x.size() != 2) decline("BatchNormalization on a rank-" + std::to_string(x.size()) + " tensor");
  const int64_t c = x[1];
  std::vector<std::vector<float>> p(4);
  for (size_t i = 0; i < 4; ++i) {
    p[i] = constant(n, i + 1, nullptr);
    if (static_cast<int64_t>(p[i].size()) != c) decline("BatchNormalization parameter " + std::to_string(i + 1) + " is not per channel");
  }
  const float eps = n.attr_float("epsilon", 1e-5f);
  std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
  for (size_t k = 0; k < scale.size(); ++k) {
    scale[k] = p[0][k] / std::sqrt(p[3][k] + eps);
    shift[k] = p[1][k] - p[2][k] * scale[k];
  }
  Op* conv = fusible_producer(n.input(0));
  if (conv && (conv->kind == OpKind::kConv || conv->kind == OpKind::kDepthwise) && std::isinf(conv->floats[0]) &&
      std::isinf(conv->floats[1])) {
    std::vector<float>& f = prog_.constants[static_cast<size_t>(prog_.values[conv->in[1]].constant)];
    const size_t m = scale.size();
    for (size_t i = 0; i < f.size(); ++i) f[i] *= scale[conv->kind == OpKind::kDepthwise ? i % m : i / (f.size() / m)];
    if (conv->in.size() < 3 || conv->in[2] == kNoValue) {
      conv->in.resize(3);
      conv->in[2] = prog_.add_constant({c}, shift);
    } else {
      std::vector<float>& b = prog_.constants[static_cast<size_t>(prog_.values[conv->in[2]].constant)];
      for (size_t k = 0; k < m; ++k) b[k] = b[k] * scale[k] + shift[k];
    }
    return alias(n, conv->out);
  }
  std::vector<int64_t> cd(x.size(), 1);
  cd.back() = c;  // [1, 1, 1, C] in NHWC, [1, C] for [N, C]
  const uint32_t xin = in(n, 0);
  const uint32_t s = prog_.add_constant(cd, std::move(scale));
  const uint32_t t = prog_.add_constant(cd, std::move(shift));
  const uint32_t tmp = prog_.add_value(internal_dims(x));
  emit(OpKind::kMul, {xin, s}, tmp);
  emit(OpKind::kAdd, {tmp, t}, out(n));
}

void Lowerer::lower_resize(const Node& n) {
  const std::vector<int64_t> x = dims(n.input(0)), y = dims(n.output(0));
  if (x.size() != 4 || y[0] != x[0] || y[1] != x[1]) decline("Resize of other than the two spatial axes of a 4-D tensor");
  if (n.attr_string("mode", "nearest") != "linear") decline("Resize mode " + n.attr_string("mode", "nearest") + " (XNNPACK: bilinear only)");
  const std::string ct = n.opset() < 11 ? "asymmetric" : n.attr_string("coordinate_transformation_mode", "half_pixel");
  int64_t flags = 0;
  if (ct == "align_corners") flags = kResizeAlignCorners;
  else if (ct == "asymmetric") flags = kResizeAsymmetric;
  else if (ct == "pytorch_half_pixel" && (y[2] == 1 || y[3] == 1)) decline("Resize pytorch_half_pixel to a size of 1");
  else if (ct != "half_pixel" && ct != "pytorch_half_pixel") decline("Resize coordinate_transformation_mode " + ct);
  if (n.attr_int("exclude_outside", 0) != 0) decline("Resize with exclude_outside");
  if (ct == "align_corners" && (y[2] == 1 || y[3] == 1)) decline("Resize align_corners to a size of 1");
  // XNNPACK scales by the size ratio; ONNX by the given scales when there are any.
  const size_t si = n.opset() < 11 ? 1 : 2;
  if (n.num_inputs() > si && n.input(si) && numel(dims(n.input(si))) > 0) {
    const std::vector<float> sc = constant(n, si, nullptr);
    if (sc.size() != 4 || std::fabs(sc[2] * static_cast<float>(x[2]) - static_cast<float>(y[2])) > 1e-4f ||
        std::fabs(sc[3] * static_cast<float>(x[3]) - static_cast<float>(y[3])) > 1e-4f)
      decline("Resize with scales that are not output size / input size (XNNPACK uses the size ratio)");
  }
  const uint32_t xin = in(n, 0);
  emit(OpKind::kResize, {xin}, out(n)).ints = {y[2], y[3], flags};
}

void Lowerer::lower_pad(const Node& n) {
  if (n.attr_string("mode", "constant") != "constant") decline("Pad mode " + n.attr_string("mode", "constant") + " (XNNPACK: constant only)");
  const std::vector<int64_t> x = dims(n.input(0));
  std::vector<int64_t> pads;
  float value = 0.0f;
  if (n.opset() < 11) {
    pads = ints_attr(n, "pads", {});
    value = n.attr_float("value", 0.0f);
  } else {
    pads = int_constant(n, 1);
    if (n.num_inputs() > 2 && n.input(2)) value = constant(n, 2, nullptr).at(0);
    if (n.num_inputs() > 3 && n.input(3)) decline("Pad with axes");
  }
  const size_t r = x.size();
  if (pads.size() != 2 * r) decline("Pad pads do not have 2 x rank values");
  for (int64_t p : pads)
    if (p < 0) decline("Pad with negative pads (cropping)");
  std::vector<int64_t> pre(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  std::vector<int64_t> post(pads.begin() + static_cast<std::ptrdiff_t>(r), pads.end());
  pre = internal_dims(pre);
  post = internal_dims(post);
  const uint32_t xin = in(n, 0);
  Op& op = emit(OpKind::kPad, {xin}, out(n));
  op.ints = pre;
  op.ints.insert(op.ints.end(), post.begin(), post.end());
  op.floats = {value};
}

}  // namespace kiln_xnnpack
