// The xnnpack plugin's Winograd F(4x4, 3x3) convolutions
// (backends/xnnpack/xnn_winograd.h) against a float64 direct convolution,
// over their parameter space: channel counts that are and are not multiples
// of the 16-lane transform step, maps that are not multiples of the 4x4
// tile, pads 0/1/2 (lopsided too), batches, with and without bias, with no
// clamp / Relu / Clip, with a residual Add fused into the output transform
// (then Relu), 1, 2, 3 and 13 threads (past 12 the GEMMs are split
// differently), one chunk of tiles and several, and each transform variant (AVX-512, AVX2, baseline: capped
// with KILN_XNNPACK_WINOGRAD_ISA, so one machine runs them all). Each case runs with
// xnnpack.winograd=always and must say in its compile diagnostics that the
// convolution ran with Winograd (and the Add was fused).
//
// The error bound is the one xnn_winograd.h states: for output (n, co, y, x)
// in tile (y / 4, x / 4),
//   P = sum_ci max_k |w[co, ci, k]| * sum |x[n, ci, ...]| over the tile's 6x6
//       input patch + |bias[co]| + |residual|,
//   |out - ref| <= 1e-6 * P.
// Also: a Conv writing into its slice of a channel Concat, the option's
// values, and `auto` leaving XNNPACK the shapes that do not gain.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "xnnpack_test_util.h"

namespace kiln::abi_test {
namespace {

enum class Clamp { kNone, kRelu, kClip };

struct WCase {
  int64_t n, cin, cout, h, w;
  std::vector<int64_t> pads;  // top, left, bottom, right
  bool bias;
  Clamp clamp;
  bool residual;  // Conv -> Add(residual) -> Relu
  int threads;
  const char* isa;  // KILN_XNNPACK_WINOGRAD_ISA: the widest transforms allowed
};

std::string w_name(const WCase& c) {
  std::string s = "n" + std::to_string(c.n) + "_" + std::to_string(c.cin) + "to" + std::to_string(c.cout) + "_" +
                  std::to_string(c.h) + "x" + std::to_string(c.w) + "_p";
  for (int64_t p : c.pads) s += std::to_string(p);
  s += c.bias ? "_bias" : "";
  s += c.clamp == Clamp::kRelu ? "_relu" : c.clamp == Clamp::kClip ? "_clip" : "";
  s += c.residual ? "_residual" : "";
  return s + "_t" + std::to_string(c.threads) + "_" + c.isa;
}

void PrintTo(const WCase& c, std::ostream* os) { *os << w_name(c); }

std::vector<WCase> w_cases() {
  std::vector<WCase> v;
  const std::vector<std::vector<int64_t>> pads = {{1, 1, 1, 1}, {0, 0, 0, 0}, {1, 0, 2, 1}, {2, 2, 0, 1}};
  const int64_t chans[][2] = {{1, 1}, {3, 5}, {16, 16}, {17, 33}, {32, 20}};
  const int64_t maps[][2] = {{3, 3}, {6, 9}, {8, 8}, {13, 11}};
  size_t k = 0;
  for (const auto& ch : chans)
    for (const auto& m : maps)
      for (const auto& p : pads) {
        // Bias, clamp, residual, threads, batch and ISA vary with k, so
        // every value of each meets every channel pair and map.
        const Clamp clamp = k % 3 == 0 ? Clamp::kNone : k % 3 == 1 ? Clamp::kRelu : Clamp::kClip;
        const bool residual = k % 4 == 1 && clamp == Clamp::kNone;
        const char* isa = k % 7 < 3 ? "avx512" : k % 7 < 5 ? "avx2" : "baseline";
        v.push_back({k % 5 == 2 ? 2 : 1, ch[0], ch[1], m[0], m[1], p, k % 2 == 0, clamp, residual, static_cast<int>(1 + k % 3),
                     isa});
        ++k;
      }
  // Residual at every thread count, on a map with partial tiles and lopsided pads.
  for (int t = 1; t <= 3; ++t)
    for (const char* isa : {"avx512", "avx2", "baseline"})
      v.push_back({2, 17, 24, 10, 7, {1, 0, 2, 1}, true, Clamp::kNone, true, t, isa});
  // Several chunks of tiles (2 MB of V and M a chunk: 66 tiles at 100 + 120
  // channels; 2 x 8 x 7 = 112 tiles here, the last chunk partial).
  for (int t = 1; t <= 2; ++t)
    v.push_back({2, 100, 120, 30, 26, {1, 1, 1, 1}, t == 1, Clamp::kNone, true, t, "avx512"});
  // More than 12 threads: each GEMM split by XNNPACK instead of one task per GEMM.
  v.push_back({1, 20, 18, 9, 6, {1, 1, 1, 1}, true, Clamp::kRelu, false, 13, "avx512"});
  return v;
}

// Output of the case: the float64 direct convolution (+ bias, + residual,
// clamped) and the bound P per output.
void reference(const WCase& c, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor* r, int64_t oh,
               int64_t ow, std::vector<double>* ref, std::vector<double>* bound) {
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  ref->assign(static_cast<size_t>(c.n * c.cout * oh * ow), 0.0);
  bound->assign(ref->size(), 0.0);
  const double lo = c.clamp == Clamp::kClip ? -0.5 : c.clamp == Clamp::kRelu || c.residual ? 0.0 : -INFINITY;
  const double hi = c.clamp == Clamp::kClip ? 0.5 : INFINITY;
  auto at = [&](int64_t n, int64_t ci, int64_t iy, int64_t ix) {
    return iy < 0 || iy >= c.h || ix < 0 || ix >= c.w ? 0.0 : static_cast<double>(xd[((n * c.cin + ci) * c.h + iy) * c.w + ix]);
  };
  // sum |x| over each tile's 6x6 patch, per image and input channel, and
  // max |w| per output and input channel.
  const int64_t ht = (oh + 3) / 4, wt = (ow + 3) / 4;
  std::vector<double> patch(static_cast<size_t>(c.n * c.cin * ht * wt), 0.0), wmax(static_cast<size_t>(c.cout * c.cin), 0.0);
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t ci = 0; ci < c.cin; ++ci)
      for (int64_t ty = 0; ty < ht; ++ty)
        for (int64_t tx = 0; tx < wt; ++tx)
          for (int64_t py = 0; py < 6; ++py)
            for (int64_t px = 0; px < 6; ++px)
              patch[static_cast<size_t>(((n * c.cin + ci) * ht + ty) * wt + tx)] +=
                  std::fabs(at(n, ci, 4 * ty + py - c.pads[0], 4 * tx + px - c.pads[1]));
  for (int64_t e = 0; e < c.cout * c.cin * 9; ++e)
    wmax[static_cast<size_t>(e / 9)] = std::max(wmax[static_cast<size_t>(e / 9)], std::fabs(static_cast<double>(wd[e])));
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t co = 0; co < c.cout; ++co)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double acc = 0, p = 0;
          for (int64_t ci = 0; ci < c.cin; ++ci) {
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx)
                acc += wd[((co * c.cin + ci) * 3 + ky) * 3 + kx] * at(n, ci, y + ky - c.pads[0], xo + kx - c.pads[1]);
            p += wmax[static_cast<size_t>(co * c.cin + ci)] * patch[static_cast<size_t>(((n * c.cin + ci) * ht + y / 4) * wt + xo / 4)];
          }
          const size_t i = static_cast<size_t>(((n * c.cout + co) * oh + y) * ow + xo);
          if (b) {
            acc += b->data<float>()[co];
            p += std::fabs(b->data<float>()[co]);
          }
          if (r) {
            acc += r->data<float>()[i];
            p += std::fabs(r->data<float>()[i]);
          }
          (*ref)[i] = std::min(std::max(acc, lo), hi);
          (*bound)[i] = 1e-6 * p;
        }
}

class XnnpackWinograd : public ::testing::TestWithParam<WCase> {};

TEST_P(XnnpackWinograd, MatchesFloat64DirectConvolutionWithinTheBound) {
  const WCase& c = GetParam();
  const int64_t oh = c.h + c.pads[0] + c.pads[2] - 2, ow = c.w + c.pads[1] + c.pads[3] - 2;
  ASSERT_GT(oh, 0);
  ASSERT_GT(ow, 0);
  GraphBuilder g;
  Tensor x = random_tensor({c.n, c.cin, c.h, c.w}, 11);
  Tensor w = random_tensor({c.cout, c.cin, 3, 3}, 12);
  Tensor b = random_tensor({c.cout}, 13);
  Tensor r = random_tensor({c.n, c.cout, oh, ow}, 14);
  std::vector<ir::ValueId> ins{g.input("x", {c.n, c.cin, c.h, c.w}), g.constant("w", w)};
  if (c.bias) ins.push_back(g.constant("b", b));
  std::vector<Value> values{Value(x)};
  const std::vector<int64_t> yd{c.n, c.cout, oh, ow};
  ir::ValueId y = g.node("Conv", ins, "conv", yd, DType::kFloat32, "", {a_ints("kernel_shape", {3, 3}), a_ints("pads", c.pads)});
  if (c.residual) {
    y = g.node("Add", {y, g.input("r", yd)}, "add", yd);
    values.emplace_back(r);
  }
  if (c.clamp == Clamp::kRelu || c.residual) y = g.node("Relu", {y}, "relu", yd);
  if (c.clamp == Clamp::kClip) {
    Tensor lo = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
    Tensor hi = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
    lo.data<float>()[0] = -0.5f;
    hi.data<float>()[0] = 0.5f;
    y = g.node("Clip", {y, g.constant("lo", lo), g.constant("hi", hi)}, "clip", yd);
  }
  g.output(y);
  ScopedEnv isa("KILN_XNNPACK_WINOGRAD_ISA", c.isa);
  auto prog = build(g.graph(), reg().get(), {"xnnpack"},
                    {{"xnnpack", "winograd", "always"}, {"xnnpack", "threads", std::to_string(c.threads)}, claim_all()},
                    FallbackPolicy::kRequire);
  ASSERT_TRUE(prog.ok()) << prog.status().to_string();
  const PlacementReport& rep = (*prog)->placement();
  ASSERT_EQ(rep.partitions.size(), 1u);
  ASSERT_EQ(rep.partitions[0].diagnostics.size(), 1u);
  const std::string want = std::string("; 1 3x3 convolutions by Winograd F(4x4,3x3), ") + (c.residual ? "1" : "0") +
                           " with their residual Add (" + plugin_kernel_isa(c.isa, "baseline") + " transforms)";
  EXPECT_NE(rep.partitions[0].diagnostics[0].find(want), std::string::npos) << rep.partitions[0].diagnostics[0];
  std::vector<double> ref, bound;
  reference(c, x, w, c.bias ? &b : nullptr, c.residual ? &r : nullptr, oh, ow, &ref, &bound);
  for (int run = 0; run < 2; ++run) {  // the second run reuses every buffer
    auto out = (*prog)->run(values, {}, nullptr);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& t = out.value()[0].tensor();
    ASSERT_EQ(t.shape().to_vector(), yd);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_LE(std::fabs(t.data<float>()[i] - ref[i]), bound[i]) << "output " << i << ": " << t.data<float>()[i] << " vs " << ref[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, XnnpackWinograd, ::testing::ValuesIn(w_cases()),
                         [](const ::testing::TestParamInfo<WCase>& i) { return w_name(i.param); });

// A fire module: 1x1 and 3x3 convolutions of one input into a channel
// Concat. The 3x3 one runs with Winograd and writes its slice of the
// Concat's buffer (pixels 48 channels apart), like portable kernels.
std::shared_ptr<ir::Graph> fire(int64_t cin) {
  GraphBuilder g;
  ir::ValueId x = g.input("x", {1, cin, 9, 10});
  const ir::Attribute pads = a_ints("pads", {1, 1, 1, 1});
  ir::ValueId a = g.node("Conv", {x, g.constant("w1", random_tensor({16, cin, 1, 1}, 21)), g.constant("b1", random_tensor({16}, 22))},
                         "c1", {1, 16, 9, 10});
  ir::ValueId b = g.node("Conv", {x, g.constant("w3", random_tensor({32, cin, 3, 3}, 23)), g.constant("b3", random_tensor({32}, 24))},
                         "c3", {1, 32, 9, 10}, DType::kFloat32, "", {a_ints("kernel_shape", {3, 3}), pads});
  a = g.node("Relu", {a}, "r1", {1, 16, 9, 10});
  b = g.node("Relu", {b}, "r3", {1, 32, 9, 10});
  ir::Attribute axis;
  axis.name = "axis";
  axis.type = ir::AttrType::kInt;
  axis.i = 1;
  g.output(g.node("Concat", {a, b}, "cat", {1, 48, 9, 10}, DType::kFloat32, "", {axis}));
  return g.graph();
}

TEST(XnnpackWinogradPlan, WritesIntoItsConcatSlice) {
  for (int threads : {1, 2}) {
    auto x = build(fire(24), reg().get(), {"xnnpack"},
                   {{"xnnpack", "winograd", "always"}, {"xnnpack", "threads", std::to_string(threads)}, claim_all()},
                   FallbackPolicy::kRequire);
    ASSERT_TRUE(x.ok()) << x.status().to_string();
    const std::string& d = (*x)->placement().partitions.at(0).diagnostics.at(0);
    EXPECT_NE(d.find("; 1 3x3 convolutions by Winograd"), std::string::npos) << d;
    auto p = build(fire(24), nullptr, {});
    ASSERT_TRUE(p.ok());
    std::vector<Value> in{Value(random_tensor({1, 24, 9, 10}, 25))};
    auto a = (*x)->run(in, {}, nullptr);
    auto e = (*p)->run(in, {}, nullptr);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(e.ok());
    expect_close(a.value()[0].tensor(), e.value()[0].tensor(), 1e-4f);
  }
}

// The option: off runs none, auto takes 16+ channels (the 8-channel conv
// loses to XNNPACK's igemm), a bad value is refused with its name.
TEST(XnnpackWinogradPlan, OptionPicksTheConvolutions) {
  auto count = [](int64_t cin, const char* mode) -> std::string {
    auto x = build(fire(cin), reg().get(), {"xnnpack"}, {{"xnnpack", "winograd", mode}, claim_all()},
                    FallbackPolicy::kRequire);
    if (!x.ok()) return x.status().message();
    const std::string& d = (*x)->placement().partitions.at(0).diagnostics.at(0);
    const size_t at = d.find(" 3x3 convolutions by Winograd");
    return at == std::string::npos ? d : d.substr(at - 1, 1);
  };
  EXPECT_EQ(count(24, "off"), "0");
  EXPECT_EQ(count(24, "auto"), "1");
  EXPECT_EQ(count(8, "auto"), "0");
  EXPECT_EQ(count(8, "always"), "1");
  const std::string bad = count(24, "sometimes");
  EXPECT_NE(bad.find("winograd"), std::string::npos) << bad;
}

}  // namespace
}  // namespace kiln::abi_test
