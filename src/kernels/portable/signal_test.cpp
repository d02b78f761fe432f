// DFT/STFT/window/MelWeightMatrix tests: transforms against a naive O(n^2)
// DFT computed here, windows and the mel matrix against the ONNX backend
// test data (test_hannwindow, test_melweightmatrix).
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op1;

// Naive DFT of complex values (sign -1 forward).
std::vector<std::complex<double>> naive_dft(const std::vector<std::complex<double>>& x, double sign) {
  const size_t n = x.size();
  std::vector<std::complex<double>> y(n);
  for (size_t k = 0; k < n; ++k)
    for (size_t j = 0; j < n; ++j)
      y[k] += x[j] * std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(j * k % n) / static_cast<double>(n));
  return y;
}

void check_dft_length(int64_t n) {
  std::vector<float> in(static_cast<size_t>(n));
  std::vector<std::complex<double>> ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    in[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)) + 0.1 * static_cast<double>(i));
    ref[static_cast<size_t>(i)] = in[static_cast<size_t>(i)];
  }
  auto y = run_op1("DFT", {Tensor::from_vector(in, Shape{1, n, 1})}, {}, 17);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, n, 2}));
  const auto want = naive_dft(ref, -1);
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_NEAR(y->data<float>()[2 * k], want[static_cast<size_t>(k)].real(), 1e-4) << "n " << n << " k " << k;
    EXPECT_NEAR(y->data<float>()[2 * k + 1], want[static_cast<size_t>(k)].imag(), 1e-4) << "n " << n << " k " << k;
  }
}

TEST(SignalTest, DftMatchesNaiveForPowerOfTwoAndOtherLengths) {
  for (int64_t n : {1, 2, 8, 10, 13, 64, 100}) check_dft_length(n);
}

TEST(SignalTest, DftInverseRoundTripsComplexInputAlongAxis) {
  // [1, 3, 2, 2]: DFT along axis 2 (length 2) for each of 3 rows, then back.
  std::vector<float> x = {1, 2, 3, 4, -1, 0.5f, 2, -2, 0, 1, 7, 3};
  auto fwd = run_op1("DFT", {Tensor::from_vector(x, Shape{1, 3, 2, 2})}, {attr("axis", 2)}, 17);
  ASSERT_TRUE(fwd.ok()) << fwd.status().to_string();
  // Row 0: (1+2i) + (3+4i) = 4+6i, (1+2i) - (3+4i) = -2-2i.
  EXPECT_FLOAT_EQ(fwd->data<float>()[0], 4);
  EXPECT_FLOAT_EQ(fwd->data<float>()[1], 6);
  EXPECT_FLOAT_EQ(fwd->data<float>()[2], -2);
  EXPECT_FLOAT_EQ(fwd->data<float>()[3], -2);
  auto back = run_op1("DFT", {*fwd}, {attr("axis", 2), attr("inverse", 1)}, 17);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back->data<float>()[i], x[i], 1e-6f);
}

TEST(SignalTest, DftOpset20TakesAxisFromInput) {
  // [1, 2, 2, 1]: transform along axis 1 (of length 2) given as input 2.
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 5}, Shape{1, 2, 2, 1});
  auto y = run_op1("DFT", {x, Value::none(), Tensor::scalar<int64_t>(1)}, {}, 20);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, 2, 2, 2}));
  const float want[] = {4, 0, 7, 0, -2, 0, -3, 0};  // column sums, then differences
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y->data<float>()[i], want[i], 1e-6f) << i;
  // The default axis is -2, the last signal axis: here axis 2.
  auto d = run_op1("DFT", {x}, {}, 20);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_NEAR(d->data<float>()[0], 3, 1e-6f);
  EXPECT_NEAR(d->data<float>()[2], -1, 1e-6f);
}

TEST(SignalTest, DftOnesidedAndDftLengthPadding) {
  // x = [1, 1] padded to 4: X = [2, 1-i, 0, 1+i]; onesided keeps 3 bins.
  auto y = run_op1("DFT", {Tensor::from_vector<float>({1, 1}, Shape{1, 2, 1}), Tensor::scalar<int64_t>(4)},
                   {attr("onesided", 1)}, 17);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, 3, 2}));
  const float want[] = {2, 0, 1, -1, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(y->data<float>()[i], want[i], 1e-6f) << i;
}

TEST(SignalTest, StftFramesWindowAndOnesided) {
  // Signal 0..7, frame 4, step 2: 3 frames; bin 0 of frame f is the sum
  // of its samples times the window.
  std::vector<float> sig(8);
  for (int i = 0; i < 8; ++i) sig[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor window = Tensor::from_vector<float>({0, 1, 1, 0});
  auto y = run_op1("STFT", {Tensor::from_vector(sig, Shape{1, 8, 1}), Tensor::scalar<int64_t>(2), window}, {}, 17);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ(y->shape(), (Shape{1, 3, 3, 2}));
  EXPECT_FLOAT_EQ(y->data<float>()[0], 1 + 2);
  EXPECT_FLOAT_EQ(y->data<float>()[6], 3 + 4);
  EXPECT_FLOAT_EQ(y->data<float>()[12], 5 + 6);
  // Frame 0 windowed = [0, 1, 2, 0]: bin 1 = 1*(-i) + 2*(-1) = -2 - i.
  EXPECT_NEAR(y->data<float>()[2], -2, 1e-6f);
  EXPECT_NEAR(y->data<float>()[3], -1, 1e-6f);
}

TEST(SignalTest, HannWindowPeriodicAndSymmetric) {
  auto p = run_op1("HannWindow", {Tensor::scalar<int32_t>(10)}, {}, 17);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const float want[] = {0, 0.0954915f, 0.3454915f, 0.6545085f, 0.9045085f, 1, 0.9045085f, 0.6545085f, 0.3454915f, 0.0954915f};
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(p->data<float>()[i], want[i], 1e-6f) << i;
  auto s = run_op1("HannWindow", {Tensor::scalar<int32_t>(5)}, {attr("periodic", 0), attr("output_datatype", 11)}, 17);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->dtype(), DType::kFloat64);
  const double sym[] = {0, 0.5, 1, 0.5, 0};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(s->data<double>()[i], sym[i], 1e-12) << i;
}

TEST(SignalTest, HammingAndBlackmanEndpoints) {
  auto h = run_op1("HammingWindow", {Tensor::scalar<int64_t>(3)}, {attr("periodic", 0)}, 17);
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_NEAR(h->data<float>()[0], 25.f / 46 - 21.f / 46, 1e-6f);
  EXPECT_NEAR(h->data<float>()[1], 1.f, 1e-6f);
  auto b = run_op1("BlackmanWindow", {Tensor::scalar<int64_t>(3)}, {attr("periodic", 0)}, 17);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_NEAR(b->data<float>()[0], 0.f, 1e-6f);
  EXPECT_NEAR(b->data<float>()[1], 1.f, 1e-6f);
}

TEST(SignalTest, MelWeightMatrixMatchesOnnxData) {
  auto m = run_op1("MelWeightMatrix",
                   {Tensor::scalar<int32_t>(8), Tensor::scalar<int32_t>(16), Tensor::scalar<int32_t>(8192),
                    Tensor::scalar<float>(0), Tensor::scalar<float>(4096)},
                   {}, 17);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->shape(), (Shape{9, 8}));
  // Non-zero entries (row, col) of the expected matrix; all others are 0.
  const int ones[][2] = {{0, 0}, {0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}};
  std::vector<float> want(72, 0.f);
  for (const auto& o : ones) want[static_cast<size_t>(o[0] * 8 + o[1])] = 1.f;
  for (size_t i = 0; i < 72; ++i) EXPECT_EQ(m->data<float>()[i], want[i]) << i;
}

TEST(SignalTest, RejectsBadInputs) {
  auto axis = run_op1("DFT", {Tensor::from_vector<float>({1, 2}, Shape{1, 2, 1})}, {attr("axis", 2)}, 17);
  ASSERT_FALSE(axis.ok());
  EXPECT_NE(axis.status().message().find("axis 2"), std::string::npos) << axis.status().message();
  auto last = run_op1("DFT", {Tensor::from_vector<float>({1, 2, 3}, Shape{1, 1, 3})}, {}, 17);
  ASSERT_FALSE(last.ok());
  auto frame = run_op1("STFT", {Tensor::from_vector<float>({1, 2}, Shape{1, 2, 1}), Tensor::scalar<int64_t>(1),
                                Value::none(), Tensor::scalar<int64_t>(4)},
                       {}, 17);
  ASSERT_FALSE(frame.ok());
  EXPECT_NE(frame.status().message().find("longer than the signal"), std::string::npos) << frame.status().message();
  auto size = run_op1("HannWindow", {Tensor::scalar<int64_t>(-1)}, {}, 17);
  ASSERT_FALSE(size.ok());
}

}  // namespace
}  // namespace kiln
