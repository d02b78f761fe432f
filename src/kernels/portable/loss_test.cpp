// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss tests. The first
// cases use the inputs and outputs of ONNX backend tests
// (test_sce_mean_weight_ii_log_prob, test_nllloss_NCd1d2d3_sum_weight_high_ii);
// the rest are computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;
using testing::run_op1;

const std::vector<float> kScores = {0.54881352f, 0.71518934f, 0.60276335f, 0.54488319f, 0.42365479f,
                                    0.64589411f, 0.4375872f,  0.89177299f, 0.96366274f, 0.38344151f,
                                    0.79172504f, 0.5288949f,  0.56804454f, 0.92559665f, 0.07103606f};

TEST(LossTest, SoftmaxCrossEntropyMeanWeightIgnoreIndexLogProb) {
  OpCall call;
  call.op_type = "SoftmaxCrossEntropyLoss";
  call.inputs = {Tensor::from_vector(kScores, Shape{3, 5}), Tensor::from_vector<int64_t>({0, 4, 3}),
                 Tensor::from_vector<float>({0.9f, 0.7f, 0.8f, 0.9f, 0.9f})};
  call.attrs = {attr("ignore_index", 0), attr("reduction", "mean")};
  call.opset = 13;
  call.num_outputs = 2;
  auto r = run_op(call);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& loss = (*r)[0].tensor();
  ASSERT_EQ(loss.shape(), Shape{});
  EXPECT_NEAR(loss.data<float>()[0], 1.6091880f, 1e-5f);
  const Tensor& lp = (*r)[1].tensor();
  ASSERT_EQ(lp.shape(), (Shape{3, 5}));
  EXPECT_NEAR(lp.data<float>()[0], -1.6321545f, 1e-5f);
  EXPECT_NEAR(lp.data<float>()[14], -2.1553226f, 1e-5f);
}

TEST(LossTest, NllSumWithWeightAndOutOfRangeIgnoreIndex) {
  auto r = run_op1("NegativeLogLikelihoodLoss",
                   {Tensor::from_vector(kScores, Shape{3, 5}), Tensor::from_vector<int64_t>({10, 4, 3}),
                    Tensor::from_vector<float>({0.36824155f, 0.95715517f, 0.14035077f, 0.87008727f, 0.47360805f})},
                   {attr("ignore_index", 10), attr("reduction", "sum")}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NEAR(r->data<float>()[0], -0.98695087f, 1e-5f);
}

TEST(LossTest, NllNoneKeepsSpatialShape) {
  // input [N=1, C=2, d=3], loss[i, k] = -input[i, target[i, k], k].
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{1, 2, 3});
  auto r = run_op1("NegativeLogLikelihoodLoss", {x, Tensor::from_vector<int32_t>({1, 0, 1}, Shape{1, 3})},
                   {attr("reduction", "none")}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->shape(), (Shape{1, 3}));
  EXPECT_FLOAT_EQ(r->data<float>()[0], -4.f);
  EXPECT_FLOAT_EQ(r->data<float>()[1], -2.f);
  EXPECT_FLOAT_EQ(r->data<float>()[2], -6.f);
}

TEST(LossTest, MeanWithoutWeightsDividesByCount) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2});
  auto r = run_op1("NegativeLogLikelihoodLoss", {x, Tensor::from_vector<int64_t>({1, 0})}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FLOAT_EQ(r->data<float>()[0], -(2.f + 3.f) / 2);
  // ignore_index without weights: mean over the entries not ignored.
  auto ii = run_op1("NegativeLogLikelihoodLoss", {x, Tensor::from_vector<int64_t>({1, 0})},
                    {attr("ignore_index", 0)}, 13);
  ASSERT_TRUE(ii.ok()) << ii.status().to_string();
  EXPECT_FLOAT_EQ(ii->data<float>()[0], -2.f);
}

TEST(LossTest, SoftmaxCrossEntropyDoubleSum) {
  // Two classes with equal scores: each loss is log(2).
  Tensor x = Tensor::from_vector<double>({3, 3, -1, -1}, Shape{2, 2});
  auto r = run_op1("SoftmaxCrossEntropyLoss", {x, Tensor::from_vector<int64_t>({0, 1})}, {attr("reduction", "sum")}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->dtype(), DType::kFloat64);
  EXPECT_NEAR(r->data<double>()[0], 2 * std::log(2.0), 1e-12);
}

TEST(LossTest, RejectsBadTargetsAndShapes) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{2, 2});
  auto out_of_range = run_op1("NegativeLogLikelihoodLoss", {x, Tensor::from_vector<int64_t>({1, 2})}, {}, 13);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("class 2, outside [0, 2)"), std::string::npos)
      << out_of_range.status().message();
  auto bad_shape = run_op1("SoftmaxCrossEntropyLoss", {x, Tensor::from_vector<int64_t>({1, 0, 1})}, {}, 13);
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_NE(bad_shape.status().message().find("input 1 (target)"), std::string::npos);
  auto bad_reduction = run_op1("SoftmaxCrossEntropyLoss", {x, Tensor::from_vector<int64_t>({1, 0})},
                               {attr("reduction", "max")}, 13);
  ASSERT_FALSE(bad_reduction.ok());
  EXPECT_NE(bad_reduction.status().message().find("'max'"), std::string::npos);
}

}  // namespace
}  // namespace kiln
