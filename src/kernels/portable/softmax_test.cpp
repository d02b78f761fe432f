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

Tensor ramp(Shape s, float scale) {
  Tensor t = Tensor::allocate(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 7) % 11) * scale - 3.f;
  return t;
}

// Softmax of x viewed as [outer, n, inner] along n, in double.
std::vector<double> reference(const Tensor& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  std::vector<double> y(static_cast<size_t>(x.numel()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < n; ++k) m = std::max<double>(m, x.data<float>()[(o * n + k) * inner + i]);
      for (int64_t k = 0; k < n; ++k) s += std::exp(x.data<float>()[(o * n + k) * inner + i] - m);
      for (int64_t k = 0; k < n; ++k) {
        const double v = x.data<float>()[(o * n + k) * inner + i];
        y[static_cast<size_t>((o * n + k) * inner + i)] = log ? v - m - std::log(s) : std::exp(v - m) / s;
      }
    }
  return y;
}

TEST(SoftmaxTest, EveryAxisOpset13MatchesReference) {
  Tensor x = ramp({3, 4, 5}, 0.7f);
  const int64_t dims[3] = {3, 4, 5};
  for (int64_t axis = 0; axis < 3; ++axis) {
    for (bool log : {false, true}) {
      auto r = run_op1(log ? "LogSoftmax" : "Softmax", {x}, {attr("axis", axis)}, 13);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
      for (int64_t d = axis + 1; d < 3; ++d) inner *= dims[d];
      std::vector<double> want = reference(x, outer, dims[axis], inner, log);
      for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(r->data<float>()[i], want[i], 1e-6) << "axis " << axis;
    }
  }
}

TEST(SoftmaxTest, OldOpsetsCoerceTo2D) {
  Tensor x = ramp({2, 3, 4}, 0.5f);
  auto r = run_op1("Softmax", {x}, {}, 11);  // axis 1: rows of 12
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<double> want = reference(x, 2, 12, 1, false);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(r->data<float>()[i], want[i], 1e-6);
  r = run_op1("LogSoftmax", {x}, {attr("axis", 0)}, 1);  // one row of 24
  ASSERT_TRUE(r.ok());
  want = reference(x, 1, 24, 1, true);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(r->data<float>()[i], want[i], 1e-5);
}

TEST(SoftmaxTest, LargeValuesAndWideRange) {
  Tensor x = Tensor::from_vector<float>({10000, 10001, 10002, -10000, 0, 80}, Shape{2, 3});
  auto r = run_op1("Softmax", {x});
  ASSERT_TRUE(r.ok());
  std::vector<double> want = reference(x, 2, 3, 1, false);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r->data<float>()[i], want[i], 1e-6);
  // Exercises the vectorized exp over its whole domain against std::exp.
  Tensor wide = Tensor::allocate(DType::kFloat32, Shape{1, 2001});
  for (int64_t i = 0; i < 2001; ++i) wide.data<float>()[i] = -100.f + 0.05f * static_cast<float>(i);
  r = run_op1("LogSoftmax", {wide});
  ASSERT_TRUE(r.ok());
  want = reference(wide, 1, 2001, 1, true);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(r->data<float>()[i], want[i], 1e-4 * (1 + std::fabs(want[i])));
}

TEST(SoftmaxTest, DoubleAndHalf) {
  Tensor d = Tensor::from_vector<double>({1, 2, 3}, Shape{3});
  auto r = run_op1("Softmax", {d});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_NEAR(r->data<double>()[2], std::exp(3.0) / s, 1e-12);
  Tensor h = Tensor::from_vector<Float16>({Float16(0.f), Float16(0.f)}, Shape{2});
  r = run_op1("Softmax", {h});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<float>(r->data<Float16>()[0]), 0.5f);
}

TEST(SoftmaxTest, AttentionShapeInParallel) {
  OpCall call;
  call.op_type = "Softmax";
  Tensor x = ramp({2, 4, 64, 64}, 0.3f);
  call.inputs = {x};
  call.threads = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok());
  std::vector<double> want = reference(x, 2 * 4 * 64, 64, 1, false);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR((*out)[0].tensor().data<float>()[i], want[i], 1e-6);
}

TEST(HardmaxTest, FirstMaxWinsPerAxis) {
  Tensor x = Tensor::from_vector<float>({3, 1, 3, 0, 2, 2}, Shape{2, 3});
  auto r = run_op1("Hardmax", {x});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  r = run_op1("Hardmax", {x}, {attr("axis", 0)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 0, 1, 0, 1, 0}));
}

TEST(SoftmaxTest, BadAxisIsAnError) {
  Tensor x = ramp({2, 3}, 1.f);
  EXPECT_FALSE(run_op1("Softmax", {x}, {attr("axis", 2)}).ok());
  EXPECT_FALSE(run_op1("Softmax", {x}, {attr("axis", 3)}, 11).ok());
  EXPECT_FALSE(run_op1("Softmax", {Tensor::from_vector<int32_t>({1, 2})}).ok());
}

}  // namespace
}  // namespace kiln
