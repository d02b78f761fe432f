// kiln::PreActivationConv (conv_preact.h) against BatchNormalization, Relu
// and Conv run one after the other: the pointwise GEMM path (transform while
// packing B), the transposed pointwise path and the other convs (a transform
// pass first), bias or not, an activation after, batch, threads 1/2/3, and
// its input checks.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::random_tensor;

struct Case {
  Shape x, w;
  std::vector<int64_t> pads;
  int64_t group = 1;
  bool bias = true;
};

// BatchNormalization -> Relu -> Conv (-> Relu) through the portable kernels.
Tensor unfused(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b, const std::vector<Tensor>& bn,
               bool relu_after) {
  auto norm = testing::run_op1("BatchNormalization", {x, bn[0], bn[1], bn[2], bn[3]}, {attr("epsilon", 1e-3f)}, 15);
  EXPECT_TRUE(norm.ok());
  auto act = testing::run_op1("Relu", {*norm}, {}, 14);
  std::vector<Value> in{Value(*act), Value(w)};
  if (c.bias) in.push_back(Value(b));
  auto y = testing::run_op1("Conv", in, {attr("pads", c.pads), attr("group", c.group)}, 11);
  EXPECT_TRUE(y.ok()) << y.status().to_string();
  if (!relu_after) return *y;
  return *testing::run_op1("Relu", {*y}, {}, 14);
}

Result<Tensor> fused(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b, const std::vector<Tensor>& bn,
                     bool relu_after, int threads) {
  testing::OpCall call;
  call.op_type = "PreActivationConv";
  call.domain = "kiln";
  call.opset = 1;
  call.inputs = {Value(x), Value(w), c.bias ? Value(b) : Value::none(), Value(bn[0]), Value(bn[1]), Value(bn[2]),
                 Value(bn[3])};
  call.attrs = {attr("pads", c.pads), attr("group", c.group), attr("epsilon", 1e-3f)};
  if (relu_after) call.attrs.push_back(attr("activation", std::string("Relu")));
  call.inputs_are_constant = true;
  call.threads = threads;
  auto out = testing::run_op(call);
  if (!out.ok()) return std::move(out).status();
  return (*out)[0].tensor();
}

TEST(PreActivationConvTest, MatchesBatchNormReluConv) {
  std::mt19937 rng(31);
  const Case cases[] = {
      {{1, 40, 12, 12}, {24, 40, 1, 1}, {0, 0, 0, 0}},               // pointwise: transform while packing
      {{2, 33, 9, 13}, {130, 33, 1, 1}, {0, 0, 0, 0}, 1, false},     // odd channels, 2 images, no bias
      {{1, 64, 7, 7}, {128, 64, 1, 1}, {0, 0, 0, 0}},                // 7x7: the transposed path, a pass first
      {{1, 300, 16, 16}, {20, 300, 1, 1}, {0, 0, 0, 0}},             // K across cache blocks
      {{1, 16, 10, 10}, {8, 16, 3, 3}, {1, 1, 1, 1}},                // 3x3: a pass first
      {{1, 12, 8, 8}, {6, 4, 1, 1}, {0, 0, 0, 0}, 3},                // grouped
      {{1, 20, 30}, {10, 20, 1}, {0, 0}},                            // 1-D
  };
  for (const Case& c : cases) {
    const int64_t ch = c.x[1];
    Tensor x = random_tensor(c.x, rng, -2.f, 2.f), w = random_tensor(c.w, rng), b = random_tensor({c.w[0]}, rng);
    const std::vector<Tensor> bn{random_tensor({ch}, rng), random_tensor({ch}, rng), random_tensor({ch}, rng),
                                 random_tensor({ch}, rng, 0.2f, 2.f)};
    for (bool relu_after : {false, true}) {
      const Tensor want = unfused(c, x, w, b, bn, relu_after);
      for (int threads = 1; threads <= 3; ++threads) {
        auto got = fused(c, x, w, b, bn, relu_after, threads);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        ASSERT_EQ(got->shape(), want.shape());
        for (int64_t i = 0; i < want.numel(); ++i)
          ASSERT_NEAR(got->data<float>()[i], want.data<float>()[i], 1e-5f * static_cast<float>(ch))
              << c.x.to_string() << " -> " << c.w.to_string() << " threads " << threads << " at " << i;
      }
    }
  }
}

TEST(PreActivationConvTest, RejectsNormalizationOfTheWrongSize) {
  std::mt19937 rng(32);
  const Case c{{1, 8, 4, 4}, {4, 8, 1, 1}, {0, 0, 0, 0}};
  Tensor x = random_tensor(c.x, rng), w = random_tensor(c.w, rng), b = random_tensor({4}, rng);
  const std::vector<Tensor> bn{random_tensor({8}, rng), random_tensor({7}, rng), random_tensor({8}, rng),
                               random_tensor({8}, rng, 0.5f, 1.f)};
  auto got = fused(c, x, w, b, bn, false, 1);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("input 4 (bias)"), std::string::npos) << got.status().message();
}

}  // namespace
}  // namespace kiln
