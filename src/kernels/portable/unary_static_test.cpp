// Static calls of the one-input element-wise kernels (ew::UnaryKernel's
// float32 loops) equal compute() bit for bit: sizes across SIMD tails and
// the parallel grains, pools of 1, 2 and 3 threads, ops with attributes.
// Ops without a float32 loop and other dtypes bind none.
#include <cstring>

#include "kernels/testing/static_runner.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TEST(UnaryStaticTest, StaticCallsMatchCompute) {
  struct Case {
    const char* op;
    std::vector<ir::Attribute> attrs;
    float lo, hi;
  };
  const std::vector<Case> cases = {
      {"Relu", {}, -2.f, 2.f},       {"Sigmoid", {}, -9.f, 9.f},    {"Tanh", {}, -5.f, 5.f},
      {"LeakyRelu", {attr("alpha", 0.2f)}, -2.f, 2.f},              {"HardSigmoid", {attr("alpha", 0.3f)}, -4.f, 4.f},
      {"HardSwish", {}, -5.f, 5.f},  {"Sqrt", {}, 0.f, 9.f},        {"Exp", {}, -20.f, 20.f},
      {"Erf", {}, -4.f, 4.f}};
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    for (int64_t n : {1, 7, 64, 67, 5000, 70001}) {
      const Tensor x = random_tensor(Shape{1, n}, rng, c.lo, c.hi);
      for (int threads : {1, 2, 3}) {
        OpCall call;
        call.op_type = c.op;
        call.inputs = {Value(x)};
        call.attrs = c.attrs;
        call.threads = threads;
        const std::string what = std::string(c.op) + " n " + std::to_string(n) + " threads " + std::to_string(threads);
        auto ref = run_op(call);
        ASSERT_TRUE(ref.is_ok()) << what << ": " << ref.status().to_string();
        auto got = run_op_static(call);
        ASSERT_TRUE(got.is_ok()) << what << ": " << got.status().to_string();
        const Tensor &r = (*ref)[0].tensor(), &g = (*got)[0].tensor();
        ASSERT_EQ(r.shape(), g.shape()) << what;
        EXPECT_EQ(std::memcmp(r.raw_data(), g.raw_data(), r.nbytes()), 0) << what;
      }
    }
  }
}

TEST(UnaryStaticTest, OnlyFloat32LoopsBind) {
  OpCall ints;
  ints.op_type = "Relu";
  ints.inputs = {Value(Tensor::from_vector<int32_t>({-1, 2, -3}))};
  EXPECT_EQ(run_op_static(ints).status().code(), StatusCode::kNotFound);
  OpCall sin;  // a libm loop, no float32 loop
  sin.op_type = "Sin";
  sin.inputs = {Value(f32({0.5f, 1.f}))};
  EXPECT_EQ(run_op_static(sin).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln
