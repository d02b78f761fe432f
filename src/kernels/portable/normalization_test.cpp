// Normalization kernels against straightforward double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

const float* f(const Tensor& t) { return t.data<float>(); }

TEST(BatchNormTest, InferenceMatchesFormula) {
  std::mt19937 rng(41);
  Tensor x = random_tensor({2, 3, 4, 5}, rng), s = random_tensor({3}, rng), b = random_tensor({3}, rng);
  Tensor m = random_tensor({3}, rng), v = random_tensor({3}, rng, 0.1f, 2.f);
  for (int opset : {6, 9, 15}) {
    testing::OpCall call;
    call.op_type = "BatchNormalization";
    call.inputs = {x, s, b, m, v};
    call.attrs = {attr("epsilon", 1e-3f)};
    call.opset = opset;
    call.threads = 2;
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = (*r)[0].tensor();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t c = (i / 20) % 3;
      const double want = (f(x)[i] - f(m)[c]) / std::sqrt(f(v)[c] + 1e-3) * f(s)[c] + f(b)[c];
      ASSERT_NEAR(f(y)[i], want, 1e-5) << "opset " << opset;
    }
  }
}

TEST(BatchNormTest, TrainingModeUsesBatchStatistics) {
  std::mt19937 rng(42);
  Tensor x = random_tensor({3, 2, 4}, rng), s = random_tensor({2}, rng), b = random_tensor({2}, rng);
  Tensor m = random_tensor({2}, rng), v = random_tensor({2}, rng, 0.5f, 1.f);
  testing::OpCall call;
  call.op_type = "BatchNormalization";
  call.inputs = {x, s, b, m, v};
  call.attrs = {attr("training_mode", int64_t{1}), attr("momentum", 0.8f)};
  call.num_outputs = 3;
  call.opset = 15;
  auto r = run_op(call);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (int64_t c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 4; ++i) sum += f(x)[(n * 2 + c) * 4 + i];
    const double mean = sum / 12;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i = 0; i < 4; ++i) sq += std::pow(f(x)[(n * 2 + c) * 4 + i] - mean, 2);
    const double var = sq / 12;  // biased
    EXPECT_NEAR(f((*r)[1].tensor())[c], f(m)[c] * 0.8 + mean * 0.2, 1e-5);
    EXPECT_NEAR(f((*r)[2].tensor())[c], f(v)[c] * 0.8 + var * 0.2, 1e-5);
    const int64_t i0 = c * 4;  // n = 0, first element
    EXPECT_NEAR(f((*r)[0].tensor())[i0], (f(x)[i0] - mean) / std::sqrt(var + 1e-5) * f(s)[c] + f(b)[c], 1e-4);
  }
}

TEST(BatchNormTest, NonSpatialBeforeOpset9) {
  // spatial = 0: one parameter per (C, H) element.
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 1, 2});
  Tensor ones = Tensor::from_vector<float>({1, 1}, {1, 2}), zeros = Tensor::from_vector<float>({0, 0}, {1, 2});
  Tensor mean = Tensor::from_vector<float>({1, 2}, {1, 2});
  auto y = run_op1("BatchNormalization", {x, ones, zeros, mean, ones}, {attr("spatial", int64_t{0}), attr("epsilon", 0.f)}, 7);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(std::vector<float>(f(*y), f(*y) + 4), (std::vector<float>{0, 0, 2, 2}));
}

TEST(BatchNormTest, RejectsWrongParameterSize) {
  Tensor x = Tensor::zeros(DType::kFloat32, {1, 3, 2, 2}), p3 = Tensor::zeros(DType::kFloat32, {3});
  auto y = run_op1("BatchNormalization", {x, p3, p3, Tensor::zeros(DType::kFloat32, {4}), p3});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("input 3 (mean)"), std::string::npos) << y.status().message();
  auto y2 = run_op1("BatchNormalization", {x, p3, p3, p3});
  ASSERT_FALSE(y2.ok());
  EXPECT_NE(y2.status().message().find("input 4 (var)"), std::string::npos);
}

TEST(LayerNormTest, MatchesNaiveForEveryAxis) {
  std::mt19937 rng(43);
  const Shape shape{2, 3, 4, 5};
  Tensor x = random_tensor(shape, rng);
  for (int64_t axis = -4; axis < 4; ++axis) {
    const int64_t a = axis < 0 ? axis + 4 : axis;
    Shape norm;
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < 4; ++d) {
      if (d < a) rows *= shape[static_cast<size_t>(d)];
      else {
        cols *= shape[static_cast<size_t>(d)];
        norm.push_back(shape[static_cast<size_t>(d)]);
      }
    }
    Tensor s = random_tensor(norm, rng), b = random_tensor(norm, rng);
    testing::OpCall call;
    call.op_type = "LayerNormalization";
    call.inputs = {x, s, b};
    call.attrs = {attr("axis", axis), attr("epsilon", 1e-4f)};
    call.num_outputs = 3;
    call.threads = 2;
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    for (int64_t row = 0; row < rows; ++row) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < cols; ++i) mean += f(x)[row * cols + i];
      mean /= static_cast<double>(cols);
      for (int64_t i = 0; i < cols; ++i) var += std::pow(f(x)[row * cols + i] - mean, 2);
      var /= static_cast<double>(cols);
      const double inv = 1 / std::sqrt(var + 1e-4);
      for (int64_t i = 0; i < cols; ++i)
        ASSERT_NEAR(f((*r)[0].tensor())[row * cols + i], (f(x)[row * cols + i] - mean) * inv * f(s)[i] + f(b)[i], 1e-4)
            << "axis " << axis;
      EXPECT_NEAR(f((*r)[1].tensor())[row], mean, 1e-5);
      EXPECT_NEAR(f((*r)[2].tensor())[row], inv, 1e-3);
    }
    Shape stat = shape;
    for (int64_t d = a; d < 4; ++d) stat[static_cast<size_t>(d)] = 1;
    EXPECT_EQ((*r)[1].tensor().shape(), stat);
  }
}

TEST(LayerNormTest, BroadcastScaleAndNoBias) {
  Tensor x = Tensor::from_vector<float>({1, 3, 2, 6}, {2, 2});
  auto y = run_op1("LayerNormalization", {x, Tensor::scalar(2.f)}, {attr("epsilon", 0.f)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(std::vector<float>(f(*y), f(*y) + 4), (std::vector<float>{-2, 2, -2, 2}));
  auto bad = run_op1("LayerNormalization", {x, Tensor::zeros(DType::kFloat32, {3})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 1 (Scale)"), std::string::npos);
  auto bad_axis = run_op1("LayerNormalization", {x, Tensor::scalar(1.f)}, {attr("axis", int64_t{2})});
  ASSERT_FALSE(bad_axis.ok());
  EXPECT_NE(bad_axis.status().message().find("axis"), std::string::npos);
}

TEST(InstanceNormTest, NormalizesEachPlane) {
  Tensor x = Tensor::from_vector<float>({1, 3, 10, 20, 0, 4, 5, 5}, {2, 2, 2});
  auto y = run_op1("InstanceNormalization",
                   {x, Tensor::from_vector<float>({1, 2}), Tensor::from_vector<float>({0, 1})}, {attr("epsilon", 0.f)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // planes: [1,3] -> [-1,1]; [10,20] -> 2*[-1,1]+1; [0,4] -> [-1,1] (the constant plane [5,5] is 0/0, unchecked)
  EXPECT_FLOAT_EQ(f(*y)[0], -1.f);
  EXPECT_FLOAT_EQ(f(*y)[1], 1.f);
  EXPECT_FLOAT_EQ(f(*y)[2], -1.f);
  EXPECT_FLOAT_EQ(f(*y)[3], 3.f);
  EXPECT_FLOAT_EQ(f(*y)[4], -1.f);
  auto bad = run_op1("InstanceNormalization", {x, Tensor::from_vector<float>({1}), Tensor::from_vector<float>({0, 1})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 1 (scale)"), std::string::npos);
}

TEST(LrnTest, MatchesFormula) {
  std::mt19937 rng(44);
  Tensor x = random_tensor({2, 5, 3, 2}, rng);
  const float alpha = 0.01f, beta = 0.6f, bias = 1.5f;
  const int64_t size = 4;  // window [c-1, c+2]
  auto y = run_op1("LRN", {x}, {attr("alpha", alpha), attr("beta", beta), attr("bias", bias), attr("size", size)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 5; ++c)
      for (int64_t i = 0; i < 6; ++i) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, c - 1); k <= std::min<int64_t>(4, c + 2); ++k)
          sq += std::pow(f(x)[(n * 5 + k) * 6 + i], 2);
        const int64_t at = (n * 5 + c) * 6 + i;
        EXPECT_NEAR(f(*y)[at], f(x)[at] / std::pow(bias + alpha / size * sq, beta), 1e-6);
      }
  EXPECT_FALSE(run_op1("LRN", {x}, {attr("size", int64_t{0})}).ok());
}

TEST(MvnTest, NormalizesOverAxes) {
  std::mt19937 rng(45);
  Tensor x = random_tensor({2, 3, 2, 2}, rng);
  auto y = run_op1("MeanVarianceNormalization", {x}, {}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  for (int64_t c = 0; c < 3; ++c) {  // default axes [0, 2, 3]: per channel
    double mean = 0, var = 0;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 4; ++i) mean += f(x)[(n * 3 + c) * 4 + i];
    mean /= 8;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 4; ++i) var += std::pow(f(x)[(n * 3 + c) * 4 + i] - mean, 2);
    const double sd = std::sqrt(var / 8);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t i = 0; i < 4; ++i) {
        const int64_t at = (n * 3 + c) * 4 + i;
        EXPECT_NEAR(f(*y)[at], (f(x)[at] - mean) / (sd + 1e-9), 1e-5);
      }
  }
  auto last = run_op1("MeanVarianceNormalization", {Tensor::from_vector<float>({1, 3, 5, 5}, {2, 2})},
                      {attr("axes", std::vector<int64_t>{-1})}, 13);
  ASSERT_TRUE(last.ok());
  EXPECT_NEAR(f(*last)[0], -1.f, 1e-6);
  EXPECT_NEAR(f(*last)[1], 1.f, 1e-6);
  EXPECT_FALSE(run_op1("MeanVarianceNormalization", {x}, {attr("axes", std::vector<int64_t>{7})}, 13).ok());
}

TEST(NormalizationTest, HalfPrecisionIsStaged) {
  auto y = run_op1("InstanceNormalization", {Tensor::from_vector<Float16>({Float16(1.f), Float16(3.f)}, {1, 1, 2}),
                                             Tensor::from_vector<Float16>({Float16(1.f)}), Tensor::from_vector<Float16>({Float16(0.f)})},
                   {attr("epsilon", 0.f)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kFloat16);
  EXPECT_EQ(static_cast<float>(y->data<Float16>()[1]), 1.f);
}

}  // namespace
}  // namespace kiln

namespace kiln::kernels {
namespace {

// Found by fuzz.session: axis 0 of a scalar was accepted and indexed a
// per-dimension array out of bounds.
TEST(MvnScalarTest, ScalarInputIsAnErrorNamingTheAxis) {
  auto y = kiln::testing::run_op1("MeanVarianceNormalization", {Value(Tensor::scalar<float>(1.f))},
                                  {kiln::testing::attr("axes", std::vector<int64_t>{0})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("axis 0 is out of range for rank 0"), std::string::npos)
      << y.status().message();
}

}  // namespace
}  // namespace kiln::kernels
