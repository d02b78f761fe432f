#include <gtest/gtest.h>

#include "kiln/result.h"

namespace kiln {
namespace {

Result<int> half(int x) {
  if (x % 2) return invalid_argument(x, " is odd");
  return x / 2;
}
Result<int> quarter(int x) {
  KILN_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

TEST(ResultTest, PropagatesErrors) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

}  // namespace
}  // namespace kiln
