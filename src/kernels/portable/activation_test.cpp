#include <cmath>
#include <limits>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(ActivationTest, ReluFloatAndInt) {
  expect_floats(run_ok("Relu", {f32({-1, 0, 2.5f, -kInf, kNaN})}), {0, 0, 2.5, 0, kNaN});
  EXPECT_EQ(vals<int32_t>(run_ok("Relu", {make<int32_t>({-3, 4}, {2})}, {}, 14)), (std::vector<int32_t>{0, 4}));
  expect_floats(run_ok("Relu", {make<double>({-1, 3}, {2})}, {}, 6), {0, 3});
}

TEST(ActivationTest, SigmoidAndTanhMatchLibm) {
  std::vector<float> x;
  for (float v = -30.f; v <= 30.f; v += 0.0137f) x.push_back(v);
  x.insert(x.end(), {0.f, -0.f, 1e-6f, -1e-6f, 100.f, -100.f, kInf, -kInf});
  Tensor s = run_ok("Sigmoid", {f32(x)});
  Tensor t = run_ok("Tanh", {f32(x)});
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double sig = 1.0 / (1.0 + std::exp(-v));
    EXPECT_NEAR(s.data<float>()[i], sig, 3e-7 * sig + 1e-37) << v;
    const double th = std::tanh(v);
    EXPECT_NEAR(t.data<float>()[i], th, 3e-7 * std::fabs(th) + 1e-37) << v;
  }
  EXPECT_TRUE(std::isnan(run_ok("Sigmoid", {f32({kNaN})}).data<float>()[0]));
  EXPECT_TRUE(std::isnan(run_ok("Tanh", {f32({kNaN})}).data<float>()[0]));
}

TEST(ActivationTest, SigmoidDoubleAndHalf) {
  expect_floats(run_ok("Sigmoid", {make<double>({0, -800, 800}, {3})}), {0.5, 0, 1}, 1e-15);
  expect_floats(run_ok("Tanh", {make<Float16>({Float16(0.5f)}, {1})}), {std::tanh(0.5)}, 1e-3);
}

TEST(ActivationTest, LeakyReluAndThresholdedRelu) {
  expect_floats(run_ok("LeakyRelu", {f32({-2, 3})}), {-0.02, 3});
  expect_floats(run_ok("LeakyRelu", {f32({-2, 3})}, {attr("alpha", 0.5f)}), {-1, 3});
  expect_floats(run_ok("ThresholdedRelu", {f32({0.5f, 1.f, 1.5f})}), {0, 0, 1.5});
  expect_floats(run_ok("ThresholdedRelu", {f32({0.5f, 3.f})}, {attr("alpha", 0.25f)}), {0.5, 3});
}

TEST(ActivationTest, EluSeluCelu) {
  expect_floats(run_ok("Elu", {f32({-1, 2})}, {attr("alpha", 2.f)}), {2.0 * std::expm1(-1.0), 2});
  const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
  expect_floats(run_ok("Selu", {f32({-1, 0, 2})}), {g * a * std::expm1(-1.0), 0, 2 * g});
  expect_floats(run_ok("Selu", {f32({-1, 2})}, {attr("alpha", 2.f), attr("gamma", 3.f)}),
                {3 * 2 * std::expm1(-1.0), 6});
  expect_floats(run_ok("Celu", {f32({-1, 2})}, {attr("alpha", 2.f)}), {2 * std::expm1(-0.5), 2});
  run_error("Celu", {f32({1})}, {attr("alpha", 0.f)});
}

TEST(ActivationTest, HardSigmoidAndHardSwish) {
  expect_floats(run_ok("HardSigmoid", {f32({-3, 0, 1, 3})}), {0, 0.5, 0.7, 1});
  expect_floats(run_ok("HardSigmoid", {f32({1})}, {attr("alpha", 0.5f), attr("beta", 0.25f)}), {0.75});
  expect_floats(run_ok("HardSwish", {f32({-4, -1, 0, 1, 4})}), {0, -1.0 / 3, 0, 2.0 / 3, 4});
}

TEST(ActivationTest, SoftplusAndSoftsign) {
  expect_floats(run_ok("Softplus", {f32({-1, 0, 1, 100, -100})}),
                {std::log1p(std::exp(-1.0)), std::log(2.0), std::log1p(std::exp(1.0)), 100, std::exp(-100.0)});
  expect_floats(run_ok("Softsign", {f32({-1, 0, 3})}), {-0.5, 0, 0.75});
}

TEST(ActivationTest, Shrink) {
  expect_floats(run_ok("Shrink", {f32({-2, -0.5f, 0, 0.5f, 2})}, {attr("lambd", 1.5f)}), {-2, 0, 0, 0, 2});
  expect_floats(run_ok("Shrink", {f32({-2, 0, 2})}, {attr("lambd", 1.5f), attr("bias", 1.5f)}), {-0.5, 0, 0.5});
  EXPECT_EQ(vals<int32_t>(run_ok("Shrink", {make<int32_t>({-5, 1, 5}, {3})}, {attr("lambd", 2.f), attr("bias", 1.f)})),
            (std::vector<int32_t>{-4, 0, 4}));
}

TEST(ActivationTest, ClipAttributesBeforeOpset11) {
  expect_floats(run_ok("Clip", {f32({-2, 0, 2})}, {attr("min", -0.5f), attr("max", 0.5f)}, 6), {-0.5, 0, 0.5});
  expect_floats(run_ok("Clip", {f32({-2, kInf})}, {attr("max", 1.f)}, 6), {-2, 1});
}

TEST(ActivationTest, ClipOptionalInputs) {
  const Tensor x = f32({-3, -1, 0, 1, 3, kNaN});
  expect_floats(run_ok("Clip", {x, Tensor::scalar<float>(-1.5f), Tensor::scalar<float>(2.f)}), {-1.5, -1, 0, 1, 2, kNaN});
  expect_floats(run_ok("Clip", {x, Tensor::scalar<float>(0.f)}), {0, 0, 0, 1, 3, kNaN});
  expect_floats(run_ok("Clip", {x, Value::none(), Tensor::scalar<float>(0.f)}), {-3, -1, 0, 0, 0, kNaN});
  expect_floats(run_ok("Clip", {f32({-kInf, kInf})}), {-kInf, kInf});
  // min > max: everything becomes max.
  expect_floats(run_ok("Clip", {f32({-3, 3}), Tensor::scalar<float>(2.f), Tensor::scalar<float>(1.f)}), {1, 1});
}

TEST(ActivationTest, ClipIntegers) {
  Tensor y = run_ok("Clip", {make<int8_t>({-100, 0, 100}, {3}), make<int8_t>({-5}, {}), make<int8_t>({5}, {})}, {}, 13);
  EXPECT_EQ(vals<int8_t>(y), (std::vector<int8_t>{-5, 0, 5}));
  Tensor z = run_ok("Clip", {make<int64_t>({-100, 100}, {2}), Value::none(), make<int64_t>({7}, {})}, {}, 13);
  EXPECT_EQ(vals<int64_t>(z), (std::vector<int64_t>{-100, 7}));
}

TEST(ActivationTest, ClipRejectsBadBounds) {
  std::string e = run_error("Clip", {f32({1, 2}), f32({0, 1})});
  EXPECT_NE(e.find("min"), std::string::npos) << e;
  run_error("Clip", {f32({1, 2}), make<double>({0}, {})});
}

TEST(ActivationTest, LongInputsWithThreads) {
  std::vector<float> x(100003);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 2001) - 1000) * 0.01f;
  for (const char* op : {"Relu", "Sigmoid", "Tanh"}) {
    OpCall call;
    call.op_type = op;
    call.inputs = {f32(x)};
    call.threads = 3;
    Result<std::vector<Value>> out = run_op(call);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    Tensor serial = run_ok(op, {f32(x)});
    const Tensor& par = (*out)[0].tensor();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(par.data<float>()[i], serial.data<float>()[i]) << op << " " << i;
  }
}

}  // namespace
}  // namespace kiln
