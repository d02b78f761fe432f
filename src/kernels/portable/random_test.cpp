// Random op tests: the statistical contract (range, mean and variance within
// generous bounds over many samples), shapes and dtypes, and that a seed
// makes runs repeat. Bounds are many standard errors wide, so the tests do
// not flake; a wrong distribution (wrong scale, shifted mean) still fails.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op1;

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};

Moments moments(const Tensor& t) {
  const std::vector<double> v = [&] {
    std::vector<double> r;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (t.dtype() == DType::kFloat64) r.push_back(t.data<double>()[i]);
      else if (t.dtype() == DType::kFloat32) r.push_back(t.data<float>()[i]);
      else if (t.dtype() == DType::kFloat16) r.push_back(static_cast<float>(t.data<Float16>()[i]));
      else if (t.dtype() == DType::kInt32) r.push_back(t.data<int32_t>()[i]);
      else if (t.dtype() == DType::kBool) r.push_back(t.data<bool>()[i] ? 1 : 0);
    }
    return r;
  }();
  Moments m;
  m.min = m.max = v.empty() ? 0 : v[0];
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(v.size());
  return m;
}

TEST(RandomTest, RandomNormalMeanAndScale) {
  auto t = run_op1("RandomNormal", {},
                   {attr("shape", std::vector<int64_t>{200, 100}), attr("mean", 3.f), attr("scale", 2.f)}, 1);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->shape(), (Shape{200, 100}));
  ASSERT_EQ(t->dtype(), DType::kFloat32);
  const Moments m = moments(*t);
  EXPECT_NEAR(m.mean, 3.0, 0.1);  // standard error 0.02
  EXPECT_NEAR(m.var, 4.0, 0.3);
}

TEST(RandomTest, RandomUniformRangeAndMoments) {
  auto t = run_op1("RandomUniform", {},
                   {attr("shape", std::vector<int64_t>{20000}), attr("low", -1.f), attr("high", 3.f),
                    attr("dtype", int64_t{11})},
                   1);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->dtype(), DType::kFloat64);
  const Moments m = moments(*t);
  EXPECT_GE(m.min, -1.0);
  EXPECT_LT(m.max, 3.0);
  EXPECT_NEAR(m.mean, 1.0, 0.1);        // standard error 0.008
  EXPECT_NEAR(m.var, 16.0 / 12, 0.15);  // (high - low)^2 / 12
}

TEST(RandomTest, SeedMakesRunsRepeatAndSeedsDiffer) {
  std::vector<ir::Attribute> a = {attr("shape", std::vector<int64_t>{64}), attr("seed", 5.f)};
  auto x = run_op1("RandomNormal", {}, a, 1);
  auto y = run_op1("RandomNormal", {}, a, 1);
  a[1] = attr("seed", 6.f);
  auto z = run_op1("RandomNormal", {}, a, 1);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  int same = 0;
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(x->data<float>()[i], y->data<float>()[i]);
    same += x->data<float>()[i] == z->data<float>()[i];
  }
  EXPECT_LT(same, 64);
}

TEST(RandomTest, LikeOpsTakeShapeAndDtypeOfInput) {
  Tensor in = Tensor::allocate(DType::kFloat16, Shape{3, 4, 5});
  auto n = run_op1("RandomNormalLike", {in}, {}, 1);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(n->shape(), (Shape{3, 4, 5}));
  EXPECT_EQ(n->dtype(), DType::kFloat16);
  auto u = run_op1("RandomUniformLike", {in}, {attr("dtype", int64_t{1}), attr("low", 2.f), attr("high", 2.5f)}, 1);
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u->dtype(), DType::kFloat32);
  const Moments m = moments(*u);
  EXPECT_GE(m.min, 2.0);
  EXPECT_LT(m.max, 2.5);
  Tensor ints = Tensor::allocate(DType::kInt32, Shape{2});
  EXPECT_FALSE(run_op1("RandomUniformLike", {ints}, {}, 1).ok());
}

TEST(RandomTest, BernoulliFollowsProbabilities) {
  std::vector<float> p(10000);
  for (size_t i = 0; i < p.size(); ++i) p[i] = i % 2 ? 0.8f : 0.f;
  auto t = run_op1("Bernoulli", {Tensor::from_vector(p)}, {attr("dtype", int64_t{9})}, 15);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->dtype(), DType::kBool);
  int ones_at_zero = 0, ones_at_08 = 0;
  for (size_t i = 0; i < p.size(); ++i) (i % 2 ? ones_at_08 : ones_at_zero) += t->data<bool>()[i];
  EXPECT_EQ(ones_at_zero, 0);
  EXPECT_NEAR(ones_at_08 / 5000.0, 0.8, 0.03);  // standard error 0.006
  auto bad = run_op1("Bernoulli", {Tensor::from_vector<float>({1.5f})}, {}, 15);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("outside [0, 1]"), std::string::npos);
}

TEST(RandomTest, MultinomialSamplesSoftmaxOfLogits) {
  // Row 0: log-probabilities of (0.25, 0.75); row 1: all mass on class 2.
  Tensor logits = Tensor::from_vector<float>({std::log(0.25f), std::log(0.75f), -1e30f, -1e30f, -1e30f, 0.f}, Shape{2, 3});
  auto t = run_op1("Multinomial", {logits}, {attr("sample_size", int64_t{4000}), attr("seed", 1.f)}, 7);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_EQ(t->shape(), (Shape{2, 4000}));
  ASSERT_EQ(t->dtype(), DType::kInt32);
  int ones = 0;
  for (int i = 0; i < 4000; ++i) {
    const int32_t c = t->data<int32_t>()[i];
    ASSERT_TRUE(c == 0 || c == 1) << c;
    ones += c;
    EXPECT_EQ(t->data<int32_t>()[4000 + i], 2);
  }
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.04);  // standard error 0.007
}

TEST(RandomTest, RegisteredNondeterministicAndRejectsBadAttributes) {
  for (const char* op : {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"}) {
    const kernels::KernelDef* def = kernels::portable_registry().find("", op, 15, std::vector<DType>{DType::kFloat32});
    ASSERT_NE(def, nullptr) << op;
    EXPECT_TRUE(def->flags & kernels::kNondeterministic) << op;
  }
  EXPECT_FALSE(run_op1("RandomNormal", {}, {}, 1).ok());  // no shape
  auto dtype = run_op1("RandomUniform", {}, {attr("shape", std::vector<int64_t>{2}), attr("dtype", int64_t{7})}, 1);
  ASSERT_FALSE(dtype.ok());
  EXPECT_NE(dtype.status().message().find("not a float type"), std::string::npos);
}

// Found by fuzz_session: Bernoulli with dtype 1342177279 kept the low byte
// (255) and shifted a dtype bit mask by 255 (UBSan); 257 passed as float.
TEST(RandomTest, RejectsDtypeAttributesNoDtypeHas) {
  for (int64_t v : {int64_t{1342177279}, int64_t{257}, int64_t{-1}, int64_t{kNumDTypes}}) {
    auto b = run_op1("Bernoulli", {Tensor::from_vector<float>({0.5f})}, {attr("dtype", v)}, 15);
    ASSERT_FALSE(b.ok()) << v;
    EXPECT_NE(b.status().message().find("attribute 'dtype' is " + std::to_string(v) + ", not an ONNX element type"),
              std::string::npos)
        << b.status().message();
    auto u = run_op1("RandomUniform", {}, {attr("shape", std::vector<int64_t>{2}), attr("dtype", v)}, 1);
    EXPECT_FALSE(u.ok()) << v;
    auto m = run_op1("Multinomial", {Tensor::from_vector<float>({0.f, 1.f}, {1, 2})}, {attr("dtype", v)}, 15);
    EXPECT_FALSE(m.ok()) << v;
  }
}

}  // namespace
}  // namespace kiln
