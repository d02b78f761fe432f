#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using namespace kiln::testing;

Tensor cast(const Tensor& x, DType to, int opset = 13) {
  return run_ok("Cast", {x}, {attr("to", static_cast<int64_t>(to))}, opset);
}

TEST(CastTest, FloatToStringIsShortestRoundTrip) {
  // Values and expected text from ONNX's test_cast_FLOAT_to_STRING.
  const std::vector<float> x = {0.9767611f, 0.6048455f, 0.039187793f, 0.064147495f, 0.6924721f};
  Tensor y = cast(f32(x), DType::kString);
  EXPECT_EQ(vals<std::string>(y),
            (std::vector<std::string>{"0.9767611", "0.6048455", "0.039187793", "0.064147495", "0.6924721"}));
}

TEST(CastTest, FloatToStringFormats) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor y = cast(f32({3.f, -0.f, 1e-5f, 1.5e16f, 1e16f, 123456.5f, 0.0001f, -2.5e-7f, std::nanf(""), inf, -inf}),
                  DType::kString);
  EXPECT_EQ(vals<std::string>(y), (std::vector<std::string>{"3.0", "-0.0", "1e-05", "1.5e+16", "1e+16", "123456.5",
                                                              "0.0001", "-2.5e-07", "NaN", "INF", "-INF"}));
  Tensor d = cast(make<double>({0.1, 1.0 / 3}, {2}), DType::kString);
  EXPECT_EQ(vals<std::string>(d), (std::vector<std::string>{"0.1", "0.3333333333333333"}));
  Tensor h = cast(make<Float16>({Float16(0.1f), Float16(1000.f)}, {2}), DType::kString);
  EXPECT_EQ(vals<std::string>(h), (std::vector<std::string>{"0.1", "1000.0"}));
  Tensor i = cast(make<int64_t>({-42, 7}, {2}), DType::kString);
  EXPECT_EQ(vals<std::string>(i), (std::vector<std::string>{"-42", "7"}));
}

TEST(CastTest, StringToFloatParsesSpecialLiterals) {
  Tensor y = cast(strs({"0.47892547", "1e-5", "1E8", " 2.5 ", "NaN", "INF", "+INF", "-INF", "-inf", "1e999"}, {10}),
                  DType::kFloat32);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = vals<float>(y);
  EXPECT_EQ(v[0], 0.47892547f);
  EXPECT_EQ(v[1], 1e-5f);
  EXPECT_EQ(v[2], 1e8f);
  EXPECT_EQ(v[3], 2.5f);
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(v[5], inf);
  EXPECT_EQ(v[6], inf);
  EXPECT_EQ(v[7], -inf);
  EXPECT_EQ(v[8], -inf);
  EXPECT_EQ(v[9], inf);
}

TEST(CastTest, StringToIntegerAndBool) {
  EXPECT_EQ(vals<int32_t>(cast(strs({"1000", "-7", "100.5", "+3"}, {4}), DType::kInt32)),
            (std::vector<int32_t>{1000, -7, 100, 3}));
  EXPECT_EQ(bool_values(cast(strs({"0", "2", "true", "False"}, {4}), DType::kBool)),
            (std::vector<bool>{false, true, true, false}));
}

TEST(CastTest, BadStringIsAnError) {
  std::string e = run_error("Cast", {strs({"1", "Hello"}, {2})}, {attr("to", static_cast<int64_t>(DType::kFloat32))});
  EXPECT_NE(e.find("Hello"), std::string::npos) << e;
}

TEST(CastTest, DoubleToHalfRoundsOnce) {
  // 1 + 2^-11 + 2^-40 is just above the midpoint between two halves; through
  // float it would become the exact midpoint and round down to even.
  const double d = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  Tensor y = cast(make<double>({d, 0.15896958}, {2}), DType::kFloat16);
  EXPECT_EQ(y.data<Float16>()[0].bits, 0x3C01);
  EXPECT_EQ(y.data<Float16>()[1].bits, Float16(0.15896958f).bits);
  // Same for bfloat16: 1 + 2^-8 + 2^-40 must round up to 1 + 2^-7.
  const double b = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  Tensor z = cast(make<double>({b}, {1}), DType::kBFloat16);
  EXPECT_EQ(z.data<BFloat16>()[0].bits, 0x3F81);
}

TEST(CastTest, FloatToBfloat16TruncatesBeforeOpset19) {
  // 0x3ef5eeb0: the low half is above the midpoint.
  float f;
  const uint32_t bits = 0x3ef5eeb0u;
  std::memcpy(&f, &bits, 4);
  const float nan_low_bits = std::nanf("1");  // payload only in the low 16 bits
  Tensor t = cast(f32({f, nan_low_bits}), DType::kBFloat16, 13);
  EXPECT_EQ(t.data<BFloat16>()[0].bits, 0x3ef5);
  EXPECT_TRUE(std::isnan(static_cast<float>(t.data<BFloat16>()[1])));
  Tensor r = cast(f32({f}), DType::kBFloat16, 19);
  EXPECT_EQ(r.data<BFloat16>()[0].bits, 0x3ef6);
}

TEST(CastTest, FloatToBfloat16RoundsToNearestEvenFromOpset19) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65521) {
    float f;
    const auto bits = static_cast<uint32_t>(b);
    std::memcpy(&f, &bits, 4);
    x.push_back(f);
  }
  Tensor y = cast(f32(x), DType::kBFloat16, 19);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(static_cast<float>(y.data<BFloat16>()[i])));
    } else {
      ASSERT_EQ(y.data<BFloat16>()[i].bits, BFloat16(x[i]).bits) << x[i];
    }
  }
}

TEST(CastTest, FloatToIntegerTruncatesAndWraps) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vals<int32_t>(cast(f32({1.9f, -1.9f, nan, 3e9f}), DType::kInt32)),
            (std::vector<int32_t>{1, -1, 0, static_cast<int32_t>(static_cast<int64_t>(3e9))}));
  EXPECT_EQ(vals<uint8_t>(cast(f32({-1.f, 255.f, 256.f}), DType::kUInt8)), (std::vector<uint8_t>{255, 255, 0}));
  EXPECT_EQ(vals<uint64_t>(cast(f32({1.8e19f}), DType::kUInt64))[0], static_cast<uint64_t>(1.8e19f));
}

TEST(CastTest, BoolConversions) {
  EXPECT_EQ(bool_values(cast(f32({0.f, -0.f, 0.5f, std::nanf("")}), DType::kBool)),
            (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(bool_values(cast(make<int64_t>({0, 36}, {2}), DType::kBool)), (std::vector<bool>{false, true}));
  expect_floats(cast(bools({true, false}, {2}), DType::kFloat16), {1, 0});
  EXPECT_EQ(vals<int8_t>(cast(bools({true, false}, {2}), DType::kInt8)), (std::vector<int8_t>{1, 0}));
}

TEST(CastTest, IntegerNarrowingWraps) {
  EXPECT_EQ(vals<int8_t>(cast(make<int32_t>({300, -129}, {2}), DType::kInt8)), (std::vector<int8_t>{44, 127}));
  EXPECT_EQ(vals<uint32_t>(cast(make<int64_t>({-1}, {1}), DType::kUInt32))[0], 0xFFFFFFFFu);
}

TEST(CastTest, HalfBfloatAndFloatRoundTrips) {
  Tensor h = cast(f32({1.f / 3, 65504.f, 70000.f}), DType::kFloat16);
  EXPECT_EQ(h.data<Float16>()[0].bits, Float16(1.f / 3).bits);
  EXPECT_EQ(static_cast<float>(h.data<Float16>()[1]), 65504.f);
  EXPECT_TRUE(std::isinf(static_cast<float>(h.data<Float16>()[2])));
  Tensor b = cast(h, DType::kBFloat16);
  EXPECT_EQ(b.data<BFloat16>()[0].bits, BFloat16(static_cast<float>(Float16(1.f / 3))).bits);
  Tensor d = cast(make<BFloat16>({BFloat16(1.5f)}, {1}), DType::kFloat64);
  EXPECT_EQ(vals<double>(d)[0], 1.5);
}

TEST(CastTest, LegacyStringToAttribute) {
  Tensor y = run_ok("Cast", {make<int32_t>({3}, {1})}, {attr("to", "FLOAT")}, 1);
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  expect_floats(y, {3});
}

TEST(CastTest, BadToAttributeIsAnError) {
  run_error("Cast", {f32({1})}, {attr("to", static_cast<int64_t>(99))});
  run_error("Cast", {f32({1})}, {attr("to", static_cast<int64_t>(DType::kComplex64))});
  run_error("Cast", {f32({1})}, {});
}

TEST(CastTest, CastLikeTakesTheSecondInputsDtype) {
  Tensor y = run_ok("CastLike", {f32({1.5f, 2.f}), make<double>({0}, {1})}, {}, 15);
  EXPECT_EQ(y.dtype(), DType::kFloat64);
  expect_floats(y, {1.5, 2});
  Tensor s = run_ok("CastLike", {strs({"1.25"}, {1}), f32({0})}, {}, 15);
  expect_floats(s, {1.25});
}

TEST(CastTest, SameTypeCopies) {
  Tensor y = cast(strs({"x", "y"}, {2}), DType::kString);
  EXPECT_EQ(vals<std::string>(y), (std::vector<std::string>{"x", "y"}));
}

}  // namespace
}  // namespace kiln
