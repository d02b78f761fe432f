// Conv against a naive N-D reference over random shapes, strides, pads,
// dilations, groups and auto_pad modes, covering the depthwise, pointwise
// and im2col paths, constant (pre-packed) and runtime weights.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op;
using testing::run_op1;

struct ConvCase {
  Shape x, w;
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads;  // empty: default
  std::string auto_pad;                           // empty: NOTSET
  bool bias = true;
};

ConvCase cc(Shape x, Shape w, int64_t group = 1, std::vector<int64_t> strides = {},
            std::vector<int64_t> dilations = {}, std::vector<int64_t> pads = {}, std::string auto_pad = "") {
  ConvCase c;
  c.x = x;
  c.w = w;
  c.group = group;
  c.strides = std::move(strides);
  c.dilations = std::move(dilations);
  c.pads = std::move(pads);
  c.auto_pad = std::move(auto_pad);
  return c;
}

using namespace kiln::testing;  // tensor builders

// Direct convolution in double; pads resolved by the same rules as ONNX.
Tensor naive_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor* b) {
  const size_t r = c.x.rank() - 2;
  std::vector<int64_t> st(r, 1), dl(r, 1), pb(r, 0), out(r);
  for (size_t d = 0; d < r; ++d) {
    if (!c.strides.empty()) st[d] = c.strides[d];
    if (!c.dilations.empty()) dl[d] = c.dilations[d];
    const int64_t in = c.x[d + 2], k = (c.w[d + 2] - 1) * dl[d] + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[d] = (in + st[d] - 1) / st[d];
      const int64_t total = std::max<int64_t>(0, (out[d] - 1) * st[d] + k - in);
      pb[d] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else {
      int64_t pe = 0;
      if (!c.pads.empty() && c.auto_pad.empty()) {
        pb[d] = c.pads[d];
        pe = c.pads[d + r];
      }
      out[d] = (in + pb[d] + pe - k) / st[d] + 1;
    }
  }
  const int64_t n = c.x[0], cin = c.x[1], m = c.w[0], cg = cin / c.group, mg = m / c.group;
  Shape ys{n, m};
  for (int64_t o : out) ys.push_back(o);
  Tensor y = Tensor::allocate(DType::kFloat32, ys);
  int64_t osz = 1, ksz = 1, isz = 1;
  for (size_t d = 0; d < r; ++d) {
    osz *= out[d];
    ksz *= c.w[d + 2];
    isz *= c.x[d + 2];
  }
  for (int64_t img = 0; img < n; ++img)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t o = 0; o < osz; ++o) {
        double s = b ? b->data<float>()[oc] : 0.0;
        const int64_t grp = oc / mg;
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t kk = 0; kk < ksz; ++kk) {
            int64_t orem = o, krem = kk, off = 0;
            bool inside = true;
            std::vector<int64_t> idx(r);
            for (size_t d = r; d-- > 0;) {
              const int64_t od = orem % out[d], kd = krem % c.w[d + 2];
              orem /= out[d];
              krem /= c.w[d + 2];
              idx[d] = od * st[d] - pb[d] + kd * dl[d];
              if (idx[d] < 0 || idx[d] >= c.x[d + 2]) inside = false;
            }
            if (!inside) continue;
            for (size_t d = 0; d < r; ++d) off = off * c.x[d + 2] + idx[d];
            const double xv = x.data<float>()[(img * cin + grp * cg + ci) * isz + off];
            const double wv = w.data<float>()[(oc * cg + ci) * ksz + kk];
            s += xv * wv;
          }
        y.data<float>()[(img * m + oc) * osz + o] = static_cast<float>(s);
      }
  return y;
}

std::vector<ir::Attribute> conv_attrs(const ConvCase& c) {
  std::vector<ir::Attribute> a;
  if (c.group != 1) a.push_back(attr("group", c.group));
  if (!c.strides.empty()) a.push_back(attr("strides", c.strides));
  if (!c.dilations.empty()) a.push_back(attr("dilations", c.dilations));
  if (!c.pads.empty()) a.push_back(attr("pads", c.pads));
  if (!c.auto_pad.empty()) a.push_back(attr("auto_pad", c.auto_pad));
  return a;
}

void check_conv(const ConvCase& c, std::mt19937& rng, const std::string& what) {
  Tensor x = random_tensor(c.x, rng), w = random_tensor(c.w, rng), b = random_tensor({c.w[0]}, rng);
  Tensor want = naive_conv(c, x, w, c.bias ? &b : nullptr);
  for (int variant = 0; variant < 4; ++variant) {
    testing::OpCall call;
    call.op_type = "Conv";
    call.inputs = {x, w};
    if (c.bias) call.inputs.push_back(b);
    call.attrs = conv_attrs(c);
    call.inputs_are_constant = variant >= 1;  // packed weights
    call.threads = variant >= 2 ? variant : 1;
    call.opset = variant == 0 ? 11 : 1;
    auto out = run_op(call);
    ASSERT_TRUE(out.ok()) << what << ": " << out.status().to_string();
    const Tensor& y = (*out)[0].tensor();
    ASSERT_EQ(y.shape(), want.shape()) << what;
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_NEAR(y.data<float>()[i], want.data<float>()[i], 2e-4) << what << " variant " << variant << " at " << i;
  }
}

TEST(ConvTest, MatchesNaiveOnRandom2D) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> u(0, 1000);
  for (int t = 0; t < 60; ++t) {
    ConvCase c;
    const int64_t group = (t % 4 == 1) ? 2 : (t % 4 == 2 ? 3 : 1);
    const int64_t cg = 1 + u(rng) % 4, mg = 1 + u(rng) % 5;
    const int64_t kh = 1 + u(rng) % 3, kw = 1 + u(rng) % 3;
    c.x = Shape{1 + u(rng) % 2, cg * group, 4 + u(rng) % 9, 4 + u(rng) % 9};
    c.w = Shape{mg * group, cg, kh, kw};
    c.group = group;
    if (u(rng) % 2) c.strides = {1 + u(rng) % 3, 1 + u(rng) % 2};
    if (u(rng) % 3 == 0) c.dilations = {1 + u(rng) % 2, 1 + u(rng) % 3};
    if (u(rng) % 2) c.pads = {u(rng) % 3, u(rng) % 2, u(rng) % 2, u(rng) % 3};
    const int ap = u(rng) % 6;
    if (ap == 0) c.auto_pad = "SAME_UPPER";
    if (ap == 1) c.auto_pad = "SAME_LOWER";
    if (ap == 2) c.auto_pad = "VALID";
    c.bias = u(rng) % 4 != 0;
    // Keep the dilated kernel inside the padded input.
    bool ok = true;
    for (size_t d = 0; d < 2; ++d) {
      const int64_t k = (c.w[d + 2] - 1) * (c.dilations.empty() ? 1 : c.dilations[d]) + 1;
      const int64_t padded = c.x[d + 2] + (c.pads.empty() || !c.auto_pad.empty() ? 0 : c.pads[d] + c.pads[d + 2]);
      if (k > padded) ok = false;
    }
    if (!ok) continue;
    check_conv(c, rng, "case " + std::to_string(t));
  }
}

TEST(ConvTest, DepthwiseAndPointwisePaths) {
  std::mt19937 rng(12);
  // depthwise 3x3 (mobilenet), strided, with multiplier, dilated, 1-D
  check_conv(cc({1, 8, 13, 11}, {8, 1, 3, 3}, 8, {}, {}, {1, 1, 1, 1}), rng, "dw 3x3");
  check_conv(cc({2, 6, 12, 12}, {6, 1, 3, 3}, 6, {2, 2}, {}, {1, 1, 1, 1}), rng, "dw s2");
  check_conv(cc({1, 4, 9, 10}, {12, 1, 3, 3}, 4, {}, {}, {0, 1, 2, 0}), rng, "dw mult 3");
  check_conv(cc({1, 5, 11, 9}, {5, 1, 3, 2}, 5, {1, 2}, {2, 2}, {2, 2, 2, 2}), rng, "dw dilated");
  check_conv(cc({1, 5, 11, 9}, {5, 1, 5, 5}, 5, {}, {}, {}, "SAME_UPPER"), rng, "dw same 5x5");
  check_conv(cc({2, 6, 17}, {6, 1, 3}, 6, {2}, {}, {1, 1}), rng, "dw 1-D");
  // wide rows reach the 16-wide vector steps of the 3x3 path (and their tails)
  check_conv(cc({1, 3, 5, 53}, {3, 1, 3, 3}, 3, {}, {}, {1, 1, 1, 1}), rng, "dw 3x3 wide");
  check_conv(cc({1, 3, 6, 71}, {3, 1, 3, 3}, 3, {2, 2}, {}, {1, 1, 1, 1}), rng, "dw 3x3 s2 wide");
  check_conv(cc({1, 2, 4, 68}, {2, 1, 3, 3}, 2, {1, 2}, {}, {0, 0, 0, 0}), rng, "dw 3x3 s(1,2) no pad");
  check_conv(cc({1, 2, 7, 40}, {4, 1, 3, 3}, 2, {3, 1}, {}, {2, 3, 1, 0}), rng, "dw 3x3 odd pads mult 2");
  check_conv(cc({1, 2, 7, 60}, {4, 1, 3, 3}, 2, {1, 1}, {}, {2, 3, 1, 0}), rng, "dw 3x3 odd pads wide");
  check_conv(cc({2, 5, 7, 7}, {5, 1, 3, 3}, 5, {}, {}, {1, 1, 1, 1}), rng, "dw 3x3 7x7");
  check_conv(cc({1, 4, 14, 14}, {4, 1, 3, 3}, 4, {2, 2}, {}, {0, 0, 1, 1}), rng, "dw 3x3 s2 14x14");
  // pointwise: 1x1 stride 1 (direct GEMM), grouped, and 1x1 strided (im2col)
  check_conv(cc({2, 16, 7, 9}, {24, 16, 1, 1}), rng, "pw");
  check_conv(cc({1, 16, 7, 9}, {8, 4, 1, 1}, 4), rng, "pw grouped");
  check_conv(cc({1, 16, 8, 8}, {8, 16, 1, 1}, 1, {2, 2}), rng, "pw strided");
  // big enough to cross GEMM cache blocks (K = 300 > KC, M > MC) and thread splits
  check_conv(cc({1, 12, 20, 20}, {150, 12, 5, 5}, 1, {}, {}, {2, 2, 2, 2}), rng, "large");
  check_conv(cc({1, 3, 30, 30}, {16, 3, 7, 7}, 1, {2, 2}, {}, {3, 3, 3, 3}), rng, "stem 7x7/2");
  // stems with stride-2 rows of every length class (runs of 4 gathered values and tails)
  check_conv(cc({1, 3, 23, 37}, {32, 3, 3, 3}, 1, {2, 2}, {}, {1, 1, 1, 1}), rng, "stem 3x3/2");
  check_conv(cc({2, 4, 18, 19}, {16, 4, 3, 3}, 1, {2, 2}, {}, {0, 1, 1, 0}), rng, "stem 3x3/2 Cin 4");
  check_conv(cc({1, 3, 9, 64}, {8, 3, 3, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER"), rng, "stem 3x3/2 same");
  // pointwise on small maps with many channels: Y^T = X^T W^T when W is
  // constant (variants 1..3), 2-D, 1-D and 3-D, with and without bias
  check_conv(cc({1, 24, 7, 7}, {64, 24, 1, 1}), rng, "pw 7x7 transposed");
  check_conv(cc({2, 40, 5, 5}, {48, 40, 1, 1}), rng, "pw 5x5 transposed, 2 images");
  check_conv(cc({1, 16, 3, 3}, {100, 16, 1, 1}), rng, "pw 3x3 transposed, ragged channels");
  check_conv(cc({1, 8, 33}, {32, 8, 1}), rng, "pw 1-D transposed");
  check_conv(cc({1, 8, 2, 3, 3}, {32, 8, 1, 1, 1}), rng, "pw 3-D transposed");
  ConvCase no_bias = cc({1, 300, 7, 7}, {160, 300, 1, 1});
  no_bias.bias = false;
  check_conv(no_bias, rng, "pw 7x7 transposed, K > KC, no bias");
  // small map, many output channels: with 2 threads only rows split and the
  // im2col panels are packed once and shared
  check_conv(cc({1, 64, 7, 7}, {256, 64, 3, 3}, 1, {}, {}, {1, 1, 1, 1}), rng, "7x7 map, 256 channels");
}

TEST(ConvTest, OneDAndThreeD) {
  std::mt19937 rng(13);
  check_conv(cc({2, 3, 20}, {4, 3, 3}, 1, {2}, {2}, {1, 2}), rng, "1-D");
  check_conv(cc({1, 4, 15}, {6, 2, 4}, 2, {}, {}, {}, "SAME_LOWER"), rng, "1-D grouped same");
  check_conv(cc({1, 2, 5, 6, 7}, {3, 2, 3, 2, 3}, 1, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 0}), rng, "3-D");
  check_conv(cc({2, 4, 4, 5, 6}, {4, 2, 2, 2, 2}, 2, {2, 1, 2}, {}, {}, "SAME_UPPER"), rng, "3-D grouped same");
  check_conv(cc({1, 3, 4, 4, 4}, {3, 1, 3, 3, 3}, 3, {}, {}, {1, 1, 1, 1, 1, 1}), rng, "3-D depthwise (generic path)");
}

TEST(ConvTest, HalfAndDoubleStagedThroughFloat) {
  // 1x1 input, 1x1 kernel: y = x * w + b
  auto yh = run_op1("Conv", {Tensor::from_vector<Float16>({Float16(2.f)}, {1, 1, 1, 1}),
                             Tensor::from_vector<Float16>({Float16(3.f)}, {1, 1, 1, 1}),
                             Tensor::from_vector<Float16>({Float16(0.5f)}, {1})});
  ASSERT_TRUE(yh.ok()) << yh.status().to_string();
  EXPECT_EQ(yh->dtype(), DType::kFloat16);
  EXPECT_EQ(static_cast<float>(yh->data<Float16>()[0]), 6.5f);
  auto yd = run_op1("Conv", {Tensor::from_vector<double>({1, 2, 3}, {1, 1, 3}), Tensor::from_vector<double>({1, 1}, {1, 1, 2})});
  ASSERT_TRUE(yd.ok()) << yd.status().to_string();
  EXPECT_EQ(yd->shape(), (Shape{1, 1, 2}));
  EXPECT_EQ(yd->data<double>()[0], 3.0);
  EXPECT_EQ(yd->data<double>()[1], 5.0);
}

TEST(ConvTest, RejectsBadInputs) {
  Tensor x = Tensor::zeros(DType::kFloat32, {1, 4, 5, 5});
  auto expect_error = [](const Result<Tensor>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("Conv"), std::string::npos) << r.status().message();
  };
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {2, 3, 3, 3})}), "input 1 (W)");
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {2, 4, 3})}), "input 1 (W)");
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {3, 2, 3, 3})}, {attr("group", 2)}), "group");
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {2, 4, 3, 3}), Tensor::zeros(DType::kFloat32, {3})}),
               "input 2 (B)");
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {2, 4, 7, 7})}), "smaller than the kernel");
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {2, 4, 3, 3})}, {attr("strides", std::vector<int64_t>{1})}),
               "strides");
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {2, 4, 3, 3})}, {attr("auto_pad", "SAME")}),
               "auto_pad");
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {2, 4, 3, 3})},
                       {attr("kernel_shape", std::vector<int64_t>{2, 2})}),
               "kernel_shape");
  expect_error(run_op1("Conv", {Tensor::zeros(DType::kFloat32, {4, 5}), Tensor::zeros(DType::kFloat32, {2, 4})}),
               "input 0 (X)");
  expect_error(run_op1("Conv", {x, Tensor::zeros(DType::kFloat32, {2, 4, 3, 3})}, {attr("group", 0)}), "group");
}

TEST(ConvTest, FusedConvAddsZAndActivation) {
  std::mt19937 rng(14);
  struct Act {
    std::string name;
    std::vector<float> params;
    float (*f)(float, const std::vector<float>&);
  };
  const Act acts[] = {
      {"Relu", {}, [](float v, const std::vector<float>&) { return std::max(v, 0.f); }},
      {"Clip", {-0.5f, 0.25f}, [](float v, const std::vector<float>& p) { return std::min(std::max(v, p[0]), p[1]); }},
      {"LeakyRelu", {0.1f}, [](float v, const std::vector<float>& p) { return v >= 0 ? v : v * p[0]; }},
      {"Sigmoid", {}, [](float v, const std::vector<float>&) { return 1.f / (1.f + std::exp(-v)); }},
      {"Tanh", {}, [](float v, const std::vector<float>&) { return std::tanh(v); }},
      {"HardSigmoid", {0.3f, 0.4f},
       [](float v, const std::vector<float>& p) { return std::min(1.f, std::max(0.f, p[0] * v + p[1])); }},
      {"HardSwish", {}, [](float v, const std::vector<float>&) { return v * std::min(1.f, std::max(0.f, v / 6.f + 0.5f)); }},
      {"Silu", {}, [](float v, const std::vector<float>&) { return static_cast<float>(v / (1.0 + std::exp(-double(v)))); }},
  };
  // im2col, pointwise and depthwise paths
  for (const ConvCase& c : {cc({1, 4, 9, 9}, {6, 4, 3, 3}, 1, {}, {}, {1, 1, 1, 1}), cc({2, 8, 5, 5}, {4, 8, 1, 1}),
                            cc({1, 4, 6, 20}, {4, 1, 3, 3}, 4, {}, {}, {1, 1, 1, 1})}) {
    Tensor x = random_tensor(c.x, rng), w = random_tensor(c.w, rng), b = random_tensor({c.w[0]}, rng);
    Tensor plain = naive_conv(c, x, w, &b);
    Tensor z = random_tensor(plain.shape(), rng);
    for (const Act& act : acts) {
      for (bool with_z : {false, true}) {
        testing::OpCall call;
        call.op_type = "FusedConv";
        call.domain = "com.microsoft";
        call.opset = 1;
        call.inputs = {x, w, b};
        if (with_z) call.inputs.push_back(z);
        call.attrs = conv_attrs(c);
        call.attrs.push_back(attr("activation", act.name));
        if (!act.params.empty()) call.attrs.push_back(attr("activation_params", act.params));
        call.inputs_are_constant = with_z;
        auto r = run_op(call);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        const Tensor& y = (*r)[0].tensor();
        for (int64_t i = 0; i < y.numel(); ++i) {
          const float pre = plain.data<float>()[i] + (with_z ? z.data<float>()[i] : 0.f);
          ASSERT_NEAR(y.data<float>()[i], act.f(pre, act.params), 2e-4) << act.name << " at " << i;
        }
      }
    }
  }
  // The transposed pointwise path (constant W, 7x7 map, 32 channels, two
  // images): the clamp in the GEMM epilogue, the other activations as a
  // pass; with Z, the sum after the transpose and then the activation.
  const ConvCase pw = cc({2, 8, 7, 7}, {32, 8, 1, 1});
  Tensor x = random_tensor(pw.x, rng), w = random_tensor(pw.w, rng), b = random_tensor({pw.w[0]}, rng);
  Tensor plain = naive_conv(pw, x, w, &b);
  Tensor z = random_tensor(plain.shape(), rng);
  for (const Act& act : acts) {
    for (int threads : {1, 2, 3}) {
      for (bool with_z : {false, true}) {
        testing::OpCall call;
        call.op_type = "FusedConv";
        call.domain = "com.microsoft";
        call.opset = 1;
        call.inputs = {x, w, b};
        if (with_z) call.inputs.push_back(z);
        call.attrs = {attr("activation", act.name)};
        if (!act.params.empty()) call.attrs.push_back(attr("activation_params", act.params));
        call.inputs_are_constant = true;
        call.threads = threads;
        auto r = run_op(call);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        const Tensor& y = (*r)[0].tensor();
        ASSERT_EQ(y.shape(), plain.shape());
        for (int64_t i = 0; i < y.numel(); ++i) {
          const float pre = plain.data<float>()[i] + (with_z ? z.data<float>()[i] : 0.f);
          ASSERT_NEAR(y.data<float>()[i], act.f(pre, act.params), 2e-4) << act.name << (with_z ? " z" : "") << " at " << i;
        }
      }
    }
  }
  testing::OpCall bad;
  bad.op_type = "FusedConv";
  bad.domain = "com.microsoft";
  bad.opset = 1;
  bad.inputs = {Tensor::zeros(DType::kFloat32, {1, 1, 3, 3}), Tensor::zeros(DType::kFloat32, {1, 1, 1, 1})};
  bad.attrs = {attr("activation", "Swish")};
  auto r = run_op(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("activation"), std::string::npos);
  bad.attrs = {attr("activation", "Clip")};
  EXPECT_FALSE(run_op(bad).ok());  // Clip needs two activation_params
}

}  // namespace
}  // namespace kiln
