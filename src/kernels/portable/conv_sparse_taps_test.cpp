// The sparse-tap Conv path (conv_sparse_taps.h): tap boxes against brute
// force, when it fires, and results against a float64 direct convolution and
// the im2col path (the same conv with weights known only at run time) over
// channels, maps, dilations, strides, pads, rank 1 and 2, bias, FusedConv's
// Z and activations, batch and threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/portable/conv_sparse_taps.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using kernels::SparseTapConv;
using kernels::TapBox;
using kernels::WindowGeometry;
using testing::attr;
using testing::random_tensor;

struct Case {
  int64_t n, cin, cout;
  std::vector<int64_t> in, k, stride, dilation, pads;  // pads: begins then ends
  bool bias = true;
  std::string what() const {
    std::string s = "n" + std::to_string(n) + " c" + std::to_string(cin) + "->" + std::to_string(cout) + " in";
    for (int64_t v : in) s += " " + std::to_string(v);
    s += " k";
    for (int64_t v : k) s += " " + std::to_string(v);
    s += " s";
    for (int64_t v : stride) s += " " + std::to_string(v);
    s += " d";
    for (int64_t v : dilation) s += " " + std::to_string(v);
    s += " p";
    for (int64_t v : pads) s += " " + std::to_string(v);
    return s;
  }
  size_t rank() const { return in.size(); }
  int64_t out(size_t d) const {
    return (in[d] + pads[d] + pads[d + rank()] - (k[d] - 1) * dilation[d] - 1) / stride[d] + 1;
  }
  WindowGeometry geometry() const {
    WindowGeometry g;
    g.in = in;
    g.kernel = k;
    g.stride = stride;
    g.dilation = dilation;
    for (size_t d = 0; d < rank(); ++d) {
      g.out.push_back(out(d));
      g.pad_begin.push_back(pads[d]);
      g.pad_end.push_back(pads[d + rank()]);
    }
    return g;
  }
};

// Direct convolution in double (rank 1 as height 1).
std::vector<double> reference(const Case& c, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* z) {
  const bool two = c.rank() == 2;
  const int64_t ih = two ? c.in[0] : 1, iw = c.in.back(), oh = two ? c.out(0) : 1, ow = c.out(c.rank() - 1);
  const int64_t kh = two ? c.k[0] : 1, kw = c.k.back(), sh = two ? c.stride[0] : 1, sw = c.stride.back();
  const int64_t dh = two ? c.dilation[0] : 1, dw = c.dilation.back(), ph = two ? c.pads[0] : 0,
                pw = c.pads[c.rank() - 1];
  std::vector<double> y(static_cast<size_t>(c.n * c.cout * oh * ow));
  size_t i = 0;
  for (int64_t img = 0; img < c.n; ++img)
    for (int64_t o = 0; o < c.cout; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox, ++i) {
          double s = b ? b->data<float>()[o] : 0.0;
          for (int64_t ci = 0; ci < c.cin; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t iy = oy * sh - ph + a * dh, ix = ox * sw - pw + e * dw;
                if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
                s += static_cast<double>(x.data<float>()[((img * c.cin + ci) * ih + iy) * iw + ix]) *
                     w.data<float>()[((o * c.cin + ci) * kh + a) * kw + e];
              }
          if (z) s += z->data<float>()[i];
          y[i] = s;
        }
  return y;
}

Tensor run_conv(const Case& c, const std::vector<Value>& inputs, bool constant, int threads,
                const std::string& activation = "") {
  testing::OpCall call;
  call.op_type = activation.empty() && inputs.size() < 4 ? "Conv" : "FusedConv";
  if (call.op_type == "FusedConv") {
    call.domain = "com.microsoft";
    call.opset = 1;
    if (!activation.empty()) call.attrs.push_back(attr("activation", activation));
  }
  call.inputs = inputs;
  call.attrs.push_back(attr("pads", c.pads));
  call.attrs.push_back(attr("strides", c.stride));
  call.attrs.push_back(attr("dilations", c.dilation));
  call.inputs_are_constant = constant;
  call.threads = threads;
  auto out = testing::run_op(call);
  EXPECT_TRUE(out.ok()) << c.what() << ": " << out.status().to_string();
  if (!out.ok()) return Tensor();
  return (*out)[0].tensor();
}

// Whether SparseTapConv takes the case (constant W of the case's shape, the
// input's shape known at load).
bool fires(const Case& c, const Tensor& w, int64_t group = 1, bool static_shape = true) {
  ir::Graph g;
  ir::Node node;
  node.op_type = "Conv";
  node.attributes = {attr("pads", c.pads), attr("strides", c.stride), attr("dilations", c.dilation)};
  std::vector<ir::Dim> dims{ir::Dim{c.n, ""}, ir::Dim{c.cin * group, ""}};
  for (int64_t v : c.in) dims.push_back(static_shape ? ir::Dim{v, ""} : ir::Dim{-1, "s"});
  ir::ValueType xt = ir::ValueType::tensor(DType::kFloat32, dims);
  std::vector<kernels::InputInfo> infos(2);
  infos[0].type = &xt;
  infos[1].constant = &w;
  kernels::KernelInit init{node, g, infos, 11};
  auto attrs = kernels::WindowAttrs::parse(init);
  EXPECT_TRUE(attrs.ok());
  SparseTapConv conv;
  conv.prepare(init, w, group, *attrs);
  return conv.ready();
}

Case case2d(int64_t n, int64_t cin, int64_t cout, int64_t h, int64_t w, int64_t k, int64_t s, int64_t d,
            std::vector<int64_t> pads, bool bias = true) {
  return Case{n, cin, cout, {h, w}, {k, k}, {s, s}, {d, d}, std::move(pads), bias};
}

TEST(SparseTapConvTest, TapBoxesMatchBruteForce) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> u(0, 1000);
  for (int t = 0; t < 300; ++t) {
    Case c{1, 1, 1, {1 + u(rng) % 20, 1 + u(rng) % 20}, {1 + u(rng) % 4, 1 + u(rng) % 4},
           {1 + u(rng) % 3, 1 + u(rng) % 3}, {1 + u(rng) % 13, 1 + u(rng) % 13},
           {u(rng) % 30, u(rng) % 30, u(rng) % 30, u(rng) % 30}};
    if (c.out(0) < 1 || c.out(1) < 1) continue;
    const WindowGeometry g = c.geometry();
    const std::vector<TapBox> boxes = kernels::tap_boxes(g);
    ASSERT_EQ(boxes.size(), static_cast<size_t>(c.k[0] * c.k[1]));
    for (int64_t a = 0; a < c.k[0]; ++a)
      for (int64_t b = 0; b < c.k[1]; ++b) {
        const TapBox& box = boxes[static_cast<size_t>(a * c.k[1] + b)];
        int64_t count = 0;
        for (int64_t oy = 0; oy < c.out(0); ++oy)
          for (int64_t ox = 0; ox < c.out(1); ++ox) {
            const int64_t iy = oy * c.stride[0] - c.pads[0] + a * c.dilation[0];
            const int64_t ix = ox * c.stride[1] - c.pads[1] + b * c.dilation[1];
            const bool reads = iy >= 0 && iy < c.in[0] && ix >= 0 && ix < c.in[1];
            const bool in_box = oy >= box.lo[0] && oy < box.hi[0] && ox >= box.lo[1] && ox < box.hi[1];
            ASSERT_EQ(reads, in_box) << c.what() << " tap " << a << "," << b << " output " << oy << "," << ox;
            count += reads;
          }
        EXPECT_EQ(box.size(), count) << c.what();
      }
  }
}

TEST(SparseTapConvTest, AsppGeometries) {
  // DeepLabV3's ASPP at a 256x256 input: 16x16 maps, pads = dilations.
  const Case d36 = case2d(1, 1, 1, 16, 16, 3, 1, 36, {36, 36, 36, 36});
  const std::vector<TapBox> b36 = kernels::tap_boxes(d36.geometry());
  for (size_t t = 0; t < 9; ++t) EXPECT_EQ(b36[t].size(), t == 4 ? 256 : 0) << t;
  const Case d12 = case2d(1, 1, 1, 16, 16, 3, 1, 12, {12, 12, 12, 12});
  const std::vector<TapBox> b12 = kernels::tap_boxes(d12.geometry());
  EXPECT_EQ(b12[0].lo[0], 12);
  EXPECT_EQ(b12[0].hi[0], 16);
  EXPECT_EQ(b12[0].size(), 16);  // a 4x4 corner
  EXPECT_EQ(b12[1].size(), 64);  // a 4x16 band
  EXPECT_EQ(b12[4].size(), 256);
  EXPECT_TRUE(SparseTapConv::sparse_enough(d12.geometry()));  // 576 of 2304
  EXPECT_TRUE(SparseTapConv::sparse_enough(d36.geometry()));
  // An ordinary 3x3 pad-1 conv reads padding at the borders only.
  EXPECT_FALSE(SparseTapConv::sparse_enough(case2d(1, 1, 1, 16, 16, 3, 1, 1, {1, 1, 1, 1}).geometry()));
  EXPECT_FALSE(SparseTapConv::sparse_enough(case2d(1, 1, 1, 3, 3, 3, 1, 1, {1, 1, 1, 1}).geometry()));
}

TEST(SparseTapConvTest, FiresOnlyWhereItShould) {
  std::mt19937 rng(6);
  const Case aspp = case2d(1, 16, 8, 16, 16, 3, 1, 12, {12, 12, 12, 12});
  EXPECT_TRUE(fires(aspp, random_tensor({8, 16, 3, 3}, rng)));
  // dense 3x3
  EXPECT_FALSE(fires(case2d(1, 16, 8, 16, 16, 3, 1, 1, {1, 1, 1, 1}), random_tensor({8, 16, 3, 3}, rng)));
  // too few input channels for a GEMM per tap
  EXPECT_FALSE(fires(case2d(1, 8, 8, 16, 16, 3, 1, 12, {12, 12, 12, 12}), random_tensor({8, 8, 3, 3}, rng)));
  // grouped
  EXPECT_FALSE(fires(aspp, random_tensor({8, 16, 3, 3}, rng), 2));
  // the input's spatial shape unknown at load
  EXPECT_FALSE(fires(aspp, random_tensor({8, 16, 3, 3}, rng), 1, false));
  // a weight that is not finite: skipping 0 * Inf would change the result
  Tensor inf_w = random_tensor({8, 16, 3, 3}, rng);
  inf_w.data<float>()[3] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(fires(aspp, inf_w));
}

TEST(SparseTapConvTest, MatchesDirectAndIm2col) {
  std::mt19937 rng(7);
  const Case cases[] = {
      case2d(1, 16, 8, 16, 16, 3, 1, 12, {12, 12, 12, 12}),      // ASPP, side taps in bands
      case2d(1, 24, 33, 16, 16, 3, 1, 36, {36, 36, 36, 36}),     // centre tap only, read in place
      case2d(2, 17, 5, 16, 16, 3, 1, 24, {24, 24, 24, 24}, false),
      case2d(1, 16, 7, 7, 9, 3, 1, 6, {6, 6, 6, 6}),             // odd map
      case2d(1, 20, 6, 13, 11, 3, 2, 8, {8, 8, 8, 8}),           // strided
      case2d(1, 16, 4, 1, 1, 3, 1, 1, {1, 1, 1, 1}),             // 1x1 map: centre tap only
      case2d(3, 16, 12, 2, 2, 3, 1, 1, {1, 1, 1, 1}),            // 2x2 map, batch 3
      Case{1, 18, 9, {12, 10}, {3, 3}, {1, 2}, {7, 9}, {9, 3, 5, 11}},  // asymmetric pads, mixed strides
      Case{1, 16, 10, {20, 6}, {3, 5}, {1, 1}, {10, 4}, {10, 8, 10, 8}},  // 3x5 kernel
      Case{2, 16, 6, {30}, {3}, {1}, {24}, {24, 24}},               // 1-D
      Case{1, 32, 40, {21}, {5}, {2}, {9}, {20, 17}},               // 1-D strided, 5 taps
  };
  for (const Case& c : cases) {
    Shape xs{c.n, c.cin}, ws{c.cout, c.cin};
    for (int64_t v : c.in) xs.push_back(v);
    for (int64_t v : c.k) ws.push_back(v);
    Tensor x = random_tensor(xs, rng), w = random_tensor(ws, rng), b = random_tensor({c.cout}, rng);
    ASSERT_TRUE(fires(c, w)) << c.what();
    std::vector<Value> inputs{Value(x), Value(w)};
    if (c.bias) inputs.push_back(Value(b));
    const std::vector<double> want = reference(c, x, w, c.bias ? &b : nullptr, nullptr);
    const Tensor im2col = run_conv(c, inputs, false, 1);
    ASSERT_EQ(static_cast<size_t>(im2col.numel()), want.size()) << c.what();
    for (int threads = 1; threads <= 3; ++threads) {
      const Tensor y = run_conv(c, inputs, true, threads);
      ASSERT_EQ(y.shape(), im2col.shape()) << c.what();
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(y.data<float>()[i], want[i], 1e-5 * c.cin) << c.what() << " threads " << threads << " at " << i;
        ASSERT_NEAR(y.data<float>()[i], im2col.data<float>()[i], 1e-5 * c.cin) << c.what() << " at " << i;
      }
    }
  }
}

TEST(SparseTapConvTest, FusedSumInputAndActivations) {
  std::mt19937 rng(8);
  const Case c = case2d(2, 16, 9, 10, 12, 3, 1, 7, {7, 7, 7, 7});
  Tensor x = random_tensor({2, 16, 10, 12}, rng), w = random_tensor({9, 16, 3, 3}, rng), b = random_tensor({9}, rng);
  Tensor z = random_tensor({2, 9, 10, 12}, rng);
  ASSERT_TRUE(fires(c, w));
  for (const std::string act : {"Relu", "HardSwish", "Sigmoid", ""}) {
    for (bool with_z : {false, true}) {
      if (act.empty() && !with_z) continue;
      std::vector<Value> inputs{Value(x), Value(w), Value(b)};
      if (with_z) inputs.push_back(Value(z));
      std::vector<double> want = reference(c, x, w, &b, with_z ? &z : nullptr);
      for (double& v : want) {
        if (act == "Relu") v = std::max(v, 0.0);
        if (act == "HardSwish") v = v * std::min(1.0, std::max(0.0, v / 6 + 0.5));
        if (act == "Sigmoid") v = 1.0 / (1.0 + std::exp(-v));
      }
      for (int threads : {1, 2}) {
        const Tensor y = run_conv(c, inputs, true, threads, act);
        ASSERT_EQ(static_cast<size_t>(y.numel()), want.size());
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(y.data<float>()[i], want[i], 2e-4) << act << (with_z ? " z" : "") << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
