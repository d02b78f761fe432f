// The direct few-output-channel Conv path (conv_direct_small.h): when it is
// taken, and its results against a float64 direct convolution and the
// im2col path over kernel sizes 1..7, strides 1/2, dilations, asymmetric
// pads, Cin 1..64, Cout 1..64 (edge channel blocks), row widths around the
// pixel blocks, rank 1 and 2, batch 2, FusedConv activations and sum input
// Z, threads 1/2/3, and the AVX-512, AVX2 and baseline variants.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/portable/conv_direct_small.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using kernels::DirectSmallIsa;
using kernels::DirectSmallMode;
using kernels::WindowGeometry;
using testing::attr;
using testing::random_tensor;

class DirectSmallTest : public ::testing::Test {
 protected:
  void TearDown() override {
    kernels::set_direct_small_mode(DirectSmallMode::kAuto);
    kernels::set_direct_small_isa(DirectSmallIsa::kBest);
  }
};

struct Case {
  int64_t n, cin, cout;
  std::vector<int64_t> in, k, strides, pads;  // pads: begins then ends
  std::vector<int64_t> dilation = {};         // empty: 1
  size_t rank() const { return in.size(); }
  int64_t dil(size_t d) const { return dilation.empty() ? 1 : dilation[d]; }
  int64_t out(size_t d) const {
    return (in[d] + pads[d] + pads[d + rank()] - (k[d] - 1) * dil(d) - 1) / strides[d] + 1;
  }
  std::string what() const {
    std::string s = "n" + std::to_string(n) + " " + std::to_string(cin) + "->" + std::to_string(cout) + " in";
    for (int64_t v : in) s += " " + std::to_string(v);
    s += " k";
    for (int64_t v : k) s += " " + std::to_string(v);
    s += " s";
    for (int64_t v : strides) s += " " + std::to_string(v);
    s += " p";
    for (int64_t v : pads) s += " " + std::to_string(v);
    return s;
  }
  WindowGeometry geometry() const {
    WindowGeometry g;
    g.in = in;
    g.kernel = k;
    g.stride = strides;
    for (size_t d = 0; d < rank(); ++d) {
      g.out.push_back(out(d));
      g.dilation.push_back(dil(d));
      g.pad_begin.push_back(pads[d]);
      g.pad_end.push_back(pads[d + rank()]);
    }
    return g;
  }
};

// Direct convolution in double (rank 1 as height 1).
std::vector<double> reference(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  const bool two = c.rank() == 2;
  const int64_t ih = two ? c.in[0] : 1, iw = c.in.back(), oh = two ? c.out(0) : 1, ow = c.out(c.rank() - 1);
  const int64_t kh = two ? c.k[0] : 1, kw = c.k.back(), dh = two ? c.dil(0) : 1, dw = c.dil(c.rank() - 1);
  const int64_t ph = two ? c.pads[0] : 0, pw = c.pads[c.rank() - 1];
  const int64_t sh = two ? c.strides[0] : 1, sw = c.strides.back();
  std::vector<double> y(static_cast<size_t>(c.n * c.cout * oh * ow));
  size_t i = 0;
  for (int64_t img = 0; img < c.n; ++img)
    for (int64_t o = 0; o < c.cout; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox, ++i) {
          double s = b.data<float>()[o];
          for (int64_t ci = 0; ci < c.cin; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t iy = oy * sh - ph + a * dh, ix = ox * sw - pw + e * dw;
                if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
                s += static_cast<double>(x.data<float>()[((img * c.cin + ci) * ih + iy) * iw + ix]) *
                     w.data<float>()[((o * c.cin + ci) * kh + a) * kw + e];
              }
          y[i] = s;
        }
  return y;
}

double activate(const std::string& act, double v) {
  if (act == "Relu") return std::max(v, 0.0);
  if (act == "Clip") return std::min(std::max(v, -0.5), 0.75);
  if (act == "Silu") return v / (1.0 + std::exp(-v));
  if (act == "HardSwish") return v * std::min(1.0, std::max(0.0, v / 6.0 + 0.5));
  return v;
}

Tensor run_conv(const Case& c, const std::vector<Value>& inputs, bool constant, int threads, const std::string& act) {
  testing::OpCall call;
  call.op_type = !act.empty() || inputs.size() > 3 ? "FusedConv" : "Conv";
  if (call.op_type == "FusedConv") {
    call.domain = "com.microsoft";
    call.opset = 1;
    if (!act.empty()) call.attrs.push_back(attr("activation", act));
    if (act == "Clip") call.attrs.push_back(attr("activation_params", std::vector<float>{-0.5f, 0.75f}));
  }
  call.inputs = inputs;
  call.attrs.push_back(attr("pads", c.pads));
  call.attrs.push_back(attr("strides", c.strides));
  if (!c.dilation.empty()) call.attrs.push_back(attr("dilations", c.dilation));
  call.inputs_are_constant = constant;
  call.threads = threads;
  auto out = testing::run_op(call);
  EXPECT_TRUE(out.ok()) << c.what() << ": " << out.status().to_string();
  if (!out.ok()) return Tensor();
  return (*out)[0].tensor();
}

TEST_F(DirectSmallTest, WhenItIsTaken) {
  // YOLOv5's 6x6 stride-2 stem and ResNet's 7x7 one: few taps per output
  EXPECT_TRUE(kernels::direct_small_gains(Case{1, 3, 16, {320, 320}, {6, 6}, {2, 2}, {2, 2, 2, 2}}.geometry(), 3, 16));
  EXPECT_TRUE(kernels::direct_small_gains(Case{1, 3, 64, {224, 224}, {7, 7}, {2, 2}, {3, 3, 3, 3}}.geometry(), 3, 64));
  EXPECT_TRUE(kernels::direct_small_gains(Case{1, 16, 16, {80, 80}, {3, 3}, {1, 1}, {1, 1, 1, 1}}.geometry(), 16, 16));
  // stride 2 with K = 288 taps per output: the GEMM
  EXPECT_FALSE(kernels::direct_small_gains(Case{1, 32, 64, {80, 80}, {3, 3}, {2, 2}, {1, 1, 1, 1}}.geometry(), 32, 64));
  // 1x1: the GEMM reads X with no im2col
  EXPECT_FALSE(kernels::direct_small_gains(Case{1, 32, 16, {80, 80}, {1, 1}, {1, 1}, {0, 0, 0, 0}}.geometry(), 32, 16));
  // more than 64 output channels, rows under 32
  EXPECT_FALSE(kernels::direct_small_gains(Case{1, 3, 96, {224, 224}, {7, 7}, {2, 2}, {3, 3, 3, 3}}.geometry(), 3, 96));
  EXPECT_FALSE(kernels::direct_small_gains(Case{1, 32, 32, {20, 20}, {3, 3}, {1, 1}, {1, 1, 1, 1}}.geometry(), 32, 32));
}

TEST_F(DirectSmallTest, MatchesDirectAndIm2col) {
  std::mt19937 rng(23);
  const Case cases[] = {
      {1, 3, 16, {41, 37}, {6, 6}, {2, 2}, {2, 2, 2, 2}},       // YOLOv5 stem, odd map
      {1, 3, 64, {45, 70}, {7, 7}, {2, 2}, {3, 3, 3, 3}},       // ResNet stem: 8 channel blocks, 35 wide
      {2, 16, 32, {33, 66}, {3, 3}, {2, 2}, {1, 1, 1, 1}},      // batch 2, downsampling
      {1, 16, 16, {20, 32}, {3, 3}, {1, 1}, {1, 1, 1, 1}},      // one full 32-pixel block
      {1, 8, 9, {7, 33}, {3, 3}, {1, 1}, {1, 1, 1, 1}},         // 33: a block and one pixel; edge channel block
      {1, 5, 13, {6, 48}, {5, 5}, {1, 1}, {2, 2, 2, 2}},        // 5x5, 48 = 32 + 16
      {1, 7, 7, {9, 47}, {1, 1}, {1, 1}, {0, 0, 0, 0}},         // 1x1, 7 channels
      {1, 4, 33, {5, 65}, {3, 2}, {1, 2}, {2, 0, 1, 3}},        // asymmetric pads, strides 1 x 2
      {1, 6, 17, {10, 24}, {3, 3}, {2, 1}, {0, 1, 1, 0}},       // strides 2 x 1
      {1, 64, 64, {4, 40}, {3, 3}, {1, 1}, {1, 1, 1, 1}},       // Cin 64, Cout 64
      {1, 1, 1, {3, 50}, {3, 3}, {1, 1}, {1, 1, 1, 1}},         // one channel in and out
      {1, 2, 5, {8, 31}, {3, 3}, {1, 1}, {2, 1, 0, 3}, {2, 2}}, // dilation 2
      {1, 3, 8, {2, 9}, {7, 7}, {2, 2}, {3, 3, 3, 3}},          // map thinner than the kernel
      {2, 4, 12, {100}, {5}, {2}, {2, 1}},                      // 1-D stride 2
      {1, 8, 24, {70}, {3}, {1}, {1, 1}, {3}},                  // 1-D dilated
  };
  const DirectSmallIsa isas[] = {DirectSmallIsa::kBest, DirectSmallIsa::kAvx2, DirectSmallIsa::kBaseline};
  for (const Case& c : cases) {
    Shape xs{c.n, c.cin}, ws{c.cout, c.cin};
    for (int64_t v : c.in) xs.push_back(v);
    for (int64_t v : c.k) ws.push_back(v);
    Tensor x = random_tensor(xs, rng), w = random_tensor(ws, rng), b = random_tensor({c.cout}, rng);
    const std::vector<Value> inputs{Value(x), Value(w), Value(b)};
    const std::vector<double> want = reference(c, x, w, b);
    const double tol = 1e-6 * static_cast<double>(w.numel() / c.cout + 1);  // K = Cin * taps terms
    kernels::set_direct_small_mode(DirectSmallMode::kOff);
    const Tensor im2col = run_conv(c, inputs, true, 1, "");
    kernels::set_direct_small_mode(DirectSmallMode::kAlways);
    for (DirectSmallIsa isa : isas) {
      kernels::set_direct_small_isa(isa);
      for (int threads = 1; threads <= 3; ++threads) {
        const Tensor y = run_conv(c, inputs, true, threads, "");
        ASSERT_EQ(y.shape(), im2col.shape()) << c.what();
        ASSERT_EQ(static_cast<size_t>(y.numel()), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(y.data<float>()[i], want[i], tol) << c.what() << " isa " << static_cast<int>(isa) << " threads "
                                                       << threads << " at " << i;
          ASSERT_NEAR(y.data<float>()[i], im2col.data<float>()[i], tol) << c.what() << " at " << i;
        }
      }
    }
    kernels::set_direct_small_isa(DirectSmallIsa::kBest);
    // FusedConv's activations, each without and with the sum input Z (added before the activation).
    const Tensor z = random_tensor(im2col.shape(), rng);
    std::vector<Value> with_z = inputs;
    with_z.push_back(Value(z));
    for (const std::string act : {"Relu", "Clip", "Silu", "HardSwish"}) {
      for (bool use_z : {false, true}) {
        const Tensor y = run_conv(c, use_z ? with_z : inputs, true, 2, act);
        ASSERT_EQ(static_cast<size_t>(y.numel()), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          const double v = want[i] + (use_z ? z.data<float>()[i] : 0.f);
          ASSERT_NEAR(y.data<float>()[i], activate(act, v), tol) << c.what() << " " << act << " z " << use_z << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kiln
