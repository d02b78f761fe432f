// Det against hand-checked determinants.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::run_op1;

TEST(DetTest, MatchesKnownDeterminants) {
  // [[2, 0, 1], [1, 3, 2], [1, 1, 1]] -> 2*(3-2) - 0 + 1*(1-3) = 0; identity -> 1; [[0, 1], [1, 0]] -> -1
  auto y = run_op1("Det", {Tensor::from_vector<float>({2, 0, 1, 1, 3, 2, 1, 1, 1}, {3, 3})}, {}, 11);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), Shape{});
  EXPECT_NEAR(y->data<float>()[0], 0.f, 1e-6);
  auto b = run_op1("Det", {Tensor::from_vector<float>({1, 0, 0, 1, 0, 1, 1, 0, 4, 3, 6, 3}, {3, 2, 2})}, {}, 11);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->shape(), (Shape{3}));
  EXPECT_EQ(std::vector<float>(b->data<float>(), b->data<float>() + 3), (std::vector<float>{1, -1, -6}));
  auto d = run_op1("Det", {Tensor::from_vector<double>({4, 7, 2, 6}, {2, 2})}, {}, 11);
  ASSERT_TRUE(d.ok());
  EXPECT_NEAR(d->data<double>()[0], 10.0, 1e-12);
  auto bad = run_op1("Det", {Tensor::zeros(DType::kFloat32, {2, 3})}, {}, 11);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[..., M, M]"), std::string::npos);
}

}  // namespace
}  // namespace kiln
