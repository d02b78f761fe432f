// NonMaxSuppression tests on the boxes of the ONNX backend tests
// (test_nonmaxsuppression_*): six unit boxes, two clusters near y = 0 and
// y = 10 and one far away at y = 100.
#include <gtest/gtest.h>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op1;

const std::vector<float> kBoxes = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f,
                                   0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101};
const std::vector<float> kScores = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f};

Result<Tensor> nms(Tensor boxes, Tensor scores, int64_t max_out, float iou, float score,
                   std::vector<ir::Attribute> attrs = {}) {
  return run_op1("NonMaxSuppression",
                 {boxes, scores, Tensor::from_vector<int64_t>({max_out}), Tensor::from_vector<float>({iou}),
                  Tensor::from_vector<float>({score})},
                 std::move(attrs), 11);
}

void expect_rows(const Tensor& t, const std::vector<int64_t>& want) {
  ASSERT_EQ(t.dtype(), DType::kInt64);
  ASSERT_EQ(t.shape(), (Shape{static_cast<int64_t>(want.size() / 3), 3}));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(t.data<int64_t>()[i], want[i]) << "at " << i;
}

TEST(NonMaxSuppressionTest, SuppressByIouKeepsBestOfEachCluster) {
  auto r = nms(Tensor::from_vector(kBoxes, Shape{1, 6, 4}), Tensor::from_vector(kScores, Shape{1, 1, 6}), 3, 0.5f, 0.f);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_rows(*r, {0, 0, 3, 0, 0, 0, 0, 0, 5});
}

TEST(NonMaxSuppressionTest, ScoreThresholdDropsLowScores) {
  auto r = nms(Tensor::from_vector(kBoxes, Shape{1, 6, 4}), Tensor::from_vector(kScores, Shape{1, 1, 6}), 3, 0.5f, 0.4f);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_rows(*r, {0, 0, 3, 0, 0, 0});
}

TEST(NonMaxSuppressionTest, FlippedCornersAndCenterPointFormat) {
  const std::vector<float> flipped = {1, 1, 0, 0, 0, 0.1f, 1, 1.1f, 0, 0.9f, 1, -0.1f,
                                      0, 10, 1, 11, 1, 10.1f, 0, 11.1f, 1, 101, 0, 100};
  auto a = nms(Tensor::from_vector(flipped, Shape{1, 6, 4}), Tensor::from_vector(kScores, Shape{1, 1, 6}), 3, 0.5f, 0.f);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  expect_rows(*a, {0, 0, 3, 0, 0, 0, 0, 0, 5});
  const std::vector<float> centers = {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1, 0.5f, 0.4f, 1, 1,
                                      0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1};
  auto b = nms(Tensor::from_vector(centers, Shape{1, 6, 4}), Tensor::from_vector(kScores, Shape{1, 1, 6}), 3, 0.5f, 0.f,
               {attr("center_point_box", 1)});
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  expect_rows(*b, {0, 0, 3, 0, 0, 0, 0, 0, 5});
}

TEST(NonMaxSuppressionTest, PerClassLimitAndBatchOrder) {
  std::vector<float> scores2 = kScores;
  scores2.insert(scores2.end(), kScores.begin(), kScores.end());
  auto classes = nms(Tensor::from_vector(kBoxes, Shape{1, 6, 4}), Tensor::from_vector(scores2, Shape{1, 2, 6}), 2, 0.5f, 0.f);
  ASSERT_TRUE(classes.ok()) << classes.status().to_string();
  expect_rows(*classes, {0, 0, 3, 0, 0, 0, 0, 1, 3, 0, 1, 0});
  std::vector<float> boxes2 = kBoxes;
  boxes2.insert(boxes2.end(), kBoxes.begin(), kBoxes.end());
  auto batches = nms(Tensor::from_vector(boxes2, Shape{2, 6, 4}), Tensor::from_vector(scores2, Shape{2, 1, 6}), 2, 0.5f, 0.f);
  ASSERT_TRUE(batches.ok()) << batches.status().to_string();
  expect_rows(*batches, {0, 0, 3, 0, 0, 0, 1, 0, 3, 1, 0, 0});
}

TEST(NonMaxSuppressionTest, IdenticalBoxesAndZeroLimit) {
  std::vector<float> same, scores;
  for (int i = 0; i < 10; ++i) {
    same.insert(same.end(), {0, 0, 1, 1});
    scores.push_back(0.9f);
  }
  auto r = nms(Tensor::from_vector(same, Shape{1, 10, 4}), Tensor::from_vector(scores, Shape{1, 1, 10}), 3, 0.5f, 0.f);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_rows(*r, {0, 0, 0});
  auto none = nms(Tensor::from_vector(kBoxes, Shape{1, 6, 4}), Tensor::from_vector(kScores, Shape{1, 1, 6}), 0, 0.5f, 0.f);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ(none->shape(), (Shape{0, 3}));
}

TEST(NonMaxSuppressionTest, RejectsMismatchedScores) {
  auto r = nms(Tensor::from_vector(kBoxes, Shape{1, 6, 4}), Tensor::from_vector<float>({1, 2, 3}, Shape{1, 1, 3}), 3, 0.5f, 0.f);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 1 (scores) must be [1, num_classes, 6]"), std::string::npos)
      << r.status().message();
  auto iou = nms(Tensor::from_vector(kBoxes, Shape{1, 6, 4}), Tensor::from_vector(kScores, Shape{1, 1, 6}), 3, 1.5f, 0.f);
  ASSERT_FALSE(iou.ok());
}

}  // namespace
}  // namespace kiln
