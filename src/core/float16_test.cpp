#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/float16.h"

namespace kiln {
namespace {

TEST(Float16Test, RoundTripsAndRoundsToNearestEven) {
  EXPECT_EQ(Float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(Float16(-2.0f).bits, 0xc000);
  EXPECT_EQ(Float16(65504.f).bits, 0x7bff);
  EXPECT_EQ(Float16(65520.f).bits, 0x7c00);  // ties to even overflow to inf
  EXPECT_EQ(Float16(1.0f + 1.0f / 2048).bits, 0x3c00);  // exact tie -> even
  EXPECT_EQ(Float16(1.0f + 3.0f / 2048).bits, 0x3c02);
  EXPECT_EQ(Float16(5.960464477539063e-08f).bits, 0x0001);  // smallest subnormal
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t b = 0; b < 0x7c00; ++b) {  // every finite half survives the round trip
    auto h = Float16::from_bits(static_cast<uint16_t>(b));
    ASSERT_EQ(Float16(static_cast<float>(h)).bits, b);
  }
}

TEST(BFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(BFloat16(3.140625f)), 3.140625f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace kiln
