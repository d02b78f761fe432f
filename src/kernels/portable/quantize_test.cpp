// Quantization kernels: rounding and saturation rules, per-axis parameters,
// and exact integer products (K well past the float32-exact range, extreme
// values) against naive int64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op;
using testing::run_op1;

template <class T>
std::vector<T> values(const Tensor& t) {
  return {t.data<T>(), t.data<T>() + t.numel()};
}

TEST(QuantizeLinearTest, RoundsHalfToEvenAndSaturates) {
  Tensor x = Tensor::from_vector<float>({0.f, 1.f, 1.5f, 2.5f, -1.5f, 1000.f, -1000.f}, {7});
  auto u = run_op1("QuantizeLinear", {x, Tensor::scalar(1.f), Tensor::scalar(uint8_t{128})});
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(values<uint8_t>(*u), (std::vector<uint8_t>{128, 129, 130, 130, 126, 255, 0}));
  auto s = run_op1("QuantizeLinear", {x, Tensor::scalar(0.5f), Tensor::scalar(int8_t{-1})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->dtype(), DType::kInt8);
  EXPECT_EQ(values<int8_t>(*s), (std::vector<int8_t>{-1, 1, 2, 4, -4, 127, -128}));
  auto d = run_op1("QuantizeLinear", {x, Tensor::scalar(1.f)});  // default: uint8, zero point 0
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dtype(), DType::kUInt8);
  EXPECT_EQ(values<uint8_t>(*d), (std::vector<uint8_t>{0, 1, 2, 2, 0, 255, 0}));
}

TEST(QuantizeLinearTest, PerAxisAndInt32Input) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {1, 3, 2});
  auto y = run_op1("QuantizeLinear", {x, Tensor::from_vector<float>({1, 2, 4}), Tensor::from_vector<uint8_t>({0, 10, 20})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values<uint8_t>(*y), (std::vector<uint8_t>{1, 2, 12, 12, 21, 22}));
  auto y0 = run_op1("QuantizeLinear", {Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), Tensor::from_vector<float>({1, 2}),
                                       Tensor::from_vector<uint8_t>({0, 0})},
                    {attr("axis", int64_t{0})});
  ASSERT_TRUE(y0.ok());
  EXPECT_EQ(values<uint8_t>(*y0), (std::vector<uint8_t>{1, 2, 2, 2}));
  auto yi = run_op1("QuantizeLinear", {Tensor::from_vector<int32_t>({-10, 10}), Tensor::scalar(4.f), Tensor::scalar(int8_t{0})});
  ASSERT_TRUE(yi.ok());
  EXPECT_EQ(values<int8_t>(*yi), (std::vector<int8_t>{-2, 2}));  // -2.5 and 2.5 round to even
  auto bad = run_op1("QuantizeLinear", {x, Tensor::from_vector<float>({1, 2})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("scale"), std::string::npos);
}

TEST(DequantizeLinearTest, PerTensorPerAxisAndInt32) {
  auto y = run_op1("DequantizeLinear", {Tensor::from_vector<uint8_t>({0, 128, 255}), Tensor::scalar(0.5f), Tensor::scalar(uint8_t{128})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(values<float>(*y), (std::vector<float>{-64.f, 0.f, 63.5f}));
  auto ya = run_op1("DequantizeLinear", {Tensor::from_vector<int8_t>({1, 2, 3, 4}, {1, 2, 2}), Tensor::from_vector<float>({1, 10}),
                                         Tensor::from_vector<int8_t>({0, 1})});
  ASSERT_TRUE(ya.ok());
  EXPECT_EQ(values<float>(*ya), (std::vector<float>{1, 2, 20, 30}));
  auto yi = run_op1("DequantizeLinear", {Tensor::from_vector<int32_t>({-4, 6}), Tensor::scalar(0.25f)});
  ASSERT_TRUE(yi.ok());
  EXPECT_EQ(values<float>(*yi), (std::vector<float>{-1.f, 1.5f}));
  auto bad = run_op1("DequantizeLinear", {Tensor::from_vector<uint8_t>({1}), Tensor::scalar(1.f), Tensor::scalar(int8_t{0})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 2 (x_zero_point)"), std::string::npos);
}

TEST(DynamicQuantizeLinearTest, ComputesScaleAndZeroPoint) {
  testing::OpCall call;
  call.op_type = "DynamicQuantizeLinear";
  call.inputs = {Tensor::from_vector<float>({0.f, 2.f, -3.f, -2.5f, 1.34f, 0.5f})};
  call.num_outputs = 3;
  auto r = run_op(call);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<uint8_t>((*r)[0].tensor()), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
  EXPECT_NEAR((*r)[1].tensor().data<float>()[0], 5.f / 255.f, 1e-7);
  EXPECT_EQ((*r)[2].tensor().data<uint8_t>()[0], 153);
  // All zeros: scale 0, everything 0.
  call.inputs = {Tensor::from_vector<float>({0.f, 0.f})};
  auto z = run_op(call);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ((*z)[1].tensor().data<float>()[0], 0.f);
  EXPECT_EQ(values<uint8_t>((*z)[0].tensor()), (std::vector<uint8_t>{0, 0}));
}

template <class T>
Tensor random_ints(const Shape& s, std::mt19937& rng, bool extreme) {
  Tensor t = Tensor::allocate(dtype_of<T>, s);
  std::uniform_int_distribution<int> d(std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max());
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = extreme ? std::numeric_limits<T>::lowest() : static_cast<T>(d(rng));
  return t;
}

TEST(MatMulIntegerTest, ExactBeyondFloatPrecision) {
  std::mt19937 rng(51);
  // K = 1000 with int8 -128 * -128 sums to 16,384,000 > 2^24: must stay exact.
  for (bool extreme : {true, false}) {
    const int64_t m = 5, k = 1000, n = 7;
    Tensor a = random_ints<int8_t>({2, m, k}, rng, extreme), b = random_ints<int8_t>({k, n}, rng, extreme);
    Tensor azp = Tensor::scalar(int8_t{0}), bzp = Tensor::scalar(static_cast<int8_t>(extreme ? 0 : 3));
    auto y = run_op1("MatMulInteger", {a, b, azp, bzp}, {}, 10);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    ASSERT_EQ(y->shape(), (Shape{2, m, n}));
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          int64_t s = 0;
          for (int64_t p = 0; p < k; ++p)
            s += int64_t{a.data<int8_t>()[(t * m + i) * k + p]} * (b.data<int8_t>()[p * n + j] - (extreme ? 0 : 3));
          ASSERT_EQ(y->data<int32_t>()[(t * m + i) * n + j], s);
        }
  }
}

TEST(MatMulIntegerTest, PerRowAndPerColumnZeroPoints) {
  Tensor a = Tensor::from_vector<uint8_t>({10, 20, 30, 40}, {2, 2});
  Tensor b = Tensor::from_vector<uint8_t>({1, 2, 3, 4}, {2, 2});
  auto y = run_op1("MatMulInteger", {a, b, Tensor::from_vector<uint8_t>({10, 30}), Tensor::from_vector<uint8_t>({1, 2})}, {}, 10);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // A - azp = [[0, 10], [0, 10]], B - bzp = [[0, 0], [2, 2]]
  EXPECT_EQ(values<int32_t>(*y), (std::vector<int32_t>{20, 20, 20, 20}));
  auto bad = run_op1("MatMulInteger", {a, b, Tensor::from_vector<uint8_t>({1, 2, 3})}, {}, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a_zero_point"), std::string::npos);
}

TEST(QLinearMatMulTest, MatchesFloatReference) {
  std::mt19937 rng(52);
  const int64_t m = 3, k = 300, n = 4;
  Tensor a = random_ints<uint8_t>({m, k}, rng, false), b = random_ints<uint8_t>({k, n}, rng, false);
  const float as = 0.02f, bs = 0.01f, ys = 20.f;
  auto y = run_op1("QLinearMatMul", {a, Tensor::scalar(as), Tensor::scalar(uint8_t{120}), b, Tensor::scalar(bs),
                                     Tensor::scalar(uint8_t{130}), Tensor::scalar(ys), Tensor::scalar(uint8_t{100})},
                   {}, 10);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t p = 0; p < k; ++p) s += (a.data<uint8_t>()[i * k + p] - 120) * (b.data<uint8_t>()[p * n + j] - 130);
      const double want = std::clamp(std::nearbyint(static_cast<double>(s) * as * bs / ys) + 100, 0.0, 255.0);
      EXPECT_NEAR(y->data<uint8_t>()[i * n + j], want, 1.0);  // float vs double scale product
    }
}

TEST(ConvIntegerTest, MatchesNaiveIntegerConv) {
  std::mt19937 rng(53);
  const int64_t c = 6, h = 7, w = 6, m = 4, group = 2, kh = 3, kw = 2;
  Tensor x = random_ints<uint8_t>({2, c, h, w}, rng, false), wt = random_ints<uint8_t>({m, c / group, kh, kw}, rng, false);
  auto y = run_op1("ConvInteger", {x, wt, Tensor::scalar(uint8_t{100}), Tensor::scalar(uint8_t{7})},
                   {attr("group", group), attr("pads", std::vector<int64_t>{1, 0, 1, 1}),
                    attr("strides", std::vector<int64_t>{2, 1})},
                   10);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const int64_t oh = (h + 2 - kh) / 2 + 1, ow = (w + 1 - kw) / 1 + 1;
  ASSERT_EQ(y->shape(), (Shape{2, m, oh, ow}));
  for (int64_t img = 0; img < 2; ++img)
    for (int64_t oc = 0; oc < m; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t s = 0;
          for (int64_t ci = 0; ci < c / group; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t b = 0; b < kw; ++b) {
                const int64_t r = i * 2 - 1 + a, q = j + b;
                if (r < 0 || r >= h || q < 0 || q >= w) continue;  // padding holds the zero point
                const int64_t cin = (oc / (m / group)) * (c / group) + ci;
                s += (x.data<uint8_t>()[((img * c + cin) * h + r) * w + q] - 100) *
                     (wt.data<uint8_t>()[((oc * (c / group) + ci) * kh + a) * kw + b] - 7);
              }
          ASSERT_EQ(y->data<int32_t>()[((img * m + oc) * oh + i) * ow + j], s);
        }
}

TEST(QLinearConvTest, PerChannelScalesAndBias) {
  // 1x1 conv, 2 output channels, per-channel weight scale, int32 bias.
  Tensor x = Tensor::from_vector<uint8_t>({10, 20}, {1, 1, 1, 2});
  Tensor w = Tensor::from_vector<int8_t>({2, -3}, {2, 1, 1, 1});
  auto y = run_op1("QLinearConv", {x, Tensor::scalar(0.5f), Tensor::scalar(uint8_t{10}), w, Tensor::from_vector<float>({1.f, 2.f}),
                                   Tensor::from_vector<int8_t>({0, 0}), Tensor::scalar(1.f), Tensor::scalar(uint8_t{50}),
                                   Tensor::from_vector<int32_t>({4, 0})},
                   {}, 10);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // ch0: ((x-10)*2 + 4) * 0.5 * 1 + 50 -> [52, 62]; ch1: (x-10)*(-3) * 0.5 * 2 + 50 -> [50, 20]
  EXPECT_EQ(values<uint8_t>(*y), (std::vector<uint8_t>{52, 62, 50, 20}));
  auto bad = run_op1("QLinearConv", {x, Tensor::scalar(0.5f), Tensor::scalar(uint8_t{10}), w, Tensor::scalar(1.f),
                                     Tensor::scalar(int8_t{0}), Tensor::scalar(1.f), Tensor::scalar(uint8_t{50}),
                                     Tensor::from_vector<int32_t>({4})},
                     {}, 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 8 (B)"), std::string::npos);
}

}  // namespace
}  // namespace kiln

namespace kiln::kernels {
namespace {

// Found by fuzz.session: NaN converted to uint8 was undefined behaviour.
TEST(QuantizeNanTest, NanQuantizesToTheZeroPoint) {
  Tensor x = Tensor::from_vector<float>({std::nanf(""), 1.f});
  auto y = kiln::testing::run_op1("QuantizeLinear",
                                  {Value(x), Value(Tensor::scalar<float>(0.5f)), Value(Tensor::scalar<uint8_t>(7))});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->data<uint8_t>()[0], 7);
  EXPECT_EQ(y->data<uint8_t>()[1], 9);
}

}  // namespace
}  // namespace kiln::kernels
