// The Winograd F(4x4, 3x3) path (conv_winograd.h) against a float64 direct
// convolution and against the im2col path, over channels, map sizes (odd,
// tiny, partial tiles), pads, bias, FusedConv's Z and activations, batch and
// threads. The bound checked is the one the header states:
//   |y - y_ref| <= 1e-6 * P,  P = sum over input channels of max |w| times
//   the sum of |x| over the output's tile's 6x6 input patch, plus |b|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/portable/conv_winograd.h"
#include "kernels/portable/util/gemm.h"
#include "kernels/kernel.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using kernels::WinogradMode;
using testing::attr;
using testing::random_tensor;

constexpr double kRelBound = 1e-6;  // the header's stated bound

// Sets the process-wide mode for one test and restores kAuto after it.
class WinogradTest : public ::testing::Test {
 protected:
  void TearDown() override { kernels::set_winograd_mode(WinogradMode::kAuto); }
};

struct Case {
  int64_t n, cin, cout, h, w;
  std::vector<int64_t> pads;  // top, left, bottom, right
  bool bias = true;
};

std::string describe(const Case& c) {
  std::string s = "n" + std::to_string(c.n) + " c" + std::to_string(c.cin) + "->" + std::to_string(c.cout) + " " +
                  std::to_string(c.h) + "x" + std::to_string(c.w) + " pads";
  for (int64_t p : c.pads) s += " " + std::to_string(p);
  return s + (c.bias ? " bias" : "");
}

// Direct 3x3 stride-1 convolution in double: the result and, per output,
// the scale of the Winograd rounding error. That scale is the tile's, not the
// output's own window's (the transforms mix the whole 6x6 input patch under
// the output's 4x4 tile): P = sum over input channels of max |w| times the
// sum of |x| over the patch, plus |b|.
struct Reference {
  std::vector<double> y, scale;
  int64_t oh = 0, ow = 0;
};

Reference reference(const Case& c, const Tensor& x, const Tensor& w, const Tensor* b) {
  Reference r;
  r.oh = c.h + c.pads[0] + c.pads[2] - 2;
  r.ow = c.w + c.pads[1] + c.pads[3] - 2;
  const auto size = static_cast<size_t>(c.n * c.cout * r.oh * r.ow);
  r.y.assign(size, 0.0);
  r.scale.assign(size, 0.0);
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  auto xat = [&](int64_t img, int64_t ci, int64_t iy, int64_t ix) -> double {
    if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) return 0.0;
    return xd[((img * c.cin + ci) * c.h + iy) * c.w + ix];
  };
  size_t o = 0;
  for (int64_t img = 0; img < c.n; ++img)
    for (int64_t co = 0; co < c.cout; ++co)
      for (int64_t oy = 0; oy < r.oh; ++oy)
        for (int64_t ox = 0; ox < r.ow; ++ox, ++o) {
          double s = b ? b->data<float>()[co] : 0.0, p = std::abs(s);
          const int64_t py = oy / 4 * 4 - c.pads[0], px = ox / 4 * 4 - c.pads[1];  // the tile's patch
          for (int64_t ci = 0; ci < c.cin; ++ci) {
            const float* g = wd + (co * c.cin + ci) * 9;
            double wmax = 0.0, xsum = 0.0;
            for (int64_t k = 0; k < 9; ++k) {
              s += xat(img, ci, oy + k / 3 - c.pads[0], ox + k % 3 - c.pads[1]) * g[k];
              wmax = std::max(wmax, std::abs(static_cast<double>(g[k])));
            }
            for (int64_t i = 0; i < 6; ++i)
              for (int64_t j = 0; j < 6; ++j) xsum += std::abs(xat(img, ci, py + i, px + j));
            p += wmax * xsum;
          }
          r.y[o] = s;
          r.scale[o] = p;
        }
  return r;
}

Tensor run_conv(const Case& c, const std::vector<Value>& inputs, int threads, const std::string& activation = "",
                std::vector<float> params = {}) {
  testing::OpCall call;
  call.op_type = activation.empty() && inputs.size() < 4 ? "Conv" : "FusedConv";
  if (call.op_type == "FusedConv") {
    call.domain = "com.microsoft";
    call.opset = 1;
    if (!activation.empty()) call.attrs.push_back(attr("activation", activation));
    if (!params.empty()) call.attrs.push_back(attr("activation_params", params));
  }
  call.inputs = inputs;
  call.attrs.push_back(attr("pads", c.pads));
  call.inputs_are_constant = true;  // the weight transform runs at load
  call.threads = threads;
  auto out = testing::run_op(call);
  EXPECT_TRUE(out.ok()) << describe(c) << ": " << out.status().to_string();
  if (!out.ok()) return Tensor();
  return (*out)[0].tensor();
}

// The worst |y - ref| / S over all outputs; also checks the shape.
double worst_relative_error(const Reference& ref, const Tensor& y) {
  EXPECT_EQ(static_cast<size_t>(y.numel()), ref.y.size());
  double worst = 0.0;
  for (size_t i = 0; i < ref.y.size() && i < static_cast<size_t>(y.numel()); ++i) {
    const double err = std::abs(static_cast<double>(y.data<float>()[i]) - ref.y[i]);
    worst = std::max(worst, err / std::max(ref.scale[i], 1e-30));
  }
  return worst;
}

TEST_F(WinogradTest, MatchesDoubleReferenceWithinStatedBound) {
  std::mt19937 rng(151);
  const Case cases[] = {
      {1, 1, 1, 1, 1, {1, 1, 1, 1}},     {1, 2, 3, 3, 3, {0, 0, 0, 0}},  {1, 3, 2, 4, 4, {1, 1, 1, 1}},
      {2, 4, 5, 5, 7, {1, 1, 1, 1}, false}, {1, 5, 4, 9, 6, {0, 1, 2, 0}}, {3, 8, 8, 7, 7, {1, 1, 1, 1}},
      {1, 16, 24, 13, 11, {2, 2, 2, 2}}, {2, 32, 16, 14, 14, {1, 1, 1, 1}}, {1, 64, 64, 17, 15, {1, 0, 1, 0}, false},
      {1, 24, 40, 2, 30, {1, 1, 1, 1}},  {5, 16, 16, 3, 3, {1, 1, 1, 1}},  {1, 256, 32, 8, 8, {1, 1, 1, 1}},
      {1, 16, 16, 57, 57, {1, 1, 1, 1}}, {1, 7, 13, 6, 5, {0, 0, 0, 0}},  {2, 12, 20, 10, 3, {3, 0, 0, 3}},
      // 256 tiles x 36 x 256 channels of V: more than one input pass (8 MiB each)
      {1, 256, 16, 63, 62, {1, 1, 1, 1}, false},
  };
  double worst_seen = 0.0, worst_direct = 0.0;
  for (const Case& c : cases) {
    Tensor x = random_tensor({c.n, c.cin, c.h, c.w}, rng), w = random_tensor({c.cout, c.cin, 3, 3}, rng);
    Tensor b = random_tensor({c.cout}, rng);
    std::vector<Value> inputs = {x, w};
    if (c.bias) inputs.push_back(b);
    const Reference ref = reference(c, x, w, c.bias ? &b : nullptr);
    for (int threads : {1, 2}) {
      kernels::set_winograd_mode(WinogradMode::kAlways);
      const double wino = worst_relative_error(ref, run_conv(c, inputs, threads));
      kernels::set_winograd_mode(WinogradMode::kOff);
      const double direct = worst_relative_error(ref, run_conv(c, inputs, threads));
      EXPECT_LE(wino, kRelBound) << describe(c) << " threads " << threads;
      EXPECT_LE(direct, kRelBound) << describe(c) << " (im2col path)";
      worst_seen = std::max(worst_seen, wino);
      worst_direct = std::max(worst_direct, direct);
    }
  }
  std::printf("Winograd F(4x4,3x3): worst |err| / P = %.3g (bound %.0e; im2col path %.3g)\n", worst_seen, kRelBound,
              worst_direct);
}

// Every SGEMM microkernel the CPU has: V is written in the packed-B layout
// of 32- (AVX-512) and 16-column (AVX2) panels, and as a plain matrix for the
// portable kernel's 8-column panels.
TEST_F(WinogradTest, EveryGemmMicrokernel) {
  std::mt19937 rng(154);
  const std::string original = kernels::sgemm_kernel_name();
  const Case cases[] = {{1, 20, 28, 23, 18, {1, 1, 1, 1}}, {2, 33, 17, 9, 30, {0, 2, 1, 0}},
                        {1, 300, 24, 10, 10, {1, 1, 1, 1}}};  // Cin > KC: plain V
  int kernels_run = 0;
  for (const char* name : {"avx512f", "avx2+fma", "portable"}) {
    if (!kernels::sgemm_force_kernel(name)) continue;
    ++kernels_run;
    kernels::set_winograd_mode(WinogradMode::kAlways);
    for (const Case& c : cases) {
      Tensor x = random_tensor({c.n, c.cin, c.h, c.w}, rng), w = random_tensor({c.cout, c.cin, 3, 3}, rng);
      Tensor b = random_tensor({c.cout}, rng);
      const Reference ref = reference(c, x, w, &b);
      for (int threads : {1, 2})
        EXPECT_LE(worst_relative_error(ref, run_conv(c, {x, w, b}, threads)), kRelBound)
            << name << " " << describe(c) << " threads " << threads;
    }
  }
  EXPECT_GE(kernels_run, 1);
  ASSERT_TRUE(kernels::sgemm_force_kernel(original.c_str()));
}

TEST_F(WinogradTest, FusedConvSumInputAndActivations) {
  std::mt19937 rng(152);
  const Case c{2, 16, 20, 9, 10, {1, 1, 1, 1}};
  Tensor x = random_tensor({c.n, c.cin, c.h, c.w}, rng), w = random_tensor({c.cout, c.cin, 3, 3}, rng);
  Tensor b = random_tensor({c.cout}, rng);
  const Reference ref = reference(c, x, w, &b);
  Tensor z = random_tensor({c.n, c.cout, ref.oh, ref.ow}, rng, -3.f, 3.f);
  struct Act {
    std::string name;
    std::vector<float> params;
    double (*f)(double, const std::vector<float>&);
  };
  const Act acts[] = {
      {"", {}, [](double v, const std::vector<float>&) { return v; }},
      {"Relu", {}, [](double v, const std::vector<float>&) { return std::max(v, 0.0); }},
      {"Clip", {-0.5f, 0.25f}, [](double v, const std::vector<float>& p) { return std::clamp<double>(v, p[0], p[1]); }},
      {"LeakyRelu", {0.1f}, [](double v, const std::vector<float>& p) { return v >= 0 ? v : v * p[0]; }},
      {"Sigmoid", {}, [](double v, const std::vector<float>&) { return 1.0 / (1.0 + std::exp(-v)); }},
      {"HardSwish", {}, [](double v, const std::vector<float>&) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }},
  };
  for (const Act& act : acts) {
    for (bool with_z : {false, true}) {
      std::vector<Value> inputs = {x, w, b};
      if (with_z) inputs.push_back(z);
      for (int threads : {1, 2}) {
        kernels::set_winograd_mode(WinogradMode::kAlways);
        const Tensor y = run_conv(c, inputs, threads, act.name, act.params);
        ASSERT_EQ(static_cast<size_t>(y.numel()), ref.y.size());
        for (size_t i = 0; i < ref.y.size(); ++i) {
          const double pre = ref.y[i] + (with_z ? z.data<float>()[i] : 0.f);
          // Every activation here is 1-Lipschitz; sigmoid's own error is ~1e-7.
          const double tol = kRelBound * (ref.scale[i] + 3.0) + 1e-6;
          ASSERT_NEAR(y.data<float>()[i], act.f(pre, act.params), tol)
              << act.name << (with_z ? " +Z" : "") << " threads " << threads << " at " << i;
        }
      }
    }
  }
}

// A WinogradConv prepared as Conv's factory does, for X of `x_dims` (-1: a
// symbolic dim) and a constant W [cout, cin, 3, 3] with pads 1.
kernels::WinogradConv prepared(std::vector<int64_t> x_dims, int64_t cout, int64_t cin, bool* covers) {
  ir::Graph graph;
  ir::Node node;
  node.op_type = "Conv";
  node.attributes.push_back(attr("pads", std::vector<int64_t>{1, 1, 1, 1}));
  std::vector<ir::Dim> dims;
  for (int64_t d : x_dims) dims.push_back(d >= 0 ? ir::Dim{d, ""} : ir::Dim{-1, "N"});
  const ir::ValueType xt = ir::ValueType::tensor(DType::kFloat32, dims);
  const ir::ValueType wt = ir::ValueType::tensor(DType::kFloat32, {{cout, ""}, {cin, ""}, {3, ""}, {3, ""}});
  const Tensor w = Tensor::zeros(DType::kFloat32, {cout, cin, 3, 3});
  const kernels::InputInfo inputs[2] = {{&xt, nullptr}, {&wt, &w}};
  const kernels::KernelInit init(node, graph, inputs, 11);
  auto attrs = kernels::WindowAttrs::parse(init);
  EXPECT_TRUE(attrs.ok());
  kernels::WinogradConv wc;
  wc.prepare(init, w, 1, *attrs);
  *covers = wc.covers_static_input(init);
  return wc;
}

kernels::WindowGeometry same_3x3(int64_t h, int64_t w) {
  kernels::WindowGeometry g;
  g.in = {h, w};
  g.out = {h, w};
  g.kernel = {3, 3};
  g.stride = {1, 1};
  g.dilation = {1, 1};
  g.pad_begin = {1, 1};
  g.pad_end = {1, 1};
  return g;
}

TEST_F(WinogradTest, AutoModeChoosesByChannelsAndMapSize) {
  kernels::set_winograd_mode(WinogradMode::kAuto);
  bool covers = false;
  // resnet18's first stage: transformed at load, im2col packing not needed.
  kernels::WinogradConv big = prepared({1, 64, 56, 56}, 64, 64, &covers);
  EXPECT_TRUE(big.ready());
  EXPECT_TRUE(covers);
  EXPECT_TRUE(big.applies(same_3x3(56, 56), 1, Shape{64, 64, 3, 3}));
  EXPECT_FALSE(big.applies(same_3x3(56, 56), 1, Shape{64, 32, 3, 3}));  // another W
  EXPECT_FALSE(big.applies(same_3x3(7, 7), 1, Shape{64, 64, 3, 3}));    // 4 tiles: GEMM columns mostly padding
  // Small static maps (at most 16 tiles: resnet18's 7x7 and 14x14 stages,
  // squeezenet's 13x13) take the lanes path; few channels or a map that is
  // mostly tile padding never gain: nothing transformed.
  kernels::WinogradConv small = prepared({1, 256, 7, 7}, 256, 256, &covers);
  EXPECT_TRUE(small.ready());
  EXPECT_TRUE(covers);
  EXPECT_TRUE(small.applies(same_3x3(7, 7), 1, Shape{256, 256, 3, 3}));
  EXPECT_FALSE(small.applies(same_3x3(56, 56), 1, Shape{256, 256, 3, 3}));  // more tiles than lanes
  // 512 channels at 7x7: 4 tiles per U value, 38 MB of U streamed per run.
  EXPECT_FALSE(prepared({1, 512, 7, 7}, 512, 512, &covers).ready());
  EXPECT_TRUE(prepared({1, 512, 14, 14}, 512, 512, &covers).ready());
  EXPECT_TRUE(prepared({1, 48, 13, 13}, 192, 48, &covers).ready());
  EXPECT_TRUE(prepared({1, 16, 14, 14}, 16, 16, &covers).ready());
  EXPECT_FALSE(prepared({1, 64, 3, 3}, 64, 64, &covers).ready());  // 16 outputs computed per 9
  EXPECT_FALSE(prepared({1, 8, 56, 56}, 8, 8, &covers).ready());
  // Unknown spatial dims: transformed, decided per run, im2col kept.
  kernels::WinogradConv dynamic = prepared({-1, 64, -1, -1}, 64, 64, &covers);
  EXPECT_TRUE(dynamic.ready());
  EXPECT_FALSE(covers);
  EXPECT_TRUE(dynamic.applies(same_3x3(28, 28), 1, Shape{64, 64, 3, 3}));
  EXPECT_FALSE(dynamic.applies(same_3x3(7, 7), 1, Shape{64, 64, 3, 3}));  // the lanes path needs a static shape
  // The modes.
  kernels::set_winograd_mode(WinogradMode::kAlways);
  EXPECT_FALSE(small.applies(same_3x3(56, 56), 1, Shape{256, 256, 3, 3}));  // its U layout holds 16 tiles
  kernels::WinogradConv always = prepared({1, 8, 7, 7}, 8, 8, &covers);
  EXPECT_TRUE(always.ready());
  EXPECT_TRUE(always.applies(same_3x3(1, 1), 1, Shape{8, 8, 3, 3}));
  kernels::set_winograd_mode(WinogradMode::kOff);
  EXPECT_FALSE(prepared({1, 64, 56, 56}, 64, 64, &covers).ready());
}

TEST_F(WinogradTest, AutoModeResultOnALargeMap) {
  std::mt19937 rng(153);
  kernels::set_winograd_mode(WinogradMode::kAuto);
  const Case big{1, 64, 64, 56, 56, {1, 1, 1, 1}};
  Tensor x = random_tensor({1, 64, 56, 56}, rng), w = random_tensor({64, 64, 3, 3}, rng);
  const Reference ref = reference(big, x, w, nullptr);
  EXPECT_LE(worst_relative_error(ref, run_conv(big, {x, w}, 2)), kRelBound);
}

}  // namespace
}  // namespace kiln
