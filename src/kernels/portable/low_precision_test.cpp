// Low-precision element conversions (float8, float4, int4, int2).
#include "kernels/portable/util/low_precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::kernels {
namespace {

TEST(LowPrecisionTest, Float8E4M3FNRoundsSaturatesAndKeepsNaN) {
  const DType t = DType::kFloat8E4M3FN;
  EXPECT_EQ(lp_encode(t, 448.0, true), 0x7e);
  EXPECT_EQ(lp_encode(t, 1e6, true), 0x7e);     // saturates to 448
  EXPECT_EQ(lp_encode(t, 1e6, false), 0x7f);    // NaN without saturation
  EXPECT_EQ(lp_encode(t, -1e6, false), 0xff);
  EXPECT_EQ(lp_encode(t, INFINITY, true), 0x7e);
  EXPECT_EQ(lp_encode(t, std::nan(""), true), 0x7f);
  EXPECT_EQ(lp_encode(t, -1e-7, true), 0x80);   // -0
  EXPECT_EQ(lp_encode(t, 0.5, true), 0x30);
  EXPECT_EQ(lp_encode(t, 0.47892547, true), 47);  // from ONNX's test_cast_FLOAT_to_FLOAT8E4M3FN
  EXPECT_DOUBLE_EQ(lp_decode(t, 0x7e), 448.0);
  EXPECT_TRUE(std::isnan(lp_decode(t, 0x7f)));
  EXPECT_DOUBLE_EQ(lp_decode(t, 0x01), std::ldexp(1.0, -9));  // smallest subnormal
}

TEST(LowPrecisionTest, FnuzTypesHaveNoNegativeZeroAndOneNaN) {
  EXPECT_EQ(lp_encode(DType::kFloat8E5M2FNUZ, -1e-7, true), 0x00);
  EXPECT_EQ(lp_encode(DType::kFloat8E5M2FNUZ, std::nan(""), true), 0x80);
  EXPECT_EQ(lp_encode(DType::kFloat8E4M3FNUZ, 1e6, false), 0x80);
  EXPECT_TRUE(std::isnan(lp_decode(DType::kFloat8E4M3FNUZ, 0x80)));
  EXPECT_DOUBLE_EQ(lp_decode(DType::kFloat8E4M3FNUZ, 0x7f), 240.0);
}

TEST(LowPrecisionTest, Float8E5M2HasInfinity) {
  EXPECT_EQ(lp_encode(DType::kFloat8E5M2, 1e6, false), 0x7c);
  EXPECT_EQ(lp_encode(DType::kFloat8E5M2, 1e6, true), 0x7b);
  EXPECT_TRUE(std::isinf(lp_decode(DType::kFloat8E5M2, 0xfc)));
  EXPECT_DOUBLE_EQ(lp_decode(DType::kFloat8E5M2, 0x7b), 57344.0);
}

TEST(LowPrecisionTest, Float4E2M1TiesToEvenAndSaturates) {
  const DType t = DType::kFloat4E2M1;
  EXPECT_EQ(lp_encode(t, 0.25, true), 0x0);  // tie between 0 and 0.5: even
  EXPECT_EQ(lp_encode(t, -3.5, true), 0xe);  // tie between 3 and 4: even (4)
  EXPECT_EQ(lp_encode(t, 9.0, true), 0x7);   // 6
  EXPECT_DOUBLE_EQ(lp_decode(t, 0x5), 3.0);
}

TEST(LowPrecisionTest, IntegersWrapInCastAndClampInQuantize) {
  EXPECT_EQ(static_cast<int8_t>(lp_encode(DType::kInt4, -9, true)), 7);
  EXPECT_EQ(static_cast<int8_t>(lp_encode(DType::kInt4, 8, true)), -8);
  EXPECT_EQ(lp_encode(DType::kUInt2, -3, true), 1);
  EXPECT_EQ(static_cast<int8_t>(lp_quantize(DType::kInt4, 100)), 7);
  EXPECT_EQ(static_cast<int8_t>(lp_quantize(DType::kInt2, -5)), -2);
  EXPECT_EQ(lp_quantize(DType::kUInt4, 2.5), 2);  // half to even
  EXPECT_DOUBLE_EQ(lp_decode(DType::kInt4, static_cast<uint8_t>(-8)), -8.0);
}

}  // namespace
}  // namespace kiln::kernels
