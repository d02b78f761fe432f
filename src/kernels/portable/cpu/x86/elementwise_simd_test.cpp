// Accuracy of the float32 approximations in elementwise_simd.cpp, measured in
// ulps against double-precision libm over a sweep of float bit patterns.
#include "kernels/portable/cpu/x86/elementwise_simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/float16.h"

namespace kiln::kernels::simd {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Distance in ulps between two floats of the same sign (or zero).
int64_t ulps(float a, float b) {
  if (a == b) return 0;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = INT32_MIN - ia;
  if (ib < 0) ib = INT32_MIN - ib;
  return std::llabs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

// Every 509th float bit pattern whose value lies in [lo, hi], both signs.
std::vector<float> sweep(float lo, float hi) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 509) {
    const float f = from_bits(static_cast<uint32_t>(b));
    if (f >= lo && f <= hi) x.push_back(f);
  }
  return x;
}

struct Worst {
  int64_t ulps = 0;
  float at = 0;
};

template <class Fn, class Ref>
Worst worst_ulps(const std::vector<float>& x, Fn fn, Ref ref) {
  std::vector<float> y(x.size());
  fn(x.data(), y.data(), static_cast<int64_t>(x.size()));
  Worst w;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(ref(static_cast<double>(x[i])));
    const int64_t u = ulps(y[i], want);
    if (u > w.ulps) w = {u, x[i]};
  }
  return w;
}

TEST(ElementwiseSimdTest, ExpWithinTwoUlpsOverNormalResults) {
  Worst w = worst_ulps(sweep(-87.3f, 88.7f), exp_f32, [](double v) { return std::exp(v); });
  EXPECT_LE(w.ulps, 2) << "at " << w.at;
}

TEST(ElementwiseSimdTest, TanhWithinThreeUlps) {
  Worst w = worst_ulps(sweep(-10.f, 10.f), tanh_f32, [](double v) { return std::tanh(v); });
  EXPECT_LE(w.ulps, 3) << "at " << w.at;
}

TEST(ElementwiseSimdTest, SigmoidWithinThreeUlps) {
  Worst w = worst_ulps(sweep(-80.f, 30.f), sigmoid_f32, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  EXPECT_LE(w.ulps, 3) << "at " << w.at;
}

TEST(ElementwiseSimdTest, ErfWithinFourUlps) {
  Worst w = worst_ulps(sweep(-5.f, 5.f), erf_f32, [](double v) { return std::erf(v); });
  EXPECT_LE(w.ulps, 4) << "at " << w.at;
}

// The one-pass Gelu loops against the formulas in double: absolute error
// within 2e-7 * max(1, |x|) (the sum 1 + erf loses relative precision for
// large negative x, where Gelu itself is tiny), in place too.
TEST(ElementwiseSimdTest, GeluBothFormsMatchDoubleAndRunInPlace) {
  const double kBeta = 0.7978845608028654;
  auto erf_form = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  auto tanh_form = [&](double v) { return 0.5 * v * (1 + std::tanh(kBeta * (v + 0.044715 * v * v * v))); };
  const std::vector<float> x = sweep(-12.f, 12.f);
  for (int form = 0; form < 2; ++form) {
    std::vector<float> y(x.size()), z = x;
    if (form == 0) gelu_f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
    else gelu_tanh_f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
    if (form == 0) gelu_f32(z.data(), z.data(), static_cast<int64_t>(z.size()));
    else gelu_tanh_f32(z.data(), z.data(), static_cast<int64_t>(z.size()));
    double worst = 0;
    float at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = form == 0 ? erf_form(x[i]) : tanh_form(x[i]);
      const double err = std::fabs(y[i] - want) / std::max(1.0, std::fabs(static_cast<double>(x[i])));
      if (err > worst) worst = err, at = x[i];
      ASSERT_EQ(y[i], z[i]) << "in place differs at " << x[i];
    }
    EXPECT_LE(worst, 2e-7) << "form " << form << " at " << at;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> s = {nan, inf, -inf, 0.f}, o(4);
  gelu_f32(s.data(), o.data(), 4);
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_EQ(o[1], inf);
  EXPECT_EQ(o[3], 0.f);
  gelu_tanh_f32(s.data(), o.data(), 4);
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_EQ(o[1], inf);
  EXPECT_EQ(o[3], 0.f);
}

TEST(ElementwiseSimdTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {inf, -inf, nan, 0.0f, -0.0f, 1e30f, -1e30f};
  std::vector<float> y(x.size());
  exp_f32(x.data(), y.data(), 7);
  EXPECT_EQ(y[0], inf);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 1.0f);
  EXPECT_EQ(y[5], inf);
  EXPECT_EQ(y[6], 0.0f);
  tanh_f32(x.data(), y.data(), 7);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_TRUE(y[4] == 0.0f && std::signbit(y[4]));
  erf_f32(x.data(), y.data(), 7);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_TRUE(y[4] == 0.0f && std::signbit(y[4]));
  sigmoid_f32(x.data(), y.data(), 7);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(y[3], 0.5f);
}

TEST(ElementwiseSimdTest, HalfConversionsMatchScalarCode) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4093) x.push_back(from_bits(static_cast<uint32_t>(b)));
  x.push_back(from_bits(0x7f800001u));  // signalling NaN
  x.push_back(65520.0f);                // rounds to inf
  x.push_back(5.9604645e-8f);           // smallest subnormal half
  std::vector<uint16_t> h(x.size());
  f32_to_f16(x.data(), h.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], Float16::from_float(x[i])) << "float bits index " << i;
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> back(all.size());
  f16_to_f32(all.data(), back.data(), 65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    const float want = Float16::to_float(all[i]);
    if (std::isnan(want)) {  // F16C quiets signalling NaNs; any NaN will do
      ASSERT_TRUE(std::isnan(back[i])) << "half bits " << i;
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &back[i], 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << "half bits " << i;
  }
}

TEST(ElementwiseSimdTest, PowHalfMatchesPow) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-inf, -4.f, -0.f, 0.f, 1e-40f, 2.f, 9.f, inf, 0.25f, 3.f};
  std::vector<float> y(x.size());
  pow_half_f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = std::pow(x[i], 0.5f);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(y[i])) << x[i];
    } else {
      EXPECT_EQ(y[i], want) << x[i];
      EXPECT_EQ(std::signbit(y[i]), std::signbit(want)) << x[i];
    }
  }
}

TEST(ElementwiseSimdTest, ArithmeticModesAndInPlace) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, b = {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 4};
  std::vector<float> o(a.size());
  arith_f32(Arith::kDiv, a.data(), 1, b.data(), 1, o.data(), 11);
  EXPECT_EQ(o[10], 2.75f);
  arith_f32(Arith::kSub, a.data(), 0, b.data(), 1, o.data(), 11);  // 1 - b
  EXPECT_EQ(o[0], -1.0f);
  EXPECT_EQ(o[10], -3.0f);
  arith_f32(Arith::kDiv, a.data(), 1, b.data() + 10, 0, o.data(), 11);  // a / 4
  EXPECT_EQ(o[10], 2.75f);
  arith_f32(Arith::kMul, a.data(), 1, a.data(), 1, a.data(), 11);  // in place
  EXPECT_EQ(a[10], 121.0f);
}

// HardSigmoid / HardSwish loops match the scalar formulas within 2 ulps (the
// vector clones may fuse the multiply-add), for lengths that cover vector
// bodies and tails, NaN, infinities and the clamp edges included.
class HardActivationTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(HardActivationTest, MatchesScalarFormula) {
  const int64_t n = GetParam();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -3.f, 3.f, -0.f, 0.f, 2.5f, -2.5f};
  std::vector<float> x(static_cast<size_t>(n)), y(x.size()), z(x.size());
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = i % 4 == 0 ? specials[(i / 4) % 9] : 0.37f * static_cast<float>(i - n / 2);
  auto same = [](float a, float b) { return (std::isnan(a) && std::isnan(b)) || ulps(a, b) <= 2; };
  hard_sigmoid_f32(x.data(), y.data(), n, 0.2f, 0.5f);
  hard_swish_f32(x.data(), z.data(), n);
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = 0.2f * x[i] + 0.5f;
    EXPECT_TRUE(same(y[i], v < 0.f ? 0.f : (v > 1.f ? 1.f : v))) << x[i];
    const float w = x[i] * (1.0f / 6.0f) + 0.5f;
    EXPECT_TRUE(same(z[i], x[i] * (w < 0.f ? 0.f : (w > 1.f ? 1.f : w)))) << x[i];
  }
  hard_swish_f32(x.data(), x.data(), n);  // in place
  for (size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(same(x[i], z[i]));
}

INSTANTIATE_TEST_SUITE_P(Lengths, HardActivationTest, ::testing::Values(0, 1, 7, 8, 15, 16, 17, 33, 40));

}  // namespace
}  // namespace kiln::kernels::simd
