// KernelInit's typed attribute reads, through a real factory.
#include <gtest/gtest.h>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op1;

TEST(KernelInitTest, AttributeOfTheWrongTypeIsAnErrorNamingNodeAndAttribute) {
  Tensor x = Tensor::allocate(DType::kFloat32, Shape{2});
  x.data<float>()[0] = -1.f;
  x.data<float>()[1] = 1.f;
  Result<Tensor> r = run_op1("Elu", {Value(x)}, {attr("alpha", "big")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "node Elu 'test_Elu': attribute 'alpha' has type string, expected float");
}

TEST(KernelInitTest, TheTypeErrorComesBeforeWhatFollowedFromTheDefault) {
  // hidden_size read as a float gives the default 0, which init() rejects;
  // the error the user sees is the one that explains it.
  Tensor x = Tensor::allocate(DType::kFloat32, Shape{1, 1, 1});
  Result<Tensor> r = run_op1("RNN", {Value(x), Value(x), Value(x)}, {attr("hidden_size", 2.f)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node RNN 'test_RNN': attribute 'hidden_size' has type float, expected int");
}

}  // namespace
}  // namespace kiln
