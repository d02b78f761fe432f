// Training op tests. Optimizer values come from the ONNX reference formulas
// (onnx/backend/test/case/node/{adagrad,adam,momentum}.py) evaluated in
// numpy; Gradient runs on small graphs built here (d = (a + b) * a).
#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;

constexpr const char* kDomain = "ai.onnx.preview.training";

Result<std::vector<Value>> run_training(const std::string& op, std::vector<Value> inputs,
                                        std::vector<ir::Attribute> attrs, size_t outputs) {
  OpCall call;
  call.op_type = op;
  call.domain = kDomain;
  call.opset = 1;
  call.inputs = std::move(inputs);
  call.attrs = std::move(attrs);
  call.num_outputs = outputs;
  return run_op(call);
}

void expect_values(const Value& v, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_TRUE(v.is_tensor());
  ASSERT_EQ(static_cast<size_t>(v.tensor().numel()), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(v.tensor().data<float>()[i], want[i], tol) << "at " << i;
}

Tensor vec(std::vector<float> v) { return Tensor::from_vector(v); }

TEST(TrainingTest, AdagradSingleAndDecayedMultiple) {
  auto one = run_training("Adagrad", {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(0), vec({1}), vec({-1}), vec({2})},
                          {attr("norm_coefficient", 0.001f), attr("epsilon", 1e-5f), attr("decay_factor", 0.1f)}, 2);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  expect_values((*one)[0], {1.05769618});
  expect_values((*one)[1], {2.998001});
  auto two = run_training("Adagrad",
                          {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(3), vec({1, 2}), vec({-1, 0.5f}), vec({2, 0})},
                          {attr("epsilon", 1e-5f), attr("decay_factor", 0.1f)}, 2);
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  expect_values((*two)[0], {1.0444113, 1.92307846});
  expect_values((*two)[1], {3.0, 0.25});
}

TEST(TrainingTest, AdamWithBiasCorrectionAndPostNorm) {
  auto r = run_training("Adam",
                        {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(2), vec({1.2f, 2.8f}), vec({-0.94f, -2.5f}),
                         vec({1.7f, 3.6f}), vec({0.1f, 0.1f})},
                        {attr("norm_coefficient", 0.001f), attr("norm_coefficient_post", 0.1f), attr("alpha", 0.95f),
                         attr("beta", 0.1f), attr("epsilon", 1e-7f)},
                        3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_values((*r)[0], {-0.52695355, 1.24365465});
  expect_values((*r)[1], {1.56806, 3.29514});
  expect_values((*r)[2], {0.8032109, 5.62240706});
}

TEST(TrainingTest, MomentumStandardAndNesterov) {
  std::vector<Value> in = {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(1), vec({1.2f, 2.8f}), vec({-0.94f, -2.5f}),
                           vec({1.7f, 3.6f})};
  auto s = run_training("Momentum", in,
                        {attr("norm_coefficient", 0.001f), attr("alpha", 0.95f), attr("beta", 0.1f), attr("mode", "standard")}, 2);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  expect_values((*s)[0], {1.047888, 2.482972});
  expect_values((*s)[1], {1.52112, 3.17028});
  in[1] = Tensor::scalar<int64_t>(0);
  auto n = run_training("Momentum", in,
                        {attr("norm_coefficient", 0.01f), attr("alpha", 0.95f), attr("beta", 1.f), attr("mode", "nesterov")}, 2);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  expect_values((*n)[0], {1.227535, 2.95714});
  expect_values((*n)[1], {0.687, 0.948});
}

TEST(TrainingTest, OptimizersRejectMismatchedGroups) {
  auto r = run_training("Adagrad", {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(0), vec({1, 2}), vec({1}), vec({2, 2})},
                        {}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 3 has float32[1], expected float32[2]"), std::string::npos)
      << r.status().message();
  auto m = run_training("Momentum", {Tensor::scalar<float>(0.1f), Tensor::scalar<int64_t>(0), vec({1}), vec({1}), vec({1})},
                        {attr("norm_coefficient", 0.f), attr("alpha", 0.5f), attr("beta", 1.f), attr("mode", "fast")}, 2);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'fast'"), std::string::npos);
}

class NoOutputsAllocator final : public kernels::OutputAllocator {
 public:
  Status allocate(ir::ValueId, DType dtype, const Shape& shape, Tensor* out) override {
    *out = Tensor::allocate(dtype, shape);
    return Status::ok();
  }
};

// Builds c = Add(a, b), d = <op2>(c, a) and Gradient(xs=[a, b], y) over a
// and b, makes its kernel and runs it at (a, b).
Result<std::vector<float>> gradient_of(const std::string& op2, const std::string& y, std::vector<float> a,
                                       std::vector<float> b, Shape shape_a, Shape shape_b) {
  ir::Graph g;
  g.opsets[""] = 13;
  g.opsets[kDomain] = 1;
  auto dims = [](const Shape& s) {
    std::vector<ir::Dim> d;
    for (int64_t v : s) d.push_back(ir::Dim{v, {}});
    return d;
  };
  const ir::ValueId va = g.add_value("a", ir::ValueType::tensor(DType::kFloat32, dims(shape_a)));
  const ir::ValueId vb = g.add_value("b", ir::ValueType::tensor(DType::kFloat32, dims(shape_b)));
  const ir::ValueId vc = g.add_value("c", ir::ValueType::tensor(DType::kFloat32, {}));
  const ir::ValueId vd = g.add_value("d", ir::ValueType::tensor(DType::kFloat32, {}));
  const ir::ValueId ga = g.add_value("da"), gb = g.add_value("db");
  g.inputs = {va, vb};
  ir::Node add;
  add.op_type = "Add";
  add.opset = 13;
  add.inputs = {va, vb};
  add.outputs = {vc};
  ir::Node second;
  second.op_type = op2;
  second.opset = 13;
  second.inputs = {vc, va};
  second.outputs = {vd};
  ir::Node grad;
  grad.op_type = "Gradient";
  grad.domain = kDomain;
  grad.opset = 1;
  grad.name = "grad";
  grad.inputs = {va, vb};
  grad.outputs = {ga, gb};
  grad.attributes = {attr("xs", std::vector<std::string>{"a", "b"}), attr("y", y)};
  g.nodes = {add, second, grad};

  std::vector<kernels::InputInfo> infos(2);
  infos[0].type = &g.value(va).type;
  infos[1].type = &g.value(vb).type;
  const kernels::KernelDef* def = kernels::portable_registry().find(kDomain, "Gradient", 1, {});
  if (!def) return not_found("no Gradient kernel");
  kernels::KernelInit init{g.nodes[2], g, infos, 1};
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Kernel> k, def->factory(init));
  Value in_a(Tensor::from_vector(a, shape_a)), in_b(Tensor::from_vector(b, shape_b));
  const Value* ins[] = {&in_a, &in_b};
  Value out_a, out_b;
  Value* outs[] = {&out_a, &out_b};
  NoOutputsAllocator alloc;
  kernels::KernelContext ctx(g.nodes[2], ins, 2, outs, 2, &alloc, nullptr, nullptr);
  KILN_RETURN_IF_ERROR(k->compute(ctx));
  std::vector<float> r(out_a.tensor().data<float>(), out_a.tensor().data<float>() + out_a.tensor().numel());
  r.insert(r.end(), out_b.tensor().data<float>(), out_b.tensor().data<float>() + out_b.tensor().numel());
  return r;
}

TEST(GradientTest, OfAddIsOne) {
  auto r = gradient_of("Mul", "c", {1}, {2}, Shape{}, Shape{});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, (std::vector<float>{1, 1}));
}

TEST(GradientTest, OfAddAndMulUsesProductAndSumRules) {
  // d = (a + b) * a: dd/da = 2a + b = 4, dd/db = a = 1 at (1, 2).
  auto r = gradient_of("Mul", "d", {1}, {2}, Shape{}, Shape{});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, (std::vector<float>{4, 1}));
}

TEST(GradientTest, BroadcastGradientsAreSummed) {
  // a [2], b scalar: d = (a + b) / a, dd/db = sum(1 / a), dd/da = -b / a^2.
  auto r = gradient_of("Div", "d", {1, 2}, {3}, Shape{2}, Shape{});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_NEAR((*r)[0], -3.f, 1e-6f);
  EXPECT_NEAR((*r)[1], -0.75f, 1e-6f);
  EXPECT_NEAR((*r)[2], 1.5f, 1e-6f);
}

TEST(GradientTest, RejectsUnsupportedOpOnThePath) {
  auto r = gradient_of("Pow", "d", {1}, {2}, Shape{}, Shape{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot differentiate through Pow"), std::string::npos) << r.status().message();
  auto missing = gradient_of("Mul", "nope", {1}, {2}, Shape{}, Shape{});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos);
}

}  // namespace
}  // namespace kiln
