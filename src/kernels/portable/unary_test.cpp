#include <cmath>
#include <limits>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(UnaryTest, AbsNegSignOnFloats) {
  expect_floats(run_ok("Abs", {f32({-1.5f, 0.f, 2.f, -kInf})}), {1.5, 0, 2, kInf});
  expect_floats(run_ok("Neg", {f32({-1.5f, 0.f, 2.f})}), {1.5, 0, -2});
  expect_floats(run_ok("Sign", {f32({-3.f, 0.f, 0.5f, kNaN})}), {-1, 0, 1, kNaN});
}

TEST(UnaryTest, IntegerAbsNegSign) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(vals<int32_t>(run_ok("Abs", {make<int32_t>({-5, 7, mn}, {3})})), (std::vector<int32_t>{5, 7, mn}));
  EXPECT_EQ(vals<int8_t>(run_ok("Neg", {make<int8_t>({-5, 7, -128}, {3})})), (std::vector<int8_t>{5, -7, -128}));
  EXPECT_EQ(vals<int64_t>(run_ok("Sign", {make<int64_t>({-9, 0, 4}, {3})})), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(vals<uint16_t>(run_ok("Sign", {make<uint16_t>({0, 9}, {2})})), (std::vector<uint16_t>{0, 1}));
  EXPECT_EQ(vals<uint8_t>(run_ok("Abs", {make<uint8_t>({200}, {1})})), (std::vector<uint8_t>{200}));
}

TEST(UnaryTest, SqrtReciprocalExpLog) {
  expect_floats(run_ok("Sqrt", {f32({4, 2, 0, -1, kInf})}), {2, std::sqrt(2.0), 0, kNaN, kInf});
  expect_floats(run_ok("Reciprocal", {f32({4, -0.5f})}), {0.25, -2});
  expect_floats(run_ok("Exp", {f32({0, 1, -1, 88.7f, 89.f, -87.f, -100.f, -104.f, kInf, -kInf, kNaN})}),
                {1, std::exp(1.0), std::exp(-1.0), std::exp(static_cast<double>(88.7f)), kInf, std::exp(-87.0),
                 std::exp(-100.0), 0, kInf, 0, kNaN},
                2e-7);
  expect_floats(run_ok("Log", {f32({1, std::exp(2.f), 0, -1})}), {0, 2, -kInf, kNaN});
}

TEST(UnaryTest, SqrtLongInputUsesVectorPathCorrectly) {
  std::vector<float> x(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 1.5f;
  Tensor y = run_ok("Sqrt", {f32(x)});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y.data<float>()[i], std::sqrt(x[i])) << i;
}

TEST(UnaryTest, ExpOfDenormalResults) {
  // e^-88 .. e^-103 are subnormal floats: within one subnormal step of the
  // correctly rounded value.
  const std::vector<float> x = {-88.f, -95.5f, -100.f, -103.f};
  Tensor y = run_ok("Exp", {f32(x)});
  const double step = std::ldexp(1.0, -149);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y.data<float>()[i], static_cast<float>(std::exp(static_cast<double>(x[i]))), step) << x[i];
  }
}

TEST(UnaryTest, ErfFloatAndInteger) {
  std::vector<float> x;
  for (float v = -5.f; v <= 5.f; v += 0.037f) x.push_back(v);
  Tensor y = run_ok("Erf", {f32(x)});
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y.data<float>()[i], std::erf(static_cast<double>(x[i])), 2e-7) << x[i];
  }
  expect_floats(run_ok("Erf", {make<double>({0.5}, {1})}), {std::erf(0.5)}, 1e-15);
  EXPECT_EQ(vals<int32_t>(run_ok("Erf", {make<int32_t>({0, 1, 9, -9}, {4})})),
            (std::vector<int32_t>{0, 0, 1, -1}));
}

TEST(UnaryTest, RoundingFunctions) {
  const std::vector<float> x = {0.1f, 0.5f, 0.9f, 1.5f, 2.5f, -1.5f, -2.5f, -2.8f};
  expect_floats(run_ok("Round", {f32(x)}), {0, 0, 1, 2, 2, -2, -2, -3});
  expect_floats(run_ok("Floor", {f32(x)}), {0, 0, 0, 1, 2, -2, -3, -3});
  expect_floats(run_ok("Ceil", {f32(x)}), {1, 1, 1, 2, 3, -1, -2, -2});
}

TEST(UnaryTest, TrigonometricAndHyperbolic) {
  const std::vector<float> x = {-0.9f, -0.2f, 0.f, 0.3f, 0.7f};
  struct Case {
    const char* op;
    double (*f)(double);
  };
  const Case cases[] = {{"Sin", std::sin},   {"Cos", std::cos},     {"Tan", std::tan},   {"Asin", std::asin},
                        {"Acos", std::acos}, {"Atan", std::atan},   {"Sinh", std::sinh}, {"Cosh", std::cosh},
                        {"Asinh", std::asinh}, {"Atanh", std::atanh}};
  for (const Case& c : cases) {
    std::vector<double> want;
    for (float v : x) want.push_back(c.f(v));
    SCOPED_TRACE(c.op);
    expect_floats(run_ok(c.op, {f32(x)}), want, 1e-6);
  }
  expect_floats(run_ok("Acosh", {f32({1.f, 2.f, 10.f})}), {0, std::acosh(2.0), std::acosh(10.0)}, 1e-6);
}

TEST(UnaryTest, HalfPrecisionGoesThroughFloat) {
  Tensor y = run_ok("Sqrt", {make<Float16>({Float16(9.f), Float16(2.f)}, {2})});
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  expect_floats(y, {3, static_cast<float>(Float16(std::sqrt(2.f)))}, 0);
}

TEST(UnaryTest, LongHalfInputsGoThroughFloatBlocks) {
  const int64_t n = 1300;
  std::vector<Float16> h(n);
  std::vector<BFloat16> b(n);
  for (int64_t i = 0; i < n; ++i) {
    h[i] = Float16(static_cast<float>(i) * 0.01f);
    b[i] = BFloat16(static_cast<float>(i) * 0.5f - 300.f);
  }
  Tensor sh = run_ok("Sqrt", {make<Float16>(h, {n})});
  Tensor eb = run_ok("Exp", {make<BFloat16>(b, {n})});
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(sh.data<Float16>()[i].bits, Float16(std::sqrt(static_cast<float>(h[i]))).bits) << i;
    const float want = std::exp(static_cast<float>(b[i]));
    if (std::isinf(want)) {
      ASSERT_EQ(static_cast<float>(eb.data<BFloat16>()[i]), want) << i;
    } else {
      ASSERT_NEAR(static_cast<float>(eb.data<BFloat16>()[i]), want, std::fabs(want) * 8e-3 + 1e-38) << i;
    }
  }
}

TEST(UnaryTest, UnsupportedDtypeIsAnError) {
  run_error("Sqrt", {make<int32_t>({4}, {1})});
  run_error("Neg", {make<uint8_t>({4}, {1})});
  run_error("Abs", {strs({"a"}, {1})});
}

}  // namespace
}  // namespace kiln
