#include <gtest/gtest.h>

#include "kiln/shape.h"

namespace kiln {
namespace {

TEST(ShapeTest, InlineAndHeapRanks) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.to_string(), "[2, 3, 4]");
  Shape big;
  for (int i = 0; i < 12; ++i) big.push_back(2);
  EXPECT_EQ(big.rank(), 12u);
  EXPECT_EQ(big.numel(), 4096);
  Shape copy = big;
  copy.resize(3);
  EXPECT_EQ(copy, (Shape{2, 2, 2}));
  EXPECT_EQ(Shape{}.numel(), 1);
}

}  // namespace
}  // namespace kiln
