// RoiAlign on a ramp, where bilinear sampling is exact.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op1;

TEST(RoiAlignTest, AveragesBilinearSamples) {
  // 4x4 ramp x[h][w] = w: bilinear sampling of a linear function is exact,
  // so each bin's average is the x-centre of the bin.
  std::vector<float> ramp(16);
  for (int i = 0; i < 16; ++i) ramp[static_cast<size_t>(i)] = static_cast<float>(i % 4);
  Tensor x = Tensor::from_vector<float>(ramp, {1, 1, 4, 4});
  Tensor rois = Tensor::from_vector<float>({0.5f, 0.5f, 2.5f, 2.5f}, {1, 4});
  Tensor idx = Tensor::from_vector<int64_t>({0});
  auto y = run_op1("RoiAlign", {x, rois, idx},
                   {attr("output_height", int64_t{1}), attr("output_width", int64_t{2}), attr("sampling_ratio", int64_t{2})}, 16);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, 1, 1, 2}));
  // half_pixel: roi x in [0, 2] -> bins [0, 1] and [1, 2], centres 0.5 and 1.5
  EXPECT_NEAR(y->data<float>()[0], 0.5f, 1e-6);
  EXPECT_NEAR(y->data<float>()[1], 1.5f, 1e-6);
  auto bad = run_op1("RoiAlign", {x, rois, Tensor::from_vector<int64_t>({3})}, {}, 16);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("batch_indices"), std::string::npos);
  auto huge = run_op1("RoiAlign", {x, Tensor::from_vector<float>({0.f, 0.f, 1e30f, 1e30f}, {1, 4}), idx}, {}, 16);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("input 1 (rois)"), std::string::npos);
  auto mode = run_op1("RoiAlign", {x, rois, idx}, {attr("mode", "median")}, 16);
  ASSERT_FALSE(mode.ok());
}

}  // namespace
}  // namespace kiln
