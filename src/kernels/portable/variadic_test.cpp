#include <cmath>
#include <limits>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TEST(VariadicTest, SumOfThreeWithBroadcast) {
  Tensor y = run_ok("Sum", {f32({1, 2, 3, 4}, {2, 2}), f32({10, 20}, {2}), f32({100}, {1})});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  expect_floats(y, {111, 122, 113, 124});
}

TEST(VariadicTest, BroadcastWhereFirstTwoDoNotSpanTheOutput) {
  // [2,1] and [1] broadcast to [2,1]; the third input widens to [2,3].
  Tensor y = run_ok("Max", {f32({1, 5}, {2, 1}), f32({2}, {1}), f32({0, 3, 6}, {1, 3})});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  expect_floats(y, {2, 3, 6, 5, 5, 6});
}

TEST(VariadicTest, MeanDividesByInputCount) {
  expect_floats(run_ok("Mean", {f32({1, 2}), f32({3, 4}), f32({5, 9})}), {3, 5});
  expect_floats(run_ok("Mean", {make<double>({2, 4}, {2})}), {2, 4});
}

TEST(VariadicTest, SingleInputIsCopied) {
  expect_floats(run_ok("Sum", {f32({1, -2})}), {1, -2});
  EXPECT_EQ(vals<int32_t>(run_ok("Min", {make<int32_t>({7, 8}, {2})})), (std::vector<int32_t>{7, 8}));
}

TEST(VariadicTest, MaxMinIntegersAndNaN) {
  EXPECT_EQ(vals<int64_t>(run_ok("Max", {make<int64_t>({1, -5}, {2}), make<int64_t>({-2, 3}, {2})})),
            (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(vals<uint8_t>(run_ok("Min", {make<uint8_t>({1, 200}, {2}), make<uint8_t>({100, 3}, {2})})),
            (std::vector<uint8_t>{1, 3}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_floats(run_ok("Max", {f32({nan, 1}), f32({1, nan})}), {nan, nan});
  expect_floats(run_ok("Min", {f32({nan, 1, 2}), f32({1, nan, 0})}), {nan, nan, 0});
}

TEST(VariadicTest, HalfSum) {
  Tensor y = run_ok("Sum", {make<Float16>({Float16(1.5f)}, {1}), make<Float16>({Float16(2.f)}, {1})}, {}, 13);
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  expect_floats(y, {3.5});
}

TEST(VariadicTest, Errors) {
  std::string e = run_error("Sum", {f32({1, 2}), f32({1, 2, 3})});
  EXPECT_NE(e.find("input 1"), std::string::npos) << e;
  run_error("Sum", {f32({1}), make<double>({1}, {1})});
  run_error("Sum", {make<int32_t>({1}, {1})});  // Sum is float-only
  run_error("Max", {});
}

}  // namespace
}  // namespace kiln
