// The depthwise kernel against a naive loop over random geometries: kernel
// sizes 1..7, strides 1..3, dilations 1..3, uneven pads, depth multipliers,
// 1-D, maps from 1x1 to wider than one vector step, one to three threads;
// both of its layouts (output-wide phase planes where every input column
// fits one, padded phase planes otherwise), the 3x3 column-stride-2 kernel
// the wide-map row kernels (conv_depthwise_rows.h) and the channel-packed
// small-map kernels (conv_depthwise_packed.h) of each ISA the CPU has, each
// with the epilogue (clamp in registers, a callback).
#include "kernels/portable/conv_depthwise.h"

#include <gtest/gtest.h>

#include "kernels/portable/conv_depthwise_packed.h"
#include "kernels/portable/conv_depthwise_rows.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

// Runs the phase-row and packed kernels of one ISA (1 AVX-512, 2 AVX2) or
// none of them (3: the baseline paths) while alive.
struct ForcedIsa {
  explicit ForcedIsa(int isa) : ok(depthwise_rows_force_isa(isa)) {}
  ~ForcedIsa() { (void)depthwise_rows_force_isa(0); }
  bool ok;
};

std::vector<float> naive(const DepthwiseConv& p, const std::vector<float>& x, const std::vector<float>& w,
                         const std::vector<float>* b) {
  const int64_t m = p.c * p.mult;
  std::vector<float> y(static_cast<size_t>(p.n * m * p.out_h * p.out_w));
  for (int64_t img = 0; img < p.n; ++img)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t oh = 0; oh < p.out_h; ++oh)
        for (int64_t ow = 0; ow < p.out_w; ++ow) {
          double s = b ? (*b)[static_cast<size_t>(oc)] : 0.0;
          for (int64_t kh = 0; kh < p.k_h; ++kh)
            for (int64_t kw = 0; kw < p.k_w; ++kw) {
              const int64_t ih = oh * p.s_h - p.p_h + kh * p.d_h, iw = ow * p.s_w - p.p_w + kw * p.d_w;
              if (ih < 0 || ih >= p.in_h || iw < 0 || iw >= p.in_w) continue;
              const int64_t xi = ((img * p.c + oc / p.mult) * p.in_h + ih) * p.in_w + iw;
              const int64_t wi = (oc * p.k_h + kh) * p.k_w + kw;
              s += static_cast<double>(x[static_cast<size_t>(xi)]) * w[static_cast<size_t>(wi)];
            }
          y[static_cast<size_t>(((img * m + oc) * p.out_h + oh) * p.out_w + ow)] = static_cast<float>(s);
        }
  return y;
}

// The epilogue's callback in the tests: y = y * 0.5 - 0.25 (any in-place
// map); ctx counts the floats it is given.
void halve(const void* ctx, float* y, int64_t n) {
  *static_cast<std::atomic<int64_t>*>(const_cast<void*>(ctx)) += n;
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] * 0.5f - 0.25f;
}

float reference_epilogue(float v, int mode) {
  if (mode == 1) return std::min(6.f, std::max(0.f, v));  // Relu6
  if (mode == 2) return std::max(-0.5f, v) * 0.5f - 0.25f;   // clamp below, then the callback
  return v;
}

void check(const DepthwiseConv& p, std::mt19937& rng, const std::string& what) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto fill = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& e : v) e = u(rng);
    return v;
  };
  const int64_t m = p.c * p.mult;
  const std::vector<float> x = fill(p.n * p.c * p.in_h * p.in_w), w = fill(m * p.k_h * p.k_w), b = fill(m);
  for (int mode : {0, 1, 2}) {
    const bool with_bias = mode != 0;
    std::vector<float> want = naive(p, x, w, with_bias ? &b : nullptr);
    for (float& v : want) v = reference_epilogue(v, mode);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> y(want.size(), -7.f);
      std::atomic<int64_t> covered{0};
      DepthwiseEpilogue ep;
      if (mode == 1) {
        ep.lo = 0.f;
        ep.hi = 6.f;
      } else if (mode == 2) {
        ep.lo = -0.5f;
        ep.apply = halve;
        ep.ctx = &covered;
      }
      depthwise_conv_f32(p, x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), &pool, ep);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-5) << what << " mode " << mode << " threads " << threads << " at " << i;
      if (mode == 2) {
        EXPECT_EQ(covered.load(), static_cast<int64_t>(y.size())) << what << ": the callback covers each output once";
      }
    }
  }
}

// Output size for pads (begin, end), as ONNX computes it; 0 when empty.
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
  const int64_t span = (k - 1) * d + 1;
  return in + pb + pe < span ? 0 : (in + pb + pe - span) / s + 1;
}

// The baseline kernels as well: on CPUs without AVX2 every shape runs them.
class DepthwiseConvIsaTest : public ::testing::TestWithParam<int> {
 protected:
  ForcedIsa forced_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Kernels, DepthwiseConvIsaTest, ::testing::Values(0, 3),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == 0 ? "ByCpu" : "Baseline"; });

TEST_P(DepthwiseConvIsaTest, MatchesNaiveOverGeometries) {
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> u(0, 1000);
  int checked = 0;
  for (int t = 0; t < 300 && checked < 150; ++t) {
    DepthwiseConv p;
    const bool one_d = t % 5 == 4;
    p.n = 1 + u(rng) % 2;
    p.c = 1 + u(rng) % 5;
    p.mult = 1 + (u(rng) % 4 == 0 ? 1 + u(rng) % 2 : 0);
    p.k_w = 1 + u(rng) % 7;
    p.s_w = 1 + u(rng) % 3;
    p.d_w = u(rng) % 4 == 0 ? 2 + u(rng) % 2 : 1;
    p.p_w = u(rng) % (p.k_w + 1);
    const int64_t pe_w = u(rng) % (p.k_w + 1);
    p.in_w = 1 + u(rng) % (t % 3 == 0 ? 90 : 20);
    if (!one_d) {
      p.k_h = 1 + u(rng) % 7;
      p.s_h = 1 + u(rng) % 3;
      p.d_h = u(rng) % 4 == 0 ? 2 + u(rng) % 2 : 1;
      p.p_h = u(rng) % (p.k_h + 1);
      p.in_h = 1 + u(rng) % 20;
      p.out_h = out_size(p.in_h, p.k_h, p.s_h, p.d_h, p.p_h, u(rng) % (p.k_h + 1));
    }
    p.out_w = out_size(p.in_w, p.k_w, p.s_w, p.d_w, p.p_w, pe_w);
    if (p.out_h == 0 || p.out_w == 0) continue;
    check(p, rng, "case " + std::to_string(t));
    ++checked;
  }
  EXPECT_GE(checked, 100);
}

TEST_P(DepthwiseConvIsaTest, EfficientNetAndMobileNetShapes) {
  std::mt19937 rng(22);
  // (channels, in, kernel, stride, pad): 5x5 stride 2 and 3x3 stride 1 and 2
  // on maps from 112 down to 7.
  const int64_t shapes[][5] = {{4, 112, 3, 1, 1}, {3, 112, 3, 2, 1}, {5, 56, 5, 2, 2}, {6, 28, 5, 1, 2},
                               {8, 14, 5, 2, 2}, {16, 7, 5, 1, 2}, {16, 7, 3, 1, 1}, {9, 14, 3, 2, 1}};
  for (const auto& s : shapes) {
    DepthwiseConv p;
    p.c = s[0];
    p.in_h = p.in_w = s[1];
    p.k_h = p.k_w = s[2];
    p.s_h = p.s_w = s[3];
    p.p_h = p.p_w = s[4];
    p.out_h = p.out_w = out_size(s[1], s[2], s[3], 1, s[4], s[4]);
    check(p, rng, "c " + std::to_string(s[0]) + " in " + std::to_string(s[1]) + " k " + std::to_string(s[2]) +
                      " s " + std::to_string(s[3]));
  }
}

}  // namespace
}  // namespace kiln::kernels

namespace kiln::kernels {
namespace {

DepthwiseConv same_geometry(int64_t c, int64_t in_h, int64_t in_w, int64_t k, int64_t s, int64_t d) {
  DepthwiseConv p;
  p.c = c;
  p.in_h = in_h;
  p.in_w = in_w;
  p.k_h = p.k_w = k;
  p.s_h = p.s_w = s;
  p.d_h = p.d_w = d;
  p.p_h = p.p_w = (k - 1) * d / 2;
  p.out_h = out_size(in_h, k, s, d, p.p_h, p.p_h);
  p.out_w = out_size(in_w, k, s, d, p.p_w, p.p_w);
  return p;
}

// "Same" padding, as the mobile and segmentation families use it: kernels
// 3/5/7, strides 1/2, dilations 1/2/4, maps from 1x1 to wider than a vector
// step, odd and even, channel counts off the vector width.
TEST_P(DepthwiseConvIsaTest, SamePaddingKernelsStridesDilations) {
  std::mt19937 rng(23);
  const int64_t maps[][2] = {{1, 1}, {2, 3}, {7, 7}, {9, 5}, {14, 14}, {13, 17}, {28, 28}, {5, 33}, {40, 19}};
  int n = 0;
  for (int64_t k : {3, 5, 7})
    for (int64_t s : {1, 2})
      for (int64_t d : {1, 2, 4}) {
        if (s == 2 && d > 1) continue;
        for (const auto& hw : maps) {
          DepthwiseConv p = same_geometry(3 + (n++ % 3) * 2, hw[0], hw[1], k, s, d);
          if (p.out_h <= 0 || p.out_w <= 0) continue;
          check(p, rng, "k " + std::to_string(k) + " s " + std::to_string(s) + " d " + std::to_string(d) + " map " +
                            std::to_string(hw[0]) + "x" + std::to_string(hw[1]));
        }
      }
}

// A tap that falls outside a row reads a neighbour (the row before or after,
// or the next phase plane) and is masked off: Inf and NaN there must not
// reach outputs whose windows do not cover them.
TEST_P(DepthwiseConvIsaTest, MaskedNeighboursDoNotLeak) {
  for (int64_t s : {1, 2}) {
    DepthwiseConv p = same_geometry(2, 6, 6, 3, s, 1);
    std::vector<float> x(static_cast<size_t>(p.c * 36), 1.f), w(static_cast<size_t>(p.c * 9), 1.f);
    x[5] = std::numeric_limits<float>::infinity();  // channel 0, row 0, last column
    x[6] = std::numeric_limits<float>::quiet_NaN();  // channel 0, row 1, first column
    std::vector<float> y(static_cast<size_t>(p.c * p.out_h * p.out_w));
    depthwise_conv_f32(p, x.data(), w.data(), nullptr, y.data(), nullptr);
    for (int64_t oh = 0; oh < p.out_h; ++oh)
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const int64_t r0 = oh * s - 1, c0 = ow * s - 1;
        const bool sees_inf = r0 <= 0 && 0 <= r0 + 2 && c0 <= 5 && 5 <= c0 + 2;
        const bool sees_nan = r0 <= 1 && 1 <= r0 + 2 && c0 <= 0 && 0 <= c0 + 2;
        const float v = y[static_cast<size_t>(oh * p.out_w + ow)];
        if (sees_nan) {
          EXPECT_TRUE(std::isnan(v)) << "s " << s << " at " << oh << "," << ow;
        } else if (sees_inf) {
          EXPECT_TRUE(std::isinf(v)) << "s " << s << " at " << oh << "," << ow;
        } else {
          EXPECT_TRUE(std::isfinite(v)) << "s " << s << " at " << oh << "," << ow << ": " << v;
        }
      }
    for (int64_t i = p.out_h * p.out_w; i < static_cast<int64_t>(y.size()); ++i)
      EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(i)])) << "channel 1, s " << s;
  }
}

}  // namespace
}  // namespace kiln::kernels

namespace kiln::kernels {
namespace {


// The row kernels over their parameter space: k_h 3/5/7 with any k_w,
// row strides 1/2 with column strides 1/2/3, "same" and uneven explicit
// pads, widths around the vector widths (8, 16) and the blocks (32, 64),
// heights that leave partial blocks of rows, odd channel counts, depth
// multipliers, two images; for each ISA, 1..3 threads, every epilogue.
TEST(DepthwiseConvTest, RowKernelsMatchNaive) {
  std::mt19937 rng(24);
  const int64_t widths[] = {8, 9, 15, 16, 17, 23, 31, 33, 47, 56, 63, 65, 80, 112, 113};
  int run = 0;
  for (int isa : {1, 2}) {
    ForcedIsa forced(isa);
    if (!forced.ok) continue;
    int n = 0;
    for (int64_t k_h : {3, 5, 7})
      for (int64_t s_h : {1, 2})
        for (int64_t s_w : {1, 2, 3}) {
          DepthwiseConv p;
          p.n = 1 + n % 2;
          p.c = 1 + (n * 2) % 5;
          p.mult = n % 4 == 3 ? 2 : 1;
          p.k_h = k_h;
          p.k_w = n % 3 == 0 ? k_h : 1 + (n * 5) % 7;
          p.s_h = s_h;
          p.s_w = s_w;
          p.p_h = n % 2 == 0 ? k_h / 2 : (n * 3) % (k_h + 1);
          p.p_w = n % 2 == 0 ? p.k_w / 2 : (n * 7) % (p.k_w + 1);
          const int64_t pe_h = n % 2 == 0 ? k_h / 2 : n % (k_h + 1), pe_w = n % 2 == 0 ? p.k_w / 2 : (n * 5) % (p.k_w + 1);
          const int64_t out_w = widths[static_cast<size_t>(n) % std::size(widths)];
          p.in_w = (out_w - 1) * s_w + p.k_w - p.p_w - pe_w + (n % 2);
          p.in_h = 1 + (n * 11) % 30;
          p.out_h = out_size(p.in_h, p.k_h, p.s_h, 1, p.p_h, pe_h);
          p.out_w = out_size(p.in_w, p.k_w, p.s_w, 1, p.p_w, pe_w);
          ++n;
          if (p.in_w < 1 || p.out_h <= 0 || p.out_w <= 0) continue;
          ASSERT_TRUE(depthwise_rows_applies(p)) << "case " << n << ": out_w " << p.out_w;
          check(p, rng, "isa " + std::to_string(isa) + " k " + std::to_string(p.k_h) + "x" + std::to_string(p.k_w) +
                            " s " + std::to_string(s_h) + "," + std::to_string(s_w) + " in " + std::to_string(p.in_h) +
                            "x" + std::to_string(p.in_w) + " out_w " + std::to_string(p.out_w));
          ++run;
        }
    for (int64_t width : widths) {  // "same" 3x3 and 5x5, strides 1 and 2, every width
      const int64_t k = 3 + 2 * (width % 2), s = 1 + width % 3 % 2;
      DepthwiseConv p = same_geometry(3, 9, width * s, k, s, 1);
      ASSERT_TRUE(depthwise_rows_applies(p));
      check(p, rng, "isa " + std::to_string(isa) + " same k " + std::to_string(k) + " s " + std::to_string(s) +
                        " width " + std::to_string(width));
      ++run;
    }
  }
  if (run == 0) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
}

// The row kernels read padding from zeroed phase columns and run whole
// vectors past the row's end: Inf and NaN in the input reach exactly the
// outputs whose windows cover them, at every width and stride.
TEST(DepthwiseConvTest, RowKernelsKeepNanAndInfInTheirWindows) {
  int run = 0;
  for (int isa : {1, 2}) {
    ForcedIsa forced(isa);
    if (!forced.ok) continue;
    for (int64_t s : {1, 2})
      for (int64_t k : {3, 5})
        for (int64_t width : {17, 40}) {
          DepthwiseConv p = same_geometry(2, 12, width, k, s, 1);
          ASSERT_TRUE(depthwise_rows_applies(p));
          std::vector<float> x(static_cast<size_t>(p.c * p.in_h * p.in_w), 1.f), w(static_cast<size_t>(p.c * k * k), 1.f);
          const int64_t inf_at = 3 * p.in_w + p.in_w - 1, nan_at = 7 * p.in_w;  // channel 0: a last and a first column
          x[static_cast<size_t>(inf_at)] = std::numeric_limits<float>::infinity();
          x[static_cast<size_t>(nan_at)] = std::numeric_limits<float>::quiet_NaN();
          std::vector<float> y(static_cast<size_t>(p.c * p.out_h * p.out_w));
          depthwise_conv_f32(p, x.data(), w.data(), nullptr, y.data(), nullptr);
          for (int64_t oh = 0; oh < p.out_h; ++oh)
            for (int64_t ow = 0; ow < p.out_w; ++ow) {
              auto covers = [&](int64_t at) {
                const int64_t r = at / p.in_w - (oh * s - p.p_h), c = at % p.in_w - (ow * s - p.p_w);
                return r >= 0 && r < k && c >= 0 && c < k;
              };
              const float v = y[static_cast<size_t>(oh * p.out_w + ow)];
              const std::string where = "isa " + std::to_string(isa) + " s " + std::to_string(s) + " k " +
                                        std::to_string(k) + " width " + std::to_string(width) + " at " +
                                        std::to_string(oh) + "," + std::to_string(ow);
              if (covers(nan_at)) {
                EXPECT_TRUE(std::isnan(v)) << where;
              } else if (covers(inf_at)) {
                EXPECT_TRUE(std::isinf(v)) << where;
              } else {
                EXPECT_TRUE(std::isfinite(v)) << where << ": " << v;
              }
            }
          for (size_t i = static_cast<size_t>(p.out_h * p.out_w); i < y.size(); ++i)
            EXPECT_TRUE(std::isfinite(y[i])) << "channel 1";
          ++run;
        }
  }
  if (run == 0) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
}

}  // namespace
}  // namespace kiln::kernels

namespace kiln::kernels {
namespace {

// The channel-packed kernels over their parameter space: kernels 1..7 (not
// square too), strides 1..3, "same" and uneven pads, maps from 1x1 to the
// widest they take, channel counts around the lane counts (8, 16) so the
// last group is partial, two images; for each ISA, 1..3 threads, every
// epilogue.
TEST(DepthwiseConvTest, PackedKernelsMatchNaive) {
  std::mt19937 rng(25);
  const int64_t channels[] = {1, 3, 7, 8, 9, 15, 16, 17, 33};
  const int64_t maps[] = {1, 2, 5, 7, 9, 14, 17, 20};
  int run = 0, isas = 0;
  for (int isa : {1, 2}) {
    ForcedIsa forced(isa);
    if (!forced.ok) continue;
    ++isas;
    int n = 0;
    for (int64_t k_h : {1, 3, 5, 7})
      for (int64_t s : {1, 2, 3})
        for (int64_t m : maps) {
          DepthwiseConv p;
          p.n = 1 + n % 2;
          p.c = channels[static_cast<size_t>(n) % std::size(channels)];
          p.k_h = k_h;
          p.k_w = n % 3 == 0 ? 1 + (n * 5) % 7 : k_h;
          p.s_h = s;
          p.s_w = 1 + (s + n) % 3;
          p.p_h = n % 2 == 0 ? p.k_h / 2 : (n * 3) % (p.k_h + 1);
          p.p_w = n % 2 == 0 ? p.k_w / 2 : (n * 7) % (p.k_w + 1);
          const int64_t pe_h = n % 2 == 0 ? p.k_h / 2 : n % (p.k_h + 1), pe_w = n % 2 == 0 ? p.k_w / 2 : (n * 5) % (p.k_w + 1);
          p.in_h = m + (n % 3);
          p.in_w = m;
          p.out_h = out_size(p.in_h, p.k_h, p.s_h, 1, p.p_h, pe_h);
          p.out_w = out_size(p.in_w, p.k_w, p.s_w, 1, p.p_w, pe_w);
          ++n;
          if (p.out_h <= 0 || p.out_w <= 0) continue;
          ASSERT_TRUE(depthwise_packed_applies(p)) << "case " << n;
          check(p, rng, "isa " + std::to_string(isa) + " c " + std::to_string(p.c) + " k " + std::to_string(p.k_h) +
                            "x" + std::to_string(p.k_w) + " s " + std::to_string(p.s_h) + "," + std::to_string(p.s_w) +
                            " in " + std::to_string(p.in_h) + "x" + std::to_string(p.in_w));
          ++run;
        }
  }
  if (run == 0) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
  EXPECT_GT(run, 45 * isas);  // 95 cases per ISA level run (KILN_CPU_ISA may cap it to one)
}

// Channels share vectors in the packed kernels: Inf and NaN in one channel
// reach only that channel's outputs whose windows cover them.
TEST(DepthwiseConvTest, PackedKernelsKeepNanAndInfInTheirChannel) {
  int run = 0;
  for (int isa : {1, 2}) {
    ForcedIsa forced(isa);
    if (!forced.ok) continue;
    for (int64_t s : {1, 2}) {
      DepthwiseConv p = same_geometry(19, 7, 7, 3, s, 1);
      ASSERT_TRUE(depthwise_packed_applies(p));
      std::vector<float> x(static_cast<size_t>(p.c * 49), 1.f), w(static_cast<size_t>(p.c * 9), 1.f);
      x[5 * 49 + 6] = std::numeric_limits<float>::infinity();    // channel 5, row 0, last column
      x[16 * 49 + 7] = std::numeric_limits<float>::quiet_NaN();  // channel 16, row 1, first column
      std::vector<float> y(static_cast<size_t>(p.c * p.out_h * p.out_w));
      depthwise_conv_f32(p, x.data(), w.data(), nullptr, y.data(), nullptr);
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t oh = 0; oh < p.out_h; ++oh)
          for (int64_t ow = 0; ow < p.out_w; ++ow) {
            const int64_t r0 = oh * s - 1, c0 = ow * s - 1;
            const bool sees_inf = c == 5 && r0 <= 0 && 0 <= r0 + 2 && c0 <= 6 && 6 <= c0 + 2;
            const bool sees_nan = c == 16 && r0 <= 1 && 1 <= r0 + 2 && c0 <= 0 && 0 <= c0 + 2;
            const float v = y[static_cast<size_t>((c * p.out_h + oh) * p.out_w + ow)];
            const std::string where = "isa " + std::to_string(isa) + " s " + std::to_string(s) + " channel " +
                                      std::to_string(c) + " at " + std::to_string(oh) + "," + std::to_string(ow);
            if (sees_nan) {
              EXPECT_TRUE(std::isnan(v)) << where;
            } else if (sees_inf) {
              EXPECT_TRUE(std::isinf(v)) << where;
            } else {
              EXPECT_TRUE(std::isfinite(v)) << where << ": " << v;
            }
          }
      ++run;
    }
  }
  if (run == 0) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
}

}  // namespace
}  // namespace kiln::kernels
