#include <gtest/gtest.h>

#include <climits>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

TEST(SliceTest, StartsEndsAxesSteps) {
  // x = [[0..4], [5..9], [10..14]]
  auto r = run_op1("Slice", {iota_f({3, 5}), ints({1, 0}), ints({3, 5}), ints({0, 1}), ints({1, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 3}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{5, 7, 9, 10, 12, 14}));
}

TEST(SliceTest, NegativeStepsWalkBackwards) {
  auto r = run_op1("Slice", {iota_f({5}), ints({-1}), ints({INT64_MIN}), ints({0}), ints({-2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{4, 2, 0}));
  r = run_op1("Slice", {iota_f({2, 4}), ints({20, 3}), ints({0, 0}), ints({0, 1}), ints({-1, -1})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{1, 3}));  // row 1 only (end 0 is exclusive); cols 3, 2, 1
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{7, 6, 5}));
}

TEST(SliceTest, OutOfBoundsClampsAndDefaultAxes) {
  auto r = run_op1("Slice", {iota_f({2, 3}), ints({-100, 1}), ints({INT64_MAX, 1000})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 2, 4, 5}));
  r = run_op1("Slice", {iota_f({4}), ints({10}), ints({20})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{0}));
  r = run_op1("Slice", {iota_f({4}), ints({3}), ints({1})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->numel(), 0);
}

TEST(SliceTest, OpsetOneUsesAttributes) {
  auto r = run_op1("Slice", {iota_f({3, 4})},
                   {attr("starts", std::vector<int64_t>{1}), attr("ends", std::vector<int64_t>{-1}),
                    attr("axes", std::vector<int64_t>{1})},
                   1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 2, 5, 6, 9, 10}));
}

TEST(SliceTest, Int32InputsAndStrings) {
  Tensor s = Tensor::from_vector<std::string>({"a", "b", "c"}, Shape{3});
  auto r = run_op1("Slice", {s, Tensor::from_vector<int32_t>({1}), Tensor::from_vector<int32_t>({3})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<std::string>(*r), (std::vector<std::string>{"b", "c"}));
}

TEST(SliceTest, BadInputsAreErrors) {
  EXPECT_FALSE(run_op1("Slice", {iota_f({4}), ints({0}), ints({2}), ints({0}), ints({0})}).ok());  // zero step
  EXPECT_FALSE(run_op1("Slice", {iota_f({4}), ints({0}), ints({2}), ints({1})}).ok());            // bad axis
  EXPECT_FALSE(run_op1("Slice", {iota_f({4, 4}), ints({0, 0}), ints({2, 2}), ints({0, -2})}).ok());  // repeated
  EXPECT_FALSE(run_op1("Slice", {iota_f({4}), ints({0, 1}), ints({2})}).ok());  // length mismatch
}

TEST(SliceTest, ParallelLargeSliceMatches) {
  OpCall call;
  call.op_type = "Slice";
  call.inputs = {iota_f({512, 256}), ints({3, 10}), ints({500, 250}), ints({0, 1}), ints({1, 3})};
  call.threads = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok());
  const Tensor& y = (*out)[0].tensor();
  EXPECT_EQ(y.shape(), (Shape{497, 80}));
  EXPECT_EQ(y.data<float>()[496 * 80 + 79], static_cast<float>(499 * 256 + 10 + 79 * 3));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(SliceTest, ExtremeStepsTakeOneElement) {
  auto r = testing::run_op1("Slice", {iota_f({4}), ints({0}), ints({4}), ints({0}), ints({INT64_MAX})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0}));
  r = testing::run_op1("Slice", {iota_f({4}), ints({-1}), ints({INT64_MIN}), ints({0}), ints({INT64_MIN})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{3}));
}

TEST(SliceTest, MissingStartsIsAnError) {
  auto r = testing::run_op1("Slice", {iota_f({4}), Value::none(), ints({2})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 1"), std::string::npos);
}

}  // namespace
}  // namespace kiln
