// kiln ChannelScaledConv against Conv(X * S) computed naively: both of its
// paths (X scaled while packed for the GEMM; small maps known at load as
// Y^T = X^T W^T from a scaled scratch), W constant or not, with and without
// bias, one scale for all images or one per image, channel counts off the
// vector width, one to three threads; bad inputs get errors.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/testing/kernel_runner.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::random_tensor;
using testing::run_op;

struct Case {
  int64_t n, c, h, w, m;
  bool per_image;  // S [N, C, 1, 1]; else [1, C, 1, 1]
};

std::vector<float> reference(const Case& k, const Tensor& x, const Tensor& w, const Tensor* b, const Tensor& s) {
  const int64_t hw = k.h * k.w;
  std::vector<float> y(static_cast<size_t>(k.n * k.m * hw));
  for (int64_t img = 0; img < k.n; ++img)
    for (int64_t o = 0; o < k.m; ++o)
      for (int64_t p = 0; p < hw; ++p) {
        double acc = b ? b->data<float>()[o] : 0.0;
        for (int64_t ch = 0; ch < k.c; ++ch) {
          const float sc = s.data<float>()[(k.per_image ? img * k.c : 0) + ch];
          acc += static_cast<double>(w.data<float>()[o * k.c + ch]) * (x.data<float>()[(img * k.c + ch) * hw + p] * sc);
        }
        y[static_cast<size_t>((img * k.m + o) * hw + p)] = static_cast<float>(acc);
      }
  return y;
}

Result<std::vector<Value>> run_scaled(std::vector<Value> inputs, bool constant, int threads) {
  testing::OpCall call;
  call.op_type = "ChannelScaledConv";
  call.domain = "kiln";
  call.opset = 1;
  call.inputs = std::move(inputs);
  call.inputs_are_constant = constant;
  call.threads = threads;
  return run_op(call);
}

TEST(ChannelScaledConvTest, MatchesConvOfScaledInput) {
  std::mt19937 rng(41);
  // 7x7 with 32 outputs runs transposed when W is constant (49 positions
  // fill 64 lanes); the others run with X scaled while packed.
  const Case cases[] = {{1, 37, 7, 7, 32, false}, {2, 37, 7, 7, 32, true}, {2, 21, 7, 7, 48, false},
                        {1, 19, 14, 14, 5, false}, {2, 33, 3, 5, 17, true}, {1, 8, 1, 1, 3, false},
                        {1, 70, 28, 28, 24, false}};
  for (const Case& k : cases) {
    const Tensor x = random_tensor({k.n, k.c, k.h, k.w}, rng);
    const Tensor w = random_tensor({k.m, k.c, 1, 1}, rng);
    const Tensor b = random_tensor({k.m}, rng);
    const Tensor s = random_tensor({k.per_image ? k.n : 1, k.c, 1, 1}, rng, 0.f, 1.f);
    for (bool with_bias : {true, false}) {
      const std::vector<float> want = reference(k, x, w, with_bias ? &b : nullptr, s);
      for (bool constant : {true, false})
        for (int threads : {1, 2, 3}) {
          const std::string what = "case c " + std::to_string(k.c) + " " + std::to_string(k.h) + "x" +
                                   std::to_string(k.w) + " m " + std::to_string(k.m) + " n " + std::to_string(k.n) +
                                   " bias " + std::to_string(with_bias) + " constant " + std::to_string(constant) +
                                   " threads " + std::to_string(threads);
          auto r = run_scaled({x, w, with_bias ? Value(b) : Value::none(), s}, constant, threads);
          ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
          const Tensor& y = (*r)[0].tensor();
          ASSERT_EQ(y.shape(), (Shape{k.n, k.m, k.h, k.w})) << what;
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(y.data<float>()[i], want[i], 1e-4) << what << " at " << i;
        }
    }
  }
}

TEST(ChannelScaledConvTest, ScaleOfRankThreeBroadcastsOverImages) {
  std::mt19937 rng(42);
  const Case k{2, 9, 4, 4, 6, false};
  const Tensor x = random_tensor({2, 9, 4, 4}, rng), w = random_tensor({6, 9, 1, 1}, rng);
  const Tensor s4 = random_tensor({1, 9, 1, 1}, rng);
  const Tensor s3 = Tensor::from_vector<float>(std::vector<float>(s4.data<float>(), s4.data<float>() + 9), {9, 1, 1});
  const std::vector<float> want = reference(k, x, w, nullptr, s4);
  auto r = run_scaled({x, w, Value::none(), s3}, false, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR((*r)[0].tensor().data<float>()[i], want[i], 1e-4);
}

TEST(ChannelScaledConvTest, RejectsBadInputs) {
  std::mt19937 rng(43);
  const Tensor x = random_tensor({2, 4, 3, 3}, rng);
  auto error_of = [&](const Tensor& w, const Tensor& s, const Value& b) {
    auto r = run_scaled({x, w, b, s}, false, 1);
    return r.ok() ? std::string() : r.status().to_string();
  };
  const Tensor w = random_tensor({5, 4, 1, 1}, rng), s = random_tensor({1, 4, 1, 1}, rng);
  EXPECT_NE(error_of(random_tensor({5, 3, 1, 1}, rng), s, Value::none()).find("input 1 (W)"), std::string::npos);
  EXPECT_NE(error_of(random_tensor({5, 4, 3, 3}, rng), s, Value::none()).find("input 1 (W)"), std::string::npos);
  EXPECT_NE(error_of(w, random_tensor({1, 3, 1, 1}, rng), Value::none()).find("input 3 (S)"), std::string::npos);
  EXPECT_NE(error_of(w, random_tensor({1, 4, 3, 3}, rng), Value::none()).find("input 3 (S)"), std::string::npos);
  EXPECT_NE(error_of(w, random_tensor({3, 4, 1, 1}, rng), Value::none()).find("input 3 (S)"), std::string::npos);
  EXPECT_NE(error_of(w, s, random_tensor({4}, rng)).find("input 2 (B)"), std::string::npos);
  EXPECT_EQ(error_of(w, s, random_tensor({5}, rng)), "");
}

}  // namespace
}  // namespace kiln
