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

TEST(GatherTest, EmbeddingRowsWithNegativeIndex) {
  auto r = run_op1("Gather", {iota_f({4, 3}), ints({3, -4, 1, 1}, Shape{2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{9, 10, 11, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
}

TEST(GatherTest, InnerAxisAndScalarIndex) {
  auto r = run_op1("Gather", {iota_f({2, 3}), Tensor::from_vector<int32_t>({2, 0}, Shape{2})}, {attr("axis", 1)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{2, 0, 5, 3}));
  r = run_op1("Gather", {iota_f({2, 3}), Tensor::scalar<int64_t>(1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{3}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{3, 4, 5}));
}

TEST(GatherTest, OutOfRangeIndexIsAnError) {
  auto r = run_op1("Gather", {iota_f({4, 3}), ints({4})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("indices"), std::string::npos);
  EXPECT_FALSE(run_op1("Gather", {iota_f({4, 3}), ints({-5})}).ok());
  EXPECT_FALSE(run_op1("Gather", {iota_f({4, 3}), ints({0})}, {attr("axis", 2)}).ok());
}

TEST(GatherTest, ParallelEmbeddingMatches) {
  OpCall call;
  call.op_type = "Gather";
  std::vector<int64_t> idx(512);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 37) % 1000);
  call.inputs = {iota_f({1000, 64}), ints(idx)};
  call.threads = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok());
  const Tensor& y = (*out)[0].tensor();
  for (size_t i = 0; i < idx.size(); ++i) ASSERT_EQ(y.data<float>()[i * 64 + 5], static_cast<float>(idx[i] * 64 + 5));
}

TEST(GatherElementsTest, Axis1AndNegative) {
  // data [[1, 2], [3, 4]], indices [[0, 0], [1, 0]] -> [[1, 1], [4, 3]]
  Tensor d = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2});
  auto r = run_op1("GatherElements", {d, ints({0, 0, 1, -2}, Shape{2, 2})}, {attr("axis", 1)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 1, 4, 3}));
  r = run_op1("GatherElements", {iota_f({3, 3}), ints({1, 2, 0, 2, 0, 0}, Shape{2, 3})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{3, 7, 2, 6, 1, 2}));
  EXPECT_FALSE(run_op1("GatherElements", {d, ints({2, 0, 0, 0}, Shape{2, 2})}).ok());
}

TEST(GatherNDTest, BatchDims) {
  // data [2, 2, 2], indices [2, 1] with batch_dims 1 -> [2, 2]
  auto r = run_op1("GatherND", {iota_f({2, 2, 2}), ints({1, 0}, Shape{2, 1})}, {attr("batch_dims", 1)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 2}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{2, 3, 4, 5}));
  r = run_op1("GatherND", {iota_f({2, 2}), ints({0, 0, 1, 1}, Shape{2, 2})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 3}));
  EXPECT_FALSE(run_op1("GatherND", {iota_f({2, 2}), ints({0, 2}, Shape{1, 2})}).ok());
  EXPECT_FALSE(run_op1("GatherND", {iota_f({2, 2}), ints({0, 0, 0}, Shape{1, 3})}).ok());
}

TEST(ScatterElementsTest, AxisAndReductions) {
  Tensor d = Tensor::from_vector<float>({1, 2, 3, 4, 5}, Shape{1, 5});
  Tensor idx = ints({1, 3, 1}, Shape{1, 3});
  Tensor upd = Tensor::from_vector<float>({1.1f, 2.1f, 3.f}, Shape{1, 3});
  auto r = run_op1("ScatterElements", {d, idx, upd}, {attr("axis", 1), attr("reduction", "add")}, 16);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 2 + 1.1f + 3.f, 3, 4 + 2.1f, 5}));
  r = run_op1("ScatterElements", {d, ints({-1}, Shape{1, 1}), Tensor::from_vector<float>({9}, Shape{1, 1})},
              {attr("axis", 1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 2, 3, 4, 9}));
  r = run_op1("Scatter", {iota_f({3, 3}), ints({1, 0, 2, 0, 2, 1}, Shape{2, 3}),
                          Tensor::from_vector<float>({1, 1, 1, 2, 2, 2}, Shape{2, 3})},
              {}, 9);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{2, 1, 2, 1, 4, 2, 6, 2, 1}));
  EXPECT_FALSE(run_op1("ScatterElements", {d, ints({5}, Shape{1, 1}), Tensor::from_vector<float>({9}, Shape{1, 1})},
                       {attr("axis", 1)}).ok());
}

TEST(ScatterNDTest, SlicesAndMultiply) {
  // data [4, 2]; replace rows 3 and 1.
  auto r = run_op1("ScatterND", {iota_f({4, 2}), ints({3, 1}, Shape{2, 1}),
                                 Tensor::from_vector<float>({10, 11, 12, 13}, Shape{2, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 1, 12, 13, 4, 5, 10, 11}));
  r = run_op1("ScatterND", {iota_f({4}), ints({1, 1}, Shape{2, 1}), Tensor::from_vector<float>({3, 4}, Shape{2})},
              {attr("reduction", "mul")}, 16);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 12, 2, 3}));
  EXPECT_FALSE(run_op1("ScatterND", {iota_f({4}), ints({4}, Shape{1, 1}), Tensor::from_vector<float>({3}, Shape{1})}).ok());
  EXPECT_FALSE(run_op1("ScatterND", {iota_f({4}), ints({1}, Shape{1, 1}), Tensor::from_vector<float>({3, 4}, Shape{2})}).ok());
}

TEST(CompressTest, AxisAndFlattened) {
  auto r = run_op1("Compress", {iota_f({3, 2}), Tensor::from_vector<bool>({false, true, true}, Shape{3})},
                   {attr("axis", 0)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{2, 3, 4, 5}));
  r = run_op1("Compress", {iota_f({3, 2}), Tensor::from_vector<bool>({false, true, false, false, true}, Shape{5})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 4}));
  EXPECT_FALSE(run_op1("Compress", {iota_f({2}), Tensor::from_vector<bool>({true, true, true}, Shape{3})}).ok());
}

TEST(OneHotTest, AxisAndNegativeIndices) {
  Tensor values = Tensor::from_vector<float>({0, 5}, Shape{2});
  auto r = run_op1("OneHot", {ints({1, -1, 7}), Tensor::scalar<int64_t>(3), values});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{3, 3}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 5, 0, 0, 0, 5, 0, 0, 0}));
  r = run_op1("OneHot", {ints({0, 2}), Tensor::scalar(3.f), values}, {attr("axis", 0)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{3, 2}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{5, 0, 0, 0, 0, 5}));
  EXPECT_FALSE(run_op1("OneHot", {ints({0}), Tensor::scalar<int64_t>(0), values}).ok());
}

TEST(NonZeroTest, CoordinatesPerDim) {
  Tensor x = Tensor::from_vector<float>({1, 0, 0, 2}, Shape{2, 2});
  auto r = run_op1("NonZero", {x});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 2}));
  EXPECT_EQ(vals<int64_t>(*r), (std::vector<int64_t>{0, 1, 0, 1}));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(OneHotTest, NonFiniteDepthIsAnErrorAndNaNIndexIsOff) {
  Tensor values = Tensor::from_vector<float>({0, 1}, Shape{2});
  EXPECT_FALSE(testing::run_op1("OneHot", {ints({0}), Tensor::scalar(INFINITY), values}).ok());
  auto r = testing::run_op1("OneHot", {Tensor::from_vector<float>({NAN, 1.f}, Shape{2}), Tensor::scalar(2.f), values});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 0, 0, 1}));
}

TEST(GatherTest, SequenceWhereTensorBelongsIsAnError) {
  auto r = testing::run_op1("Gather", {Value::sequence({iota_f({2})}, DType::kFloat32), ints({0})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 0"), std::string::npos);
}

}  // namespace
}  // namespace kiln
