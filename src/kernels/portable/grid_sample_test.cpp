// GridSample tests: X = [[0, 1], [2, 3], [4, 5]] sampled at the grids of the
// ONNX backend tests (test_gridsample_*), whose expected values come from
// PyTorch; plus a 3-D volume by hand.
#include <gtest/gtest.h>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op1;

Tensor image() { return Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, Shape{1, 1, 3, 2}); }
Tensor inner_grid() {
  return Tensor::from_vector<float>({-1, -1, -0.5f, -0.5f, -0.2f, -0.2f, 0, 0, 0, 0, -0.2f, -0.2f, 0.5f, 0.5f, 1, 1},
                                    Shape{1, 2, 4, 2});
}
Tensor outer_grid() {
  return Tensor::from_vector<float>({-10, -10, -5, -5, -0.2f, -0.2f, 10, 10, 10, 10, -0.2f, -0.2f, 5, 5, 10, 10},
                                    Shape{1, 2, 4, 2});
}

void expect_grid(const Result<Tensor>& y, const std::vector<float>& want) {
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, 1, 2, 4}));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(y->data<float>()[i], want[i], 1e-4f) << "at " << i;
}

TEST(GridSampleTest, BilinearAlignCorners) {
  expect_grid(run_op1("GridSample", {image(), inner_grid()}, {attr("align_corners", 1)}, 16),
              {0, 1.25f, 2, 2.5f, 2.5f, 2, 3.75f, 5});
}

TEST(GridSampleTest, NearestRoundsHalfToEvenAndReadsZeroOutside) {
  expect_grid(run_op1("GridSample", {image(), inner_grid()}, {attr("mode", "nearest")}, 16), {0, 0, 2, 2, 2, 2, 5, 0});
}

TEST(GridSampleTest, BicubicDefaults) {
  expect_grid(run_op1("GridSample", {image(), inner_grid()}, {attr("mode", "bicubic")}, 16),
              {-0.1406f, 0.3828f, 1.7556f, 2.9688f, 2.9688f, 1.7556f, 5.1445f, 1.3906f});
}

TEST(GridSampleTest, PaddingModes) {
  expect_grid(run_op1("GridSample", {image(), outer_grid()}, {attr("padding_mode", "zeros")}, 16),
              {0, 0, 1.7f, 0, 0, 1.7f, 0, 0});
  expect_grid(run_op1("GridSample", {image(), outer_grid()}, {attr("padding_mode", "border")}, 16),
              {0, 0, 1.7f, 5, 5, 1.7f, 5, 5});
  expect_grid(run_op1("GridSample", {image(), outer_grid()}, {attr("padding_mode", "reflection")}, 16),
              {2.5f, 0, 1.7f, 2.5f, 2.5f, 1.7f, 5, 2.5f});
}

TEST(GridSampleTest, VolumeLinearAtCenterIsMean) {
  // 2x2x2 volume, align_corners: (0, 0, 0) is the center, the mean of all 8.
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, Shape{1, 1, 2, 2, 2});
  Tensor grid = Tensor::from_vector<float>({0, 0, 0, 1, -1, -1}, Shape{1, 1, 1, 2, 3});
  auto y = run_op1("GridSample", {x, grid}, {attr("mode", "linear"), attr("align_corners", 1)}, 20);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, 1, 1, 1, 2}));
  EXPECT_NEAR(y->data<float>()[0], 3.5f, 1e-6f);
  EXPECT_NEAR(y->data<float>()[1], 1.f, 1e-6f);  // x = 1 (last axis), y = -1, z = -1
}

TEST(GridSampleTest, ThreadedRunMatchesSingleThreaded) {
  std::vector<float> x(2 * 3 * 16 * 16), grid(2 * 24 * 24 * 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 13) % 29);
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<float>(static_cast<int>((i * 7) % 23) - 11) / 10.f;
  testing::OpCall call;
  call.op_type = "GridSample";
  call.inputs = {Tensor::from_vector(x, Shape{2, 3, 16, 16}), Tensor::from_vector(grid, Shape{2, 24, 24, 2})};
  call.attrs = {attr("mode", "bicubic"), attr("padding_mode", "reflection")};
  call.opset = 16;
  auto one = testing::run_op(call);
  call.threads = 2;
  auto two = testing::run_op(call);
  ASSERT_TRUE(one.ok() && two.ok());
  const Tensor& a = (*one)[0].tensor();
  const Tensor& b = (*two)[0].tensor();
  ASSERT_EQ(a.shape(), (Shape{2, 3, 24, 24}));
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;
}

TEST(GridSampleTest, RejectsBadGridAndMode) {
  auto shape = run_op1("GridSample", {image(), Tensor::from_vector<float>({0, 0, 0}, Shape{1, 1, 1, 3})}, {}, 16);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("input 1 (grid)"), std::string::npos) << shape.status().message();
  auto mode = run_op1("GridSample", {image(), inner_grid()}, {attr("mode", "area")}, 16);
  ASSERT_FALSE(mode.ok());
  EXPECT_NE(mode.status().message().find("'area'"), std::string::npos);
}

}  // namespace
}  // namespace kiln
