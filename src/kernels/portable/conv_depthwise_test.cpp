// The depthwise kernel against a naive loop over random geometries: kernel
// sizes 1..7, strides 1..3, dilations 1..3, uneven pads, depth multipliers,
// 1-D, maps from 1x1 to wider than one vector step, one and two threads.
#include "kernels/portable/conv_depthwise.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

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

void check(const DepthwiseConv& p, std::mt19937& rng, const std::string& what) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto fill = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& e : v) e = u(rng);
    return v;
  };
  const int64_t m = p.c * p.mult;
  const std::vector<float> x = fill(p.n * p.c * p.in_h * p.in_w), w = fill(m * p.k_h * p.k_w), b = fill(m);
  for (bool with_bias : {false, true}) {
    const std::vector<float> want = naive(p, x, w, with_bias ? &b : nullptr);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      std::vector<float> y(want.size(), -7.f);
      depthwise_conv_f32(p, x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), &pool);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], want[i], 1e-5) << what << " bias " << with_bias << " threads " << threads << " at " << i;
    }
  }
}

// Output size for pads (begin, end), as ONNX computes it; 0 when empty.
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
  const int64_t span = (k - 1) * d + 1;
  return in + pb + pe < span ? 0 : (in + pb + pe - span) / s + 1;
}

TEST(DepthwiseConvTest, MatchesNaiveOverGeometries) {
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

TEST(DepthwiseConvTest, EfficientNetAndMobileNetShapes) {
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
