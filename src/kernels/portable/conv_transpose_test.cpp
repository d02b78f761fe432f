// ConvTranspose against a naive scatter reference over random shapes,
// strides, pads, dilations, output_padding and groups; output_shape and
// auto_pad pad derivation; errors.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

// 2-D scatter: every x[n, c, i, j] adds x * w[c, m, ki, kj] to
// y[n, g*Mg + m, i*s - pad + ki*d, ...] when inside the output.
Tensor naive_deconv_2d(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group, std::vector<int64_t> st,
                       std::vector<int64_t> dl, std::vector<int64_t> pb, std::vector<int64_t> out) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  const int64_t mg = w.dim(1), m = mg * group, cg = c / group, kh = w.dim(2), kw = w.dim(3);
  Tensor y = Tensor::zeros(DType::kFloat32, {n, m, out[0], out[1]});
  float* yd = y.data<float>();
  for (int64_t img = 0; img < n; ++img)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t i = 0; i < out[0] * out[1]; ++i) yd[(img * m + oc) * out[0] * out[1] + i] = b ? b->data<float>()[oc] : 0.f;
  for (int64_t img = 0; img < n; ++img)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < wd; ++j)
          for (int64_t mo = 0; mo < mg; ++mo)
            for (int64_t ki = 0; ki < kh; ++ki)
              for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t oi = i * st[0] - pb[0] + ki * dl[0], oj = j * st[1] - pb[1] + kj * dl[1];
                if (oi < 0 || oi >= out[0] || oj < 0 || oj >= out[1]) continue;
                const int64_t oc = (ci / cg) * mg + mo;
                yd[((img * m + oc) * out[0] + oi) * out[1] + oj] +=
                    x.data<float>()[((img * c + ci) * h + i) * wd + j] * w.data<float>()[((ci * mg + mo) * kh + ki) * kw + kj];
              }
  return y;
}

void expect_near(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4) << what << " at " << i;
}

TEST(ConvTransposeTest, MatchesNaiveOnRandom2D) {
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> u(0, 1000);
  for (int t = 0; t < 40; ++t) {
    const int64_t group = 1 + t % 3, cg = 1 + u(rng) % 3, mg = 1 + u(rng) % 3;
    const Shape xs{1 + u(rng) % 2, cg * group, 2 + u(rng) % 6, 2 + u(rng) % 6};
    const Shape ws{cg * group, mg, 1 + u(rng) % 4, 1 + u(rng) % 3};
    std::vector<int64_t> st{1 + u(rng) % 3, 1 + u(rng) % 3}, dl{1 + u(rng) % 2, 1 + u(rng) % 2};
    std::vector<int64_t> pads{u(rng) % 2, u(rng) % 2, u(rng) % 2, u(rng) % 2};
    std::vector<int64_t> op{u(rng) % st[0], u(rng) % st[1]};  // output_padding < stride
    std::vector<int64_t> out(2);
    for (size_t d = 0; d < 2; ++d)
      out[d] = st[d] * (xs[d + 2] - 1) + op[d] + (ws[d + 2] - 1) * dl[d] + 1 - pads[d] - pads[d + 2];
    Tensor x = random_tensor(xs, rng), w = random_tensor(ws, rng), b = random_tensor({mg * group}, rng);
    const Tensor want = naive_deconv_2d(x, w, &b, group, st, dl, {pads[0], pads[1]}, out);
    for (bool constant : {false, true}) {
      testing::OpCall call;
      call.op_type = "ConvTranspose";
      call.inputs = {x, w, b};
      call.attrs = {attr("group", group), attr("strides", st), attr("dilations", dl), attr("pads", pads),
                    attr("output_padding", op)};
      call.inputs_are_constant = constant;
      call.threads = constant ? 2 : 1;
      auto r = run_op(call);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      expect_near((*r)[0].tensor(), want, "case " + std::to_string(t));
    }
  }
}

TEST(ConvTransposeTest, OutputShapeAndAutoPadDerivePads) {
  std::mt19937 rng(22);
  Tensor x = random_tensor({1, 2, 3, 3}, rng), w = random_tensor({2, 3, 3, 3}, rng);
  // full output is 2*(3-1)+3 = 7; output_shape 6 pads 1: at the begin unless SAME_UPPER.
  auto lower = run_op1("ConvTranspose", {x, w}, {attr("strides", std::vector<int64_t>{2, 2}),
                                                 attr("output_shape", std::vector<int64_t>{6, 6})});
  ASSERT_TRUE(lower.ok()) << lower.status().to_string();
  expect_near(*lower, naive_deconv_2d(x, w, nullptr, 1, {2, 2}, {1, 1}, {1, 1}, {6, 6}), "output_shape");
  auto upper = run_op1("ConvTranspose", {x, w}, {attr("strides", std::vector<int64_t>{2, 2}), attr("auto_pad", "SAME_UPPER")});
  ASSERT_TRUE(upper.ok()) << upper.status().to_string();
  expect_near(*upper, naive_deconv_2d(x, w, nullptr, 1, {2, 2}, {1, 1}, {0, 0}, {6, 6}), "SAME_UPPER");
  auto same_lower = run_op1("ConvTranspose", {x, w}, {attr("strides", std::vector<int64_t>{2, 2}), attr("auto_pad", "SAME_LOWER")});
  ASSERT_TRUE(same_lower.ok());
  expect_near(*same_lower, naive_deconv_2d(x, w, nullptr, 1, {2, 2}, {1, 1}, {1, 1}, {6, 6}), "SAME_LOWER");
  // Larger than the full output: zeros appended at the end (output_shape with N, C too).
  auto bigger = run_op1("ConvTranspose", {x, w}, {attr("strides", std::vector<int64_t>{2, 2}),
                                                  attr("output_shape", std::vector<int64_t>{1, 3, 8, 7})});
  ASSERT_TRUE(bigger.ok()) << bigger.status().to_string();
  expect_near(*bigger, naive_deconv_2d(x, w, nullptr, 1, {2, 2}, {1, 1}, {0, 0}, {8, 7}), "bigger");
}

TEST(ConvTransposeTest, OneDAndThreeD) {
  // 1-D: x = [1, 2, 3], w = [1, 1], stride 2 -> [1, 1, 2, 2, 3, 3]
  auto y1 = run_op1("ConvTranspose", {Tensor::from_vector<float>({1, 2, 3}, {1, 1, 3}), Tensor::from_vector<float>({1, 1}, {1, 1, 2})},
                    {attr("strides", std::vector<int64_t>{2})});
  ASSERT_TRUE(y1.ok()) << y1.status().to_string();
  EXPECT_EQ(std::vector<float>(y1->data<float>(), y1->data<float>() + 6), (std::vector<float>{1, 1, 2, 2, 3, 3}));
  // 3-D all-ones: each output counts the windows covering it.
  auto y3 = run_op1("ConvTranspose", {Tensor::from_vector<float>(std::vector<float>(8, 1.f), {1, 1, 2, 2, 2}),
                                      Tensor::from_vector<float>(std::vector<float>(8, 1.f), {1, 1, 2, 2, 2})});
  ASSERT_TRUE(y3.ok());
  EXPECT_EQ(y3->shape(), (Shape{1, 1, 3, 3, 3}));
  EXPECT_EQ(y3->data<float>()[13], 8.f);  // centre
  EXPECT_EQ(y3->data<float>()[0], 1.f);   // corner
  EXPECT_EQ(y3->data<float>()[1], 2.f);   // edge
}

TEST(ConvTransposeTest, RejectsBadInputs) {
  Tensor x = Tensor::zeros(DType::kFloat32, {1, 4, 3, 3});
  auto e1 = run_op1("ConvTranspose", {x, Tensor::zeros(DType::kFloat32, {3, 2, 3, 3})});
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.status().message().find("input 1 (W)"), std::string::npos);
  auto e2 = run_op1("ConvTranspose", {x, Tensor::zeros(DType::kFloat32, {4, 2, 3, 3})}, {attr("group", 3)});
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.status().message().find("group"), std::string::npos);
  auto e3 = run_op1("ConvTranspose", {x, Tensor::zeros(DType::kFloat32, {4, 2, 3, 3}), Tensor::zeros(DType::kFloat32, {4})});
  ASSERT_FALSE(e3.ok());
  EXPECT_NE(e3.status().message().find("input 2 (B)"), std::string::npos);
  auto e4 = run_op1("ConvTranspose", {x, Tensor::zeros(DType::kFloat32, {4, 2, 3, 3})},
                    {attr("output_shape", std::vector<int64_t>{5})});
  ASSERT_FALSE(e4.ok());
  EXPECT_NE(e4.status().message().find("output_shape"), std::string::npos);
  auto e5 = run_op1("ConvTranspose", {x, Tensor::zeros(DType::kFloat32, {4, 2, 1, 1})},
                    {attr("pads", std::vector<int64_t>{2, 2, 2, 2})});
  ASSERT_FALSE(e5.ok());
  EXPECT_NE(e5.status().message().find("pads"), std::string::npos);
}

}  // namespace
}  // namespace kiln
