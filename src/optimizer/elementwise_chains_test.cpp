// Element-wise chain fusion (elementwise_chains.h): which runs become one
// ElementwiseChain node and what it records; never through a value read
// twice or a graph output, never with an operand that grows the value, and
// after the other phase-B patterns (Gelu keeps its nodes).
// src/runtime/elementwise_chain_test.cpp runs fused graphs against unfused.
#include "optimizer/elementwise_chains.h"

#include <gtest/gtest.h>

#include "optimizer/test_graph.h"

namespace kiln::optimizer {
namespace {

using testing::attr_float;
using testing::TestGraph;

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }

const ir::Attribute* find_attr(const ir::Node& n, const char* name) {
  for (const ir::Attribute& a : n.attributes)
    if (a.name == name) return &a;
  return nullptr;
}

TEST(ElementwiseChainsTest, RunBecomesOneNodeWithItsSteps) {
  TestGraph t;
  const Shape s{2, 3};
  const ir::ValueId x = t.input("x", s);
  const ir::ValueId k = t.constant("k", f32({1, 2, 3, 4, 5, 6}, s));
  const ir::ValueId row = t.constant("row", f32({1, 2, 3}, Shape{3}));  // grows nothing, but not flat
  const ir::ValueId a = t.node("Mul", {x, k}, {}, s);
  const ir::ValueId b = t.node("Sub", {t.scalar("one", 1.f), a}, {}, s);  // reversed
  const ir::ValueId c = t.node("LeakyRelu", {b}, {attr_float("alpha", 0.3f)}, s);
  const ir::ValueId d = t.node("Add", {c, k}, {}, s);
  const ir::ValueId e = t.node("Add", {d, row}, {}, s);  // ends the chain
  t.output(e);
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 1u);
  const Fusion& f = fs[0];
  EXPECT_EQ(f.name, "elementwise-chain");
  EXPECT_EQ(f.node.domain, kFusedDomain);
  EXPECT_EQ(f.node.op_type, kElementwiseChainOp);
  EXPECT_EQ(f.replaces, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(f.node.outputs, (std::vector<ir::ValueId>{d}));
  // x first, then each constant once.
  ASSERT_EQ(f.node.inputs.size(), 3u);
  EXPECT_EQ(f.node.inputs[0], x);
  EXPECT_EQ(f.node.inputs[1], k);
  EXPECT_EQ(find_attr(f.node, "ops")->strings, (std::vector<std::string>{"Mul", "Sub", "LeakyRelu", "Add"}));
  EXPECT_EQ(find_attr(f.node, "operands")->ints, (std::vector<int64_t>{1, 2, -1, 1}));
  EXPECT_EQ(find_attr(f.node, "reversed")->ints, (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_FLOAT_EQ(find_attr(f.node, "alphas")->floats[2], 0.3f);
}

TEST(ElementwiseChainsTest, StopsAtValuesReadTwiceAndGraphOutputs) {
  TestGraph t;
  const Shape s{4};
  const ir::ValueId x = t.input("x", s);
  const ir::ValueId a = t.node("Relu", {x}, {}, s);
  const ir::ValueId b = t.node("Sigmoid", {a}, {}, s);  // read twice: ends the first chain
  const ir::ValueId c = t.node("Tanh", {b}, {}, s);
  const ir::ValueId d = t.node("Exp", {b}, {}, s);
  const ir::ValueId e = t.node("Mul", {c, t.scalar("two", 2.f)}, {}, s);  // a graph output: ends it
  const ir::ValueId f = t.node("Sqrt", {e}, {}, s);
  t.output(d);
  t.output(e);
  t.output(f);
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].replaces, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(fs[0].node.outputs[0], b);
  EXPECT_EQ(fs[1].replaces, (std::vector<size_t>{2, 4}));  // Tanh, Mul
  EXPECT_EQ(fs[1].node.outputs[0], e);
}

TEST(ElementwiseChainsTest, NoChainWithGrowingOrNonConstantOperands) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{3});
  const ir::ValueId y = t.input("y", Shape{3});
  const ir::ValueId a = t.node("Add", {x, y}, {}, Shape{3});  // no constant
  const ir::ValueId b = t.node("Relu", {a}, {}, Shape{3});
  const ir::ValueId c = t.node("Mul", {b, t.constant("grow", f32({1, 2, 3, 4, 5, 6}, Shape{2, 3}))}, {}, Shape{2, 3});
  const ir::ValueId d = t.node("Relu", {c}, {}, Shape{2, 3});
  const ir::ValueId e = t.node("Add", {d, d}, {}, Shape{2, 3});  // the chain value on both sides
  t.output(e);
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  EXPECT_TRUE(fs.empty()) << fs[0].name << " over " << fs[0].replaces.size() << " nodes";
  // Not eligible (claimed by a backend): not fused.
  TestGraph u;
  const ir::ValueId z = u.input("z", Shape{3});
  u.output(u.node("Exp", {u.node("Relu", {z}, {}, Shape{3})}, {}, Shape{3}));
  EXPECT_EQ(find_portable_fusions(u.g, u.constants, u.all_eligible()).size(), 1u);
  EXPECT_TRUE(find_portable_fusions(u.g, u.constants, {1, 0}).empty());
}

TEST(ElementwiseChainsTest, DynamicShapesTakeOnlyOneElementOperands) {
  TestGraph t;
  ir::ValueType dyn = ir::ValueType::tensor(DType::kFloat32, {ir::Dim{-1, "n"}, ir::Dim{4, {}}});
  const ir::ValueId x = t.g.add_value("x", dyn);
  t.g.inputs.push_back(x);
  const ir::ValueId a = t.node("Mul", {x, t.scalar("half", 0.5f)});
  t.g.values[static_cast<size_t>(a)].type = dyn;
  const ir::ValueId b = t.node("Relu", {a});
  t.g.values[static_cast<size_t>(b)].type = dyn;
  const ir::ValueId c = t.node("Add", {b, t.constant("full", f32({1, 2, 3, 4}, Shape{1, 4}))});
  t.g.values[static_cast<size_t>(c)].type = dyn;
  t.output(c);
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].replaces, (std::vector<size_t>{0, 1}));  // the [1, 4] operand needs a static shape
}

TEST(ElementwiseChainsTest, GeluKeepsItsNodes) {
  TestGraph t;
  const Shape s{2, 8};
  const ir::ValueId x = t.input("x", s);
  const ir::ValueId d = t.node("Div", {x, t.scalar("sqrt2", 1.41421356f)}, {}, s);
  const ir::ValueId e = t.node("Erf", {d}, {}, s);
  const ir::ValueId a = t.node("Add", {e, t.scalar("one", 1.f)}, {}, s);
  const ir::ValueId m = t.node("Mul", {x, a}, {}, s);
  const ir::ValueId h = t.node("Mul", {m, t.scalar("half", 0.5f)}, {}, s);
  t.output(t.node("Relu", {t.node("Mul", {h, t.scalar("k", 3.f)}, {}, s)}, {}, s));
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].name, "gelu");
  EXPECT_EQ(fs[1].name, "elementwise-chain");
  EXPECT_EQ(fs[1].replaces, (std::vector<size_t>{5, 6}));
}

}  // namespace
}  // namespace kiln::optimizer
