#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

// Reference: reduce iota([2, 3, 4]) over `axes` with a plain loop.
std::vector<double> reference_sum(const std::vector<int64_t>& axes) {
  const int64_t dims[3] = {2, 3, 4};
  bool red[3] = {false, false, false};
  for (int64_t a : axes) red[a] = true;
  int64_t od[3];
  for (int d = 0; d < 3; ++d) od[d] = red[d] ? 1 : dims[d];
  std::vector<double> out(static_cast<size_t>(od[0] * od[1] * od[2]), 0.0);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t oi = red[0] ? 0 : i, oj = red[1] ? 0 : j, ok = red[2] ? 0 : k;
        out[static_cast<size_t>((oi * od[1] + oj) * od[2] + ok)] += static_cast<double>((i * 3 + j) * 4 + k);
      }
  return out;
}

TEST(ReduceTest, SumOverEveryAxisSubsetMatchesReference) {
  const std::vector<std::vector<int64_t>> subsets = {{0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (const auto& axes : subsets) {
    auto r = run_op1("ReduceSum", {iota_f({2, 3, 4}), ints(axes)});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::vector<double> want = reference_sum(axes);
    ASSERT_EQ(r->numel(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(r->data<float>()[i], want[i]) << "axes size " << axes.size();
  }
}

TEST(ReduceTest, KeepdimsAndDefaultAxes) {
  auto r = run_op1("ReduceMean", {iota_f({2, 3})}, {attr("axes", std::vector<int64_t>{-1}), attr("keepdims", 0)}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 4}));
  r = run_op1("ReduceMax", {iota_f({2, 3})}, {}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{1, 1}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{5}));
}

TEST(ReduceTest, NoopWithEmptyAxes) {
  auto r = run_op1("ReduceSum", {iota_f({2, 2}), ints({})}, {attr("noop_with_empty_axes", 1)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 2}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 1, 2, 3}));
  r = run_op1("ReduceSum", {iota_f({2, 2}), ints({})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{6}));
}

TEST(ReduceTest, EveryOperator) {
  Tensor x = Tensor::from_vector<float>({1, -2, 3, 4}, Shape{2, 2});
  auto run = [&](const char* op) {
    auto r = run_op1(op, {x}, {attr("axes", std::vector<int64_t>{1})}, 13);
    EXPECT_TRUE(r.ok()) << op << ": " << r.status().to_string();
    return r.ok() ? vals<float>(*r) : std::vector<float>{};
  };
  EXPECT_EQ(run("ReduceSum"), (std::vector<float>{-1, 7}));
  EXPECT_EQ(run("ReduceMin"), (std::vector<float>{-2, 3}));
  EXPECT_EQ(run("ReduceProd"), (std::vector<float>{-2, 12}));
  EXPECT_EQ(run("ReduceL1"), (std::vector<float>{3, 7}));
  EXPECT_EQ(run("ReduceSumSquare"), (std::vector<float>{5, 25}));
  EXPECT_EQ(run("ReduceL2"), (std::vector<float>{std::sqrt(5.f), 5}));
  std::vector<float> ls = run("ReduceLogSum");
  EXPECT_TRUE(std::isnan(ls[0]));
  EXPECT_FLOAT_EQ(ls[1], std::log(7.f));
  std::vector<float> lse = run("ReduceLogSumExp");
  EXPECT_FLOAT_EQ(lse[0], std::log(std::exp(1.f) + std::exp(-2.f)));
  EXPECT_FLOAT_EQ(lse[1], std::log(std::exp(3.f) + std::exp(4.f)));
}

TEST(ReduceTest, LogSumExpIsStableForLargeValues) {
  Tensor x = Tensor::from_vector<float>({1000, 1000}, Shape{2});
  auto r = run_op1("ReduceLogSumExp", {x}, {attr("keepdims", 0)}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_FLOAT_EQ(*r->data<float>(), 1000.f + std::log(2.f));
}

TEST(ReduceTest, IntegersAndHalf) {
  Tensor x = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  auto r = run_op1("ReduceSum", {x, ints({0})}, {attr("keepdims", 0)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<int32_t>(*r), (std::vector<int32_t>{5, 7, 9}));
  r = run_op1("ReduceMean", {x}, {attr("axes", std::vector<int64_t>{1})}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<int32_t>(*r), (std::vector<int32_t>{2, 5}));
  Tensor h = Tensor::from_vector<Float16>({Float16(1.5f), Float16(2.5f)}, Shape{2});
  r = run_op1("ReduceSum", {h});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<float>(*r->data<Float16>()), 4.f);
}

// Found by fuzz_session: ReduceLogSum of integer zeros cast log(0) = -inf to
// int64 (UB); integer results of log/sqrt now saturate like Cast.
TEST(ReduceTest, IntegerLogSumOfZerosSaturates) {
  Tensor x = Tensor::zeros(DType::kInt64, Shape{2, 3});
  for (int64_t axis : {0, 1}) {  // column and row paths
    auto r = run_op1("ReduceLogSum", {x}, {attr("axes", std::vector<int64_t>{axis}), attr("keepdims", int64_t{0})}, 13);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    for (int64_t v : vals<int64_t>(*r)) EXPECT_EQ(v, std::numeric_limits<int64_t>::min()) << axis;
  }
}

TEST(ReduceTest, EmptyReductionGivesIdentity) {
  Tensor x = Tensor::allocate(DType::kFloat32, Shape{2, 0});
  auto r = run_op1("ReduceSum", {x, ints({1})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 0}));
  r = run_op1("ReduceProd", {x}, {attr("axes", std::vector<int64_t>{1})}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 1}));
}

// An integer mean over no elements is 0 (fuzz_session: it divided by zero).
TEST(ReduceTest, IntegerMeanOfEmptyAxisIsZero) {
  Tensor x = Tensor::allocate(DType::kInt32, Shape{2, 0});
  for (int64_t axis : {0, 1}) {
    auto r = run_op1("ReduceMean", {x}, {attr("axes", std::vector<int64_t>{axis}), attr("keepdims", int64_t{0})}, 13);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    for (int32_t v : vals<int32_t>(*r)) EXPECT_EQ(v, 0) << axis;
  }
  auto r = run_op1("ReduceMean", {x}, {attr("axes", std::vector<int64_t>{1}), attr("keepdims", int64_t{0})}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->numel(), 2);
}

TEST(ReduceTest, BadAxesAreErrors) {
  EXPECT_FALSE(run_op1("ReduceSum", {iota_f({2, 2}), ints({2})}).ok());
  EXPECT_FALSE(run_op1("ReduceSum", {iota_f({2, 2}), ints({1, -1})}).ok());
  EXPECT_FALSE(run_op1("ReduceMean", {iota_f({2})}, {attr("axes", std::vector<int64_t>{-3})}, 13).ok());
}

TEST(ReduceTest, LargeRowsAndColumnsInParallel) {
  for (int64_t axis : {0, 1}) {
    OpCall call;
    call.op_type = "ReduceMean";
    Tensor x = Tensor::allocate(DType::kFloat32, Shape{300, 500});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 7);
    call.inputs = {x};
    call.attrs = {attr("axes", std::vector<int64_t>{axis}), attr("keepdims", 0)};
    call.opset = 13;
    call.threads = 2;
    auto out = run_op(call);
    ASSERT_TRUE(out.ok());
    const Tensor& y = (*out)[0].tensor();
    const int64_t n = axis == 0 ? 500 : 300, k = axis == 0 ? 300 : 500;
    ASSERT_EQ(y.numel(), n);
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += axis == 0 ? (i * 500 + j) % 7 : (j * 500 + i) % 7;
      ASSERT_NEAR(y.data<float>()[j], s / static_cast<double>(k), 1e-4);
    }
  }
}

TEST(ArgMaxTest, KeepdimsAndSelectLastIndex) {
  Tensor x = Tensor::from_vector<float>({2, 2, 1, 1, 3, 3}, Shape{2, 3});
  auto r = run_op1("ArgMax", {x}, {attr("axis", 1)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 1}));
  EXPECT_EQ(vals<int64_t>(*r), (std::vector<int64_t>{0, 1}));
  r = run_op1("ArgMax", {x}, {attr("axis", -1), attr("keepdims", 0), attr("select_last_index", 1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{2}));
  EXPECT_EQ(vals<int64_t>(*r), (std::vector<int64_t>{1, 2}));
  r = run_op1("ArgMin", {x}, {attr("axis", 0)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<int64_t>(*r), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_FALSE(run_op1("ArgMax", {x}, {attr("axis", 2)}).ok());
}

}  // namespace
}  // namespace kiln
