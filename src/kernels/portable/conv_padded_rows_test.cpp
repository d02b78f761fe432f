// The padded-rows Conv path (conv_padded_rows.h): when it is taken, and its
// results against a float64 direct convolution and the im2col path over
// channels (odd counts), groups, maps (1xN, Nx1, tiny, wide), kernel sizes,
// dilations, asymmetric pads, rank 1 and 2, bias, FusedConv activations,
// batch and threads 1/2/3.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/portable/conv_padded_rows.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using kernels::PaddedRowsMode;
using kernels::WindowGeometry;
using testing::attr;
using testing::random_tensor;

class PaddedRowsTest : public ::testing::Test {
 protected:
  void TearDown() override { kernels::set_padded_rows_mode(PaddedRowsMode::kAuto); }
};

struct Case {
  int64_t n, group, cg, mg;
  std::vector<int64_t> in, k, dilation, pads;  // pads: begins then ends
  std::vector<int64_t> strides = {};           // empty: 1
  size_t rank() const { return in.size(); }
  int64_t stride(size_t d) const { return strides.empty() ? 1 : strides[d]; }
  int64_t out(size_t d) const {
    return (in[d] + pads[d] + pads[d + rank()] - (k[d] - 1) * dilation[d] - 1) / stride(d) + 1;
  }
  std::string what() const {
    std::string s = "n" + std::to_string(n) + " g" + std::to_string(group) + " " + std::to_string(cg) + "->" +
                    std::to_string(mg) + " in";
    for (int64_t v : in) s += " " + std::to_string(v);
    s += " k";
    for (int64_t v : k) s += " " + std::to_string(v);
    s += " d";
    for (int64_t v : dilation) s += " " + std::to_string(v);
    s += " p";
    for (int64_t v : pads) s += " " + std::to_string(v);
    s += " s";
    for (size_t d = 0; d < rank(); ++d) s += " " + std::to_string(stride(d));
    return s;
  }
  WindowGeometry geometry() const {
    WindowGeometry g;
    g.in = in;
    g.kernel = k;
    g.dilation = dilation;
    for (size_t d = 0; d < rank(); ++d) {
      g.out.push_back(out(d));
      g.stride.push_back(stride(d));
      g.pad_begin.push_back(pads[d]);
      g.pad_end.push_back(pads[d + rank()]);
    }
    return g;
  }
};

// Direct grouped convolution in double (rank 1 as height 1).
std::vector<double> reference(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  const bool two = c.rank() == 2;
  const int64_t ih = two ? c.in[0] : 1, iw = c.in.back(), oh = two ? c.out(0) : 1, ow = c.out(c.rank() - 1);
  const int64_t kh = two ? c.k[0] : 1, kw = c.k.back(), dh = two ? c.dilation[0] : 1, dw = c.dilation.back();
  const int64_t ph = two ? c.pads[0] : 0, pw = c.pads[c.rank() - 1];
  const int64_t sh = two ? c.stride(0) : 1, sw = c.stride(c.rank() - 1);
  const int64_t cin = c.group * c.cg, cout = c.group * c.mg;
  std::vector<double> y(static_cast<size_t>(c.n * cout * oh * ow));
  size_t i = 0;
  for (int64_t img = 0; img < c.n; ++img)
    for (int64_t o = 0; o < cout; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox, ++i) {
          double s = b.data<float>()[o];
          const int64_t grp = o / c.mg;
          for (int64_t ci = 0; ci < c.cg; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t iy = oy * sh - ph + a * dh, ix = ox * sw - pw + e * dw;
                if (iy < 0 || iy >= ih || ix < 0 || ix >= iw) continue;
                s += static_cast<double>(x.data<float>()[((img * cin + grp * c.cg + ci) * ih + iy) * iw + ix]) *
                     w.data<float>()[((o * c.cg + ci) * kh + a) * kw + e];
              }
          y[i] = s;
        }
  return y;
}

Tensor run_conv(const Case& c, const std::vector<Value>& inputs, bool constant, int threads, bool relu) {
  testing::OpCall call;
  call.op_type = relu || inputs.size() > 3 ? "FusedConv" : "Conv";
  if (call.op_type == "FusedConv") {
    call.domain = "com.microsoft";
    call.opset = 1;
    if (relu) call.attrs.push_back(attr("activation", std::string("Relu")));
  }
  call.inputs = inputs;
  call.attrs.push_back(attr("pads", c.pads));
  call.attrs.push_back(attr("dilations", c.dilation));
  call.attrs.push_back(attr("group", c.group));
  if (!c.strides.empty()) call.attrs.push_back(attr("strides", c.strides));
  call.inputs_are_constant = constant;
  call.threads = threads;
  auto out = testing::run_op(call);
  EXPECT_TRUE(out.ok()) << c.what() << ": " << out.status().to_string();
  if (!out.ok()) return Tensor();
  return (*out)[0].tensor();
}

TEST_F(PaddedRowsTest, WhenItIsTaken) {
  const Case grouped{1, 55, 8, 8, {7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}};  // RegNet's last stage
  EXPECT_TRUE(kernels::padded_rows_gain(grouped.geometry(), grouped.cg));
  EXPECT_TRUE(kernels::padded_rows_gain(Case{1, 1, 64, 64, {56, 56}, {3, 3}, {1, 1}, {1, 1, 1, 1}}.geometry(), 64));
  EXPECT_TRUE(kernels::padded_rows_gain(Case{1, 1, 8, 8, {40}, {7}, {3}, {9, 9}}.geometry(), 8));  // 1-D: no extra columns
  // 5x5 on 7x7: 73 columns (5 vectors) for 49 (4 vectors), too many extra
  EXPECT_FALSE(kernels::padded_rows_gain(Case{1, 1, 8, 8, {7, 7}, {5, 5}, {1, 1}, {2, 2, 2, 2}}.geometry(), 8));
  // rows wider than 112: im2col's pieces are long enough
  EXPECT_FALSE(kernels::padded_rows_gain(Case{1, 1, 8, 16, {224, 224}, {3, 3}, {1, 1}, {1, 1, 1, 1}}.geometry(), 8));
  // stride 2: phase planes, one extra column per output row
  EXPECT_TRUE(kernels::padded_rows_gain(Case{1, 1, 16, 32, {160, 160}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}}.geometry(), 16));
  EXPECT_TRUE(kernels::padded_rows_gain(Case{1, 55, 8, 8, {14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}}.geometry(), 8));
  // stride 2 with K = cg * taps < 32 (a 3-channel 3x3 stem): im2col; a 6x6 one (K = 108): the phase planes
  EXPECT_FALSE(kernels::padded_rows_gain(Case{1, 1, 3, 32, {128, 128}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}}.geometry(), 3));
  EXPECT_TRUE(kernels::padded_rows_gain(Case{1, 1, 3, 16, {80, 80}, {6, 6}, {1, 1}, {2, 2, 2, 2}, {2, 2}}.geometry(), 3));
  // stride 3 takes im2col
  EXPECT_FALSE(kernels::padded_rows_gain(Case{1, 1, 8, 8, {30, 30}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {3, 3}}.geometry(), 8));
  WindowGeometry three_d = Case{1, 1, 8, 8, {4, 4, 4}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}}.geometry();
  EXPECT_FALSE(kernels::padded_rows_gain(three_d, 8));
  kernels::set_padded_rows_mode(PaddedRowsMode::kOff);
  EXPECT_FALSE(kernels::padded_rows_gain(grouped.geometry(), grouped.cg));
  kernels::set_padded_rows_mode(PaddedRowsMode::kAlways);
  EXPECT_TRUE(kernels::padded_rows_gain(Case{1, 1, 8, 8, {7, 7}, {5, 5}, {1, 1}, {2, 2, 2, 2}}.geometry(), 8));
}

TEST_F(PaddedRowsTest, MatchesDirectAndIm2col) {
  std::mt19937 rng(17);
  const Case cases[] = {
      {1, 55, 8, 8, {7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}},        // RegNet group conv
      {2, 13, 8, 8, {14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}},      // batch 2
      {1, 1, 17, 33, {9, 11}, {3, 3}, {1, 1}, {1, 1, 1, 1}},      // odd channels, odd map
      {1, 3, 5, 7, {6, 5}, {3, 2}, {2, 1}, {2, 0, 1, 3}},         // dilations, asymmetric pads
      {1, 1, 4, 6, {1, 9}, {1, 3}, {1, 1}, {0, 1, 0, 1}},         // one row
      {1, 1, 4, 6, {9, 1}, {3, 1}, {1, 1}, {1, 0, 1, 0}},         // one column
      {1, 2, 3, 5, {5, 5}, {5, 5}, {1, 1}, {0, 0, 0, 0}},         // no padding: 1x1 output
      {1, 1, 16, 40, {28, 28}, {3, 3}, {1, 1}, {1, 1, 1, 1}},     // 40 rows: several microkernel tiles
      {1, 1, 300, 24, {7, 7}, {3, 3}, {1, 1}, {1, 1, 1, 1}},      // K = 2700: several K blocks
      {1, 1, 8, 16, {60, 70}, {3, 3}, {1, 1}, {0, 2, 2, 0}},      // more columns than one N block
      {2, 4, 3, 2, {23}, {5}, {2}, {3, 5}},                       // 1-D
      // stride 2 (phase planes)
      {1, 1, 16, 32, {40, 40}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}},  // YOLO/ResNet downsampling
      {1, 1, 3, 16, {33, 31}, {6, 6}, {1, 1}, {2, 2, 2, 2}, {2, 2}},   // YOLOv5 stem, odd map
      {2, 6, 4, 4, {14, 13}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}},    // grouped, batch 2
      {1, 1, 5, 7, {11, 12}, {3, 2}, {2, 3}, {2, 0, 1, 3}, {2, 2}},    // dilations, asymmetric pads
      {1, 1, 6, 9, {9, 10}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {2, 1}},     // strides 2 x 1, no padding
      {1, 1, 6, 9, {8, 9}, {1, 3}, {1, 1}, {0, 1, 0, 1}, {1, 2}},      // strides 1 x 2, odd width
      {1, 1, 7, 8, {4, 5}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}},      // tiny map: 2x3 output
      {1, 1, 8, 16, {2, 7}, {7, 7}, {1, 1}, {3, 3, 3, 3}, {2, 2}},     // 7x7 stem on a map thinner than the kernel
      {1, 1, 1, 64, {224, 224}, {7, 7}, {1, 1}, {3, 3, 3, 3}, {2, 2}}, // ResNet stem: rows over 112 (always mode)
      {1, 1, 300, 24, {14, 14}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {2, 2}}, // K = 2700
      {2, 2, 3, 4, {25}, {4}, {1}, {1, 2}, {2}},                       // 1-D stride 2 (wav2vec-like)
  };
  for (const Case& c : cases) {
    Shape xs{c.n, c.group * c.cg}, ws{c.group * c.mg, c.cg};
    for (int64_t v : c.in) xs.push_back(v);
    for (int64_t v : c.k) ws.push_back(v);
    Tensor x = random_tensor(xs, rng), w = random_tensor(ws, rng), b = random_tensor({c.group * c.mg}, rng);
    const std::vector<Value> inputs{Value(x), Value(w), Value(b)};
    const std::vector<double> want = reference(c, x, w, b);
    kernels::set_padded_rows_mode(PaddedRowsMode::kOff);
    const Tensor im2col = run_conv(c, inputs, true, 1, false);
    kernels::set_padded_rows_mode(PaddedRowsMode::kAlways);
    ASSERT_TRUE(kernels::padded_rows_gain(c.geometry(), c.cg)) << c.what();
    for (int threads = 1; threads <= 3; ++threads) {
      for (bool constant : {true, false}) {
        const Tensor y = run_conv(c, inputs, constant, threads, false);
        ASSERT_EQ(y.shape(), im2col.shape()) << c.what();
        ASSERT_EQ(static_cast<size_t>(y.numel()), want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_NEAR(y.data<float>()[i], want[i], 1e-5 * (c.cg + 1)) << c.what() << " threads " << threads << " at " << i;
          ASSERT_NEAR(y.data<float>()[i], im2col.data<float>()[i], 1e-5 * (c.cg + 1)) << c.what() << " at " << i;
        }
      }
    }
    const Tensor relu = run_conv(c, inputs, true, 2, true);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(relu.data<float>()[i], std::max(want[i], 0.0), 1e-5 * (c.cg + 1)) << c.what() << " relu at " << i;
    // FusedConv's sum input Z goes in before the activation.
    const Tensor z = random_tensor(im2col.shape(), rng);
    std::vector<Value> with_z = inputs;
    with_z.push_back(Value(z));
    for (bool act : {false, true}) {
      const Tensor yz = run_conv(c, with_z, true, 3, act);
      ASSERT_EQ(static_cast<size_t>(yz.numel()), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const double v = want[i] + z.data<float>()[i];
        ASSERT_NEAR(yz.data<float>()[i], act ? std::max(v, 0.0) : v, 1e-5 * (c.cg + 1)) << c.what() << " z at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
