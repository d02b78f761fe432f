// Resize/Upsample kernel tests. Expected values are from the ONNX backend
// test data (onnx/backend/test/data/node/test_resize_*) or computed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op;
using testing::run_op1;

std::vector<float> iota16() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  return v;
}

void expect_near(const Tensor& t, const Shape& shape, const std::vector<float>& want, float tol = 1e-4f) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.dtype(), DType::kFloat32);
  ASSERT_EQ(static_cast<size_t>(t.numel()), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(t.data<float>()[i], want[i], tol) << "at " << i;
}

Value scales(std::vector<float> s) { return Tensor::from_vector(s); }
Value sizes(std::vector<int64_t> s) { return Tensor::from_vector(s); }

TEST(ResizeTest, UpsampleScalesNearest) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{1, 1, 2, 2});
  auto y = run_op1("Resize", {x, Value::none(), scales({1, 1, 2, 3})}, {attr("mode", "nearest")}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(*y, Shape{1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
}

TEST(ResizeTest, UpsampleScalesLinearHalfPixel) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{1, 1, 2, 2});
  auto y = run_op1("Resize", {x, Value::none(), scales({1, 1, 2, 2})}, {attr("mode", "linear")}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(*y, Shape{1, 1, 4, 4},
              {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
}

TEST(ResizeTest, DownsampleLinearAlignCornersUsesRealOutputLength) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, Shape{1, 1, 2, 4});
  auto y = run_op1("Resize", {x, Value::none(), scales({1, 1, 0.6f, 0.6f})},
                   {attr("mode", "linear"), attr("coordinate_transformation_mode", "align_corners")}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(*y, Shape{1, 1, 1, 2}, {1, 3.142857f});
}

TEST(ResizeTest, DownsampleCubic) {
  Tensor x = Tensor::from_vector<float>(iota16(), Shape{1, 1, 4, 4});
  auto y = run_op1("Resize", {x, Value::none(), scales({1, 1, 0.8f, 0.8f})}, {attr("mode", "cubic")}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(*y, Shape{1, 1, 3, 3},
              {1.47119140625f, 2.78125f, 4.08251953125f, 6.71142578125f, 8.021484375f, 9.32275390625f,
               11.91650390625f, 13.2265625f, 14.52783203125f});
}

TEST(ResizeTest, CubicExcludeOutsideRenormalizes) {
  Tensor x = Tensor::from_vector<float>(iota16(), Shape{1, 1, 4, 4});
  auto y = run_op1("Resize", {x, Value::none(), scales({1, 1, 0.8f, 0.8f})},
                   {attr("mode", "cubic"), attr("cubic_coeff_a", -0.5f), attr("exclude_outside", 1)}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(*y, Shape{1, 1, 3, 3},
              {1.3681267f, 2.6695013f, 4.0133367f, 6.573625f, 7.875f, 9.218835f, 11.948966f, 13.250341f,
               14.594176f});
}

TEST(ResizeTest, NearestCeilHalfPixelWithSizes) {
  Tensor x = Tensor::from_vector<float>(iota16(), Shape{1, 1, 4, 4});
  auto y = run_op1("Resize", {x, Value::none(), Value::none(), sizes({1, 1, 8, 8})},
                   {attr("mode", "nearest"), attr("nearest_mode", "ceil")}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, 1, 8, 8}));
  const float row0[] = {1, 2, 2, 3, 3, 4, 4, 4};
  const float row7[] = {13, 14, 14, 15, 15, 16, 16, 16};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(y->data<float>()[i], row0[i]);
    EXPECT_EQ(y->data<float>()[56 + i], row7[i]);
  }
}

TEST(ResizeTest, TfCropAndResizeExtrapolates) {
  Tensor x = Tensor::from_vector<float>(iota16(), Shape{1, 1, 4, 4});
  Tensor roi = Tensor::from_vector<float>({0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f});
  auto y = run_op1("Resize", {x, roi, Value::none(), sizes({1, 1, 3, 3})},
                   {attr("mode", "linear"), attr("coordinate_transformation_mode", "tf_crop_and_resize"),
                    attr("extrapolation_value", 10.f)},
                   13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(*y, Shape{1, 1, 3, 3}, {7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10});
}

TEST(ResizeTest, TfHalfPixelForNnOpset11) {
  Tensor x = Tensor::from_vector<float>(iota16(), Shape{1, 1, 4, 4});
  Tensor empty = Tensor::allocate(DType::kFloat32, Shape{0});
  auto y = run_op1("Resize", {x, empty, empty, sizes({1, 1, 3, 2})},
                   {attr("mode", "nearest"), attr("coordinate_transformation_mode", "tf_half_pixel_for_nn")}, 11);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(*y, Shape{1, 1, 3, 2}, {6, 8, 10, 12, 14, 16});
}

TEST(ResizeTest, UpsampleOpset7AttributeAndOpset9Input) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{1, 1, 2, 2});
  auto a = run_op1("Upsample", {x}, {attr("mode", "nearest"), attr("scales", std::vector<float>{1, 1, 2, 3})}, 7);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto b = run_op1("Upsample", {x, scales({1, 1, 2, 3})}, {attr("mode", "nearest")}, 9);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  const std::vector<float> want = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
  expect_near(*a, Shape{1, 1, 4, 6}, want);
  expect_near(*b, Shape{1, 1, 4, 6}, want);
}

TEST(ResizeTest, IntegerNearestIsExact) {
  Tensor x = Tensor::from_vector<int64_t>({(int64_t{1} << 60) + 1, 7}, Shape{2});
  auto y = run_op1("Resize", {x, Value::none(), scales({2})}, {attr("mode", "nearest")}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{4}));
  EXPECT_EQ(y->data<int64_t>()[0], (int64_t{1} << 60) + 1);
  EXPECT_EQ(y->data<int64_t>()[3], 7);
}

TEST(ResizeTest, ThreeDLinearMatchesSeparableHandComputation) {
  // 2x2x2 -> 3x3x3 with align_corners: the center is the mean of all eight
  // corners, the last element the last corner.
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, Shape{2, 2, 2});
  auto y = run_op1("Resize", {x, Value::none(), Value::none(), sizes({3, 3, 3})},
                   {attr("mode", "linear"), attr("coordinate_transformation_mode", "align_corners")}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{3, 3, 3}));
  EXPECT_NEAR(y->data<float>()[13], 3.5f, 1e-6f);
  EXPECT_NEAR(y->data<float>()[26], 7.f, 1e-6f);
}

TEST(ResizeTest, AntialiasWidensTheLinearFilterWhenDownscaling) {
  // Opset 18, scale 0.5: the tent filter spans 4 inputs with weights
  // (1, 3, 3, 1) / 8 around each source coordinate 2o + 0.5 (edges clamp).
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, Shape{8});
  auto y = run_op1("Resize", {x, Value::none(), scales({0.5f})}, {attr("mode", "linear"), attr("antialias", 1)}, 18);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near(*y, Shape{4}, {0.625f, 2.5f, 4.5f, 6.375f});
  // Without antialias the same resize reads only the two nearest inputs.
  auto plain = run_op1("Resize", {x, Value::none(), scales({0.5f})}, {attr("mode", "linear")}, 18);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  expect_near(*plain, Shape{4}, {0.5f, 2.5f, 4.5f, 6.5f});
}

TEST(ResizeTest, AxesAndKeepAspectRatioPolicy) {
  // Opset 18: sizes for axes (2, 3) only; not_larger keeps the aspect ratio
  // with the smaller of the two scales (min(4 / 2, 3 / 2) = 1.5 -> 3 x 3).
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{1, 1, 2, 2});
  auto y = run_op1("Resize", {x, Value::none(), Value::none(), sizes({4, 3})},
                   {attr("axes", std::vector<int64_t>{2, 3}), attr("keep_aspect_ratio_policy", "not_larger")}, 18);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (Shape{1, 1, 3, 3}));
}

TEST(ResizeTest, ThreadedRunMatchesSingleThreaded) {
  std::vector<float> v(4 * 64 * 64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 101) * 0.25f;
  testing::OpCall call;
  call.op_type = "Resize";
  call.inputs = {Tensor::from_vector(v, Shape{1, 4, 64, 64}), Value::none(), scales({1, 1, 2, 1.5f})};
  call.attrs = {attr("mode", "cubic")};
  call.opset = 13;
  auto one = run_op(call);
  call.threads = 2;
  auto two = run_op(call);
  ASSERT_TRUE(one.ok() && two.ok());
  const Tensor& a = (*one)[0].tensor();
  const Tensor& b = (*two)[0].tensor();
  ASSERT_EQ(a.shape(), (Shape{1, 4, 128, 96}));
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;
}

// Bilinear NCHW resizes (the planar float path, which blends each input row
// along x once for all the output rows that read it) against a double
// reference: big upsamplings (segmentation heads: 16x16 -> 256x256), odd
// factors, a downsampling, both common coordinate modes, threads 1/2/3.
TEST(ResizeTest, BilinearPlanarMatchesReference) {
  struct Case {
    int64_t h, w, oh, ow;
    const char* coord;
  };
  const Case cases[] = {{16, 16, 256, 256, "half_pixel"}, {5, 7, 40, 21, "half_pixel"}, {9, 6, 14, 9, "align_corners"},
                        {12, 10, 6, 4, "half_pixel"},     {3, 3, 3, 17, "align_corners"}};
  for (const Case& c : cases) {
    const int64_t n = 2, ch = 3;
    std::vector<float> v(static_cast<size_t>(n * ch * c.h * c.w));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 53) % 97) * 0.125f - 5.f;
    const bool corners = std::string(c.coord) == "align_corners";
    auto coord = [&](int64_t o, int64_t in, int64_t out) {
      const double x = corners ? (out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0)
                               : (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
      return std::min(std::max(x, 0.0), static_cast<double>(in - 1));
    };
    std::vector<double> want;
    for (int64_t p = 0; p < n * ch; ++p)
      for (int64_t oy = 0; oy < c.oh; ++oy)
        for (int64_t ox = 0; ox < c.ow; ++ox) {
          const double y = coord(oy, c.h, c.oh), x = coord(ox, c.w, c.ow);
          const int64_t y0 = static_cast<int64_t>(std::floor(y)), x0 = static_cast<int64_t>(std::floor(x));
          const int64_t y1 = std::min(y0 + 1, c.h - 1), x1 = std::min(x0 + 1, c.w - 1);
          const double ty = y - static_cast<double>(y0), tx = x - static_cast<double>(x0);
          auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(v[static_cast<size_t>((p * c.h + yy) * c.w + xx)]); };
          want.push_back((1 - ty) * ((1 - tx) * at(y0, x0) + tx * at(y0, x1)) + ty * ((1 - tx) * at(y1, x0) + tx * at(y1, x1)));
        }
    for (int threads = 1; threads <= 3; ++threads) {
      testing::OpCall call;
      call.op_type = "Resize";
      call.inputs = {Tensor::from_vector(v, Shape{n, ch, c.h, c.w}), Value::none(), Value::none(),
                     sizes({n, ch, c.oh, c.ow})};
      call.attrs = {attr("mode", "linear"), attr("coordinate_transformation_mode", c.coord)};
      call.opset = 13;
      call.threads = threads;
      auto y = run_op(call);
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      const Tensor& t = (*y)[0].tensor();
      ASSERT_EQ(t.shape(), (Shape{n, ch, c.oh, c.ow}));
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(t.data<float>()[i], want[i], 2e-5) << c.h << "x" << c.w << " -> " << c.oh << "x" << c.ow << " "
                                                       << c.coord << " threads " << threads << " at " << i;
    }
  }
}

// Nearest NCHW resizes (the planar float path: integer x factors broadcast
// each value, repeated y rows copy the row above, other tables gather)
// against the ONNX formula computed here: factors 1, 2, 3 and 4, unequal x/y
// factors, non-integer up- and downsampling, widths not a multiple of the
// vector length, asymmetric/floor and half_pixel/round_prefer_floor, threads
// 1/2/3.
TEST(ResizeTest, NearestPlanarMatchesReference) {
  struct Case {
    int64_t h, w, oh, ow;
    bool half_pixel;
  };
  const Case cases[] = {{20, 20, 40, 40, false}, {10, 13, 20, 26, true},  {7, 9, 21, 27, false}, {5, 6, 20, 24, true},
                        {8, 8, 8, 8, false},     {6, 11, 12, 11, false},  {9, 5, 9, 10, true},   {5, 7, 8, 17, true},
                        {12, 10, 7, 4, false},   {1, 3, 4, 6, false},     {33, 17, 66, 51, true}};
  for (const Case& c : cases) {
    const int64_t n = 2, ch = 3;
    std::vector<float> v(static_cast<size_t>(n * ch * c.h * c.w));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 53) % 97) * 0.125f - 5.f;
    // ONNX Resize: x_original from the output coordinate, then the nearest
    // index (floor, or round with ties down), clamped into the input.
    auto index = [&](int64_t o, int64_t in, int64_t out) {
      const double scale = static_cast<double>(out) / static_cast<double>(in);
      const double x = c.half_pixel ? (static_cast<double>(o) + 0.5) / scale - 0.5 : static_cast<double>(o) / scale;
      const double r = c.half_pixel ? (x - std::floor(x) <= 0.5 ? std::floor(x) : std::floor(x) + 1) : std::floor(x);
      return std::min(std::max(static_cast<int64_t>(r), int64_t{0}), in - 1);
    };
    std::vector<float> want;
    for (int64_t p = 0; p < n * ch; ++p)
      for (int64_t oy = 0; oy < c.oh; ++oy)
        for (int64_t ox = 0; ox < c.ow; ++ox)
          want.push_back(v[static_cast<size_t>((p * c.h + index(oy, c.h, c.oh)) * c.w + index(ox, c.w, c.ow))]);
    for (int threads = 1; threads <= 3; ++threads) {
      testing::OpCall call;
      call.op_type = "Resize";
      call.inputs = {Tensor::from_vector(v, Shape{n, ch, c.h, c.w}), Value::none(), Value::none(),
                     sizes({n, ch, c.oh, c.ow})};
      call.attrs = {attr("mode", "nearest")};
      if (c.half_pixel) {
        call.attrs.push_back(attr("nearest_mode", "round_prefer_floor"));
      } else {
        call.attrs.push_back(attr("coordinate_transformation_mode", "asymmetric"));
        call.attrs.push_back(attr("nearest_mode", "floor"));
      }
      call.opset = 13;
      call.threads = threads;
      auto y = run_op(call);
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      const Tensor& t = (*y)[0].tensor();
      ASSERT_EQ(t.shape(), (Shape{n, ch, c.oh, c.ow}));
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(t.data<float>()[i], want[i]) << c.h << "x" << c.w << " -> " << c.oh << "x" << c.ow
                                               << (c.half_pixel ? " half_pixel" : " asymmetric") << " threads "
                                               << threads << " at " << i;
    }
  }
}

TEST(ResizeTest, RejectsBothScalesAndSizes) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{1, 1, 2, 2});
  auto y = run_op1("Resize", {x, Value::none(), scales({1, 1, 2, 2}), sizes({1, 1, 4, 4})}, {}, 13);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("exactly one"), std::string::npos) << y.status().message();
}

TEST(ResizeTest, RejectsWrongScalesLengthAndBadMode) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, Shape{1, 1, 2, 2});
  auto a = run_op1("Resize", {x, Value::none(), scales({2, 2})}, {}, 13);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("scales has 2 values, expected 4"), std::string::npos) << a.status().message();
  auto b = run_op1("Resize", {x, Value::none(), scales({1, 1, 2, 2})}, {attr("mode", "area")}, 13);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("mode 'area'"), std::string::npos) << b.status().message();
  auto c = run_op1("Resize", {x, Value::none(), scales({1, 1, -2, 2})}, {}, 13);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("must be positive"), std::string::npos) << c.status().message();
}

}  // namespace
}  // namespace kiln
