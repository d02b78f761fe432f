#include <gtest/gtest.h>

#include <cmath>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

Result<std::vector<Value>> call(const std::string& op, std::vector<Value> in, std::vector<ir::Attribute> attrs,
                                size_t outs, int opset = 17) {
  OpCall c;
  c.op_type = op;
  c.inputs = std::move(in);
  c.attrs = std::move(attrs);
  c.num_outputs = outs;
  c.opset = opset;
  return run_op(c);
}

TEST(TopKTest, LargestTiesByLowerIndex) {
  Tensor x = Tensor::from_vector<float>({1, 3, 3, 2, 5, 0, 5, 4}, Shape{2, 4});
  auto out = call("TopK", {x, ints({2})}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(vals<float>((*out)[0].tensor()), (std::vector<float>{3, 3, 5, 5}));
  EXPECT_EQ(vals<int64_t>((*out)[1].tensor()), (std::vector<int64_t>{1, 2, 0, 2}));
}

TEST(TopKTest, SmallestAlongAxis0AndOpset1) {
  Tensor x = Tensor::from_vector<int32_t>({4, 1, 2, 5, 0, 9}, Shape{3, 2});
  auto out = call("TopK", {x, ints({1})}, {attr("axis", 0), attr("largest", 0)}, 2);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(vals<int32_t>((*out)[0].tensor()), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(vals<int64_t>((*out)[1].tensor()), (std::vector<int64_t>{2, 0}));
  out = call("TopK", {x}, {attr("k", 2)}, 2, 1);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(vals<int32_t>((*out)[0].tensor()), (std::vector<int32_t>{4, 1, 5, 2, 9, 0}));
}

TEST(TopKTest, KOutOfRangeIsAnError) {
  Tensor x = Tensor::from_vector<float>({1, 2}, Shape{2});
  EXPECT_FALSE(call("TopK", {x, ints({3})}, {}, 2).ok());
  EXPECT_FALSE(call("TopK", {x, ints({-1})}, {}, 2).ok());
}

TEST(UniqueTest, SortedFlatAllOutputs) {
  Tensor x = Tensor::from_vector<float>({2, 1, 1, 3, 4, 3}, Shape{6});
  auto out = call("Unique", {x}, {}, 4);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(vals<float>((*out)[0].tensor()), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(vals<int64_t>((*out)[1].tensor()), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(vals<int64_t>((*out)[2].tensor()), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(vals<int64_t>((*out)[3].tensor()), (std::vector<int64_t>{2, 1, 2, 1}));
}

TEST(UniqueTest, UnsortedKeepsFirstOccurrenceOrder) {
  Tensor x = Tensor::from_vector<float>({2, 1, 1, 3, 4, 3}, Shape{6});
  auto out = call("Unique", {x}, {attr("sorted", 0)}, 4);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(vals<float>((*out)[0].tensor()), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(vals<int64_t>((*out)[1].tensor()), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(vals<int64_t>((*out)[2].tensor()), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  EXPECT_EQ(vals<int64_t>((*out)[3].tensor()), (std::vector<int64_t>{1, 2, 2, 1}));
}

TEST(UniqueTest, SlicesAlongAxis) {
  // Columns of [[1, 0, 1], [2, 5, 2]]: (1,2), (0,5), (1,2) -> sorted (0,5), (1,2).
  Tensor x = Tensor::from_vector<int64_t>({1, 0, 1, 2, 5, 2}, Shape{2, 3});
  auto out = call("Unique", {x}, {attr("axis", -1)}, 4);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].tensor().shape(), (Shape{2, 2}));
  EXPECT_EQ(vals<int64_t>((*out)[0].tensor()), (std::vector<int64_t>{0, 1, 5, 2}));
  EXPECT_EQ(vals<int64_t>((*out)[1].tensor()), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(vals<int64_t>((*out)[2].tensor()), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(vals<int64_t>((*out)[3].tensor()), (std::vector<int64_t>{1, 2}));
}

TEST(CumSumTest, ExclusiveReverseAndAxis) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto r = run_op1("CumSum", {x, Tensor::scalar<int32_t>(1)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  r = run_op1("CumSum", {x, Tensor::scalar<int64_t>(-1)}, {attr("exclusive", 1), attr("reverse", 1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{5, 3, 0, 11, 6, 0}));
  r = run_op1("CumSum", {x, Tensor::scalar<int64_t>(0)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 2, 3, 5, 7, 9}));
  EXPECT_FALSE(run_op1("CumSum", {x, Tensor::scalar<int64_t>(2)}).ok());
  EXPECT_FALSE(run_op1("CumSum", {x}).ok());
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(UniqueTest, NaNsCollapseAndSortLast) {
  Tensor x = Tensor::from_vector<float>({NAN, 1, NAN, 0}, Shape{4});
  auto out = call("Unique", {x}, {}, 4);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const std::vector<float> y = vals<float>((*out)[0].tensor());
  ASSERT_EQ(y.size(), 3u);
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 1.f);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_EQ(vals<int64_t>((*out)[3].tensor()), (std::vector<int64_t>{1, 1, 2}));
}

}  // namespace
}  // namespace kiln
