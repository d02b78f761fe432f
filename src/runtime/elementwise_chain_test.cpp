// ElementwiseChain fused at load (optimizer/elementwise_chains.h, kernel
// kernels/portable/elementwise_chain.cpp) gives the unfused graph's results
// bit for bit: every step kind, operands of one element and of the full
// shape on either side, sizes across blocks and the parallel grain, pools of
// 1, 2 and 3 threads, with and without static calls, and with a dynamic
// dimension (compute() path).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/registry.h"
#include "optimizer/test_graph.h"
#include "runtime/program.h"

namespace kiln::runtime {
namespace {

using optimizer::testing::attr_float;
using optimizer::testing::TestGraph;

Tensor random_f32(const Shape& s, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::allocate(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

// x -> every step kind once (constants of both sizes, both sides) -> y.
TestGraph all_steps(const Shape& s, std::mt19937& rng) {
  TestGraph t;
  t.opset = 14;
  ir::ValueId v = t.input("x", s);
  auto full = [&](const char* name) { return t.constant(name, random_f32(s, rng, 0.5f, 1.5f)); };
  v = t.node("Mul", {v, full("k0")}, {}, s);
  v = t.node("Add", {t.scalar("k1", 0.25f), v}, {}, s);
  v = t.node("Tanh", {v}, {}, s);
  v = t.node("Sub", {full("k2"), v}, {}, s);
  v = t.node("LeakyRelu", {v}, {attr_float("alpha", 0.1f)}, s);
  v = t.node("Div", {v, full("k3")}, {}, s);
  v = t.node("HardSigmoid", {v}, {attr_float("alpha", 0.3f), attr_float("beta", 0.4f)}, s);
  v = t.node("Div", {t.scalar("k4", 2.f), v}, {}, s);
  v = t.node("Sigmoid", {v}, {}, s);
  v = t.node("HardSwish", {v}, {}, s);
  v = t.node("Exp", {v}, {}, s);
  v = t.node("Sqrt", {v}, {}, s);
  v = t.node("Erf", {v}, {}, s);
  v = t.node("Sub", {v, t.scalar("k5", 0.5f)}, {}, s);
  v = t.node("Relu", {v}, {}, s);
  t.output(v);
  return t;
}

std::vector<float> run_once(const TestGraph& t, const Tensor& x, bool rewrite, bool static_calls, int threads,
                            optimizer::RewriteStats* stats = nullptr) {
  ProgramOptions o;
  o.registry = &kernels::portable_registry();
  o.rewrite = rewrite;
  o.static_calls = static_calls;
  auto p = Program::build(std::make_shared<ir::Graph>(t.g), o);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  if (!p.is_ok()) return {};
  if (stats) *stats = (*p)->rewrites();
  ThreadPool pool(threads);
  Value in(x);
  std::vector<float> result;
  for (int r = 0; r < 2; ++r) {  // the second run is warm (run state, static tables)
    auto out = (*p)->run(std::span<const Value>(&in, 1), {}, &pool);
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    if (!out.is_ok()) return {};
    const Tensor& y = (*out)[0].tensor();
    result.assign(y.data<float>(), y.data<float>() + y.numel());
  }
  return result;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ElementwiseChainTest, FusedEqualsUnfusedBitForBit) {
  std::mt19937 rng(3);
  for (const Shape& s : {Shape{1, 64}, Shape{3, 1000}, Shape{2, 40001}}) {
    const TestGraph t = all_steps(s, rng);
    const Tensor x = random_f32(s, rng, -3.f, 3.f);
    const std::vector<float> want = run_once(t, x, false, false, 1);
    for (int threads : {1, 2, 3}) {
      for (bool static_calls : {false, true}) {
        optimizer::RewriteStats stats;
        const std::vector<float> got = run_once(t, x, true, static_calls, threads, &stats);
        EXPECT_EQ(stats.count("elementwise-chain"), 1);
        EXPECT_TRUE(same_bits(got, want)) << s.to_string() << " threads " << threads << " static " << static_calls;
      }
    }
  }
}

// A symbolic batch dimension: no static plan, the chain runs through compute().
TEST(ElementwiseChainTest, DynamicShapeRunsThroughCompute) {
  std::mt19937 rng(5);
  TestGraph t;
  ir::ValueType dyn = ir::ValueType::tensor(DType::kFloat32, {ir::Dim{-1, "n"}, ir::Dim{5, {}}});
  ir::ValueId v = t.g.add_value("x", dyn);
  t.g.inputs.push_back(v);
  for (const char* op : {"Mul", "Relu", "Add", "Sigmoid"}) {
    v = std::string(op) == "Mul" || std::string(op) == "Add" ? t.node(op, {v, t.scalar(std::string("k") + op, 0.75f)})
                                                              : t.node(op, {v});
    t.g.values[static_cast<size_t>(v)].type = dyn;
  }
  t.output(v);
  for (int64_t n : {1, 3, 700}) {
    const Tensor x = random_f32(Shape{n, 5}, rng, -2.f, 2.f);
    optimizer::RewriteStats stats;
    const std::vector<float> got = run_once(t, x, true, true, 2, &stats);
    EXPECT_EQ(stats.count("elementwise-chain"), 1);
    EXPECT_TRUE(same_bits(got, run_once(t, x, false, false, 1))) << n;
  }
}

}  // namespace
}  // namespace kiln::runtime
