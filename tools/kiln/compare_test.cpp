#include "compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::cli {
namespace {

Value floats(std::vector<float> v) { return Value(Tensor::from_vector(v)); }

TEST(CompareTest, EqualValuesMatch) {
  EXPECT_EQ(compare_values(floats({1, 2, 3}), floats({1, 2, 3})), "");
  EXPECT_EQ(compare_values(Value::none(), Value::none()), "");
}

TEST(CompareTest, UsesRelativeAndAbsoluteTolerance) {
  // |a - e| <= atol + rtol * |e| with rtol 1e-3, atol 1e-7.
  EXPECT_EQ(compare_values(floats({1000.9f}), floats({1000.0f})), "");
  const std::string m = compare_values(floats({0, 1001.1f}), floats({0, 1000.0f}));
  EXPECT_NE(m.find("at [1] got 1001.1, expected 1000"), std::string::npos) << m;
  EXPECT_NE(m.find("1 of 2 elements differ"), std::string::npos) << m;
  EXPECT_EQ(compare_values(floats({5e-8f}), floats({0})), "");
  EXPECT_NE(compare_values(floats({2e-7f}), floats({0})), "");
  Tolerance loose{1e-3, 1e-6};
  EXPECT_EQ(compare_values(floats({2e-7f}), floats({0}), loose), "");
}

TEST(CompareTest, NanEqualsNanAndInfinitiesMustMatchExactly) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(compare_values(floats({nan, inf, -inf}), floats({nan, inf, -inf})), "");
  EXPECT_NE(compare_values(floats({nan}), floats({1})), "");
  EXPECT_NE(compare_values(floats({1}), floats({nan})), "");
  EXPECT_NE(compare_values(floats({inf}), floats({-inf})), "");
  EXPECT_NE(compare_values(floats({3e38f}), floats({inf})), "");
}

TEST(CompareTest, IntegersBoolsAndStringsAreExact) {
  EXPECT_NE(compare_values(Value(Tensor::from_vector<int64_t>({1000000})), Value(Tensor::from_vector<int64_t>({1000001}))),
            "");
  EXPECT_NE(compare_values(Value(Tensor::from_vector<bool>({true})), Value(Tensor::from_vector<bool>({false}))), "");
  const std::string m = compare_values(Value(Tensor::from_vector<std::string>({"a", "b"})),
                                       Value(Tensor::from_vector<std::string>({"a", "c"})));
  EXPECT_NE(m.find("at [1] got \"b\", expected \"c\""), std::string::npos) << m;
}

TEST(CompareTest, HalfPrecisionComparesAsFloat) {
  Value a(Tensor::from_vector<Float16>({Float16(1.0f), Float16(2.0f)}));
  Value b(Tensor::from_vector<Float16>({Float16(1.0f), Float16(2.5f)}));
  EXPECT_EQ(compare_values(a, a), "");
  EXPECT_NE(compare_values(a, b).find("got 2, expected 2.5"), std::string::npos) << compare_values(a, b);
}

TEST(CompareTest, ShapeDtypeAndKindMustMatch) {
  Value a(Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2}));
  Value b(Tensor::from_vector<float>({1, 2, 3, 4}, Shape{4}));
  EXPECT_EQ(compare_values(a, b), "shape [2, 2], expected [4]");
  EXPECT_EQ(compare_values(floats({1}), Value(Tensor::from_vector<double>({1}))), "dtype float32, expected float64");
  EXPECT_EQ(compare_values(floats({1}), Value::none()), "got a tensor, expected no value (empty optional)");
}

TEST(CompareTest, ComparesSequencesItemByItem) {
  Value a = Value::sequence({Tensor::from_vector<float>({1}), Tensor::from_vector<float>({2})});
  Value b = Value::sequence({Tensor::from_vector<float>({1}), Tensor::from_vector<float>({3})});
  Value c = Value::sequence({Tensor::from_vector<float>({1})});
  EXPECT_EQ(compare_values(a, a), "");
  EXPECT_EQ(compare_values(a, b).rfind("sequence item 1: at [0] got 2, expected 3", 0), 0u) << compare_values(a, b);
  EXPECT_EQ(compare_values(a, c), "sequence of 2 tensors, expected 1");
}

TEST(CompareTest, ReportsMultiIndexOfFirstMismatch) {
  Value a(Tensor::from_vector<int32_t>({0, 1, 2, 3, 4, 5}, Shape{2, 3}));
  Value b(Tensor::from_vector<int32_t>({0, 1, 2, 3, 9, 9}, Shape{2, 3}));
  EXPECT_EQ(compare_values(a, b), "at [1, 1] got 4, expected 9 (2 of 6 elements differ)");
}

}  // namespace
}  // namespace kiln::cli
