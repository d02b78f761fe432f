// Structural tests of the transformer fusions (sequence_fusions.h): which
// patterns they take, which they leave. src/runtime/rewrite_test.cpp runs
// the fused nodes against the unfused graphs.
#include "optimizer/sequence_fusions.h"

#include <gtest/gtest.h>

#include "optimizer/optimizer.h"
#include "optimizer/test_graph.h"

namespace kiln::optimizer {
namespace {

using testing::attr_ints;
using testing::TestGraph;

Tensor zeros(Shape s) { return Tensor::zeros(DType::kFloat32, std::move(s)); }

std::string attr_of(const Fusion& f, const char* name) {
  auto a = f.node.attr_string(name, "");
  return a.is_ok() ? *a : "<error>";
}

// GPT-2's gelu_new: (x * 0.5) * (1 + tanh(0.79788 * (x + 0.044715 * Pow(x, 3)))).
ir::ValueId gelu_new(TestGraph& t, ir::ValueId x, float kappa = 0.044715f) {
  const ir::ValueId half = t.node("Mul", {x, t.scalar("half", 0.5f)});
  const ir::ValueId cube = t.node("Pow", {x, t.scalar("three", 3.f)});
  const ir::ValueId s = t.node("Add", {x, t.node("Mul", {cube, t.scalar("kappa", kappa)})});
  const ir::ValueId th = t.node("Tanh", {t.node("Mul", {s, t.scalar("beta", 0.7978845608f)})});
  return t.node("Mul", {half, t.node("Add", {th, t.scalar("one", 1.f)})});
}

// torch's GELU(approximate="tanh") symbolic: 0.5 * (x * (1 + tanh(beta * (x + kappa * (x * (x * x)))))).
ir::ValueId gelu_torch_tanh(TestGraph& t, ir::ValueId x) {
  const ir::ValueId cube = t.node("Mul", {x, t.node("Mul", {x, x})});
  const ir::ValueId s = t.node("Add", {x, t.node("Mul", {t.scalar("kappa", 0.044715f), cube})});
  const ir::ValueId th = t.node("Tanh", {t.node("Mul", {t.scalar("beta", 0.7978845608f), s})});
  return t.node("Mul", {t.scalar("half", 0.5f), t.node("Mul", {x, t.node("Add", {t.scalar("one", 1.f), th})})});
}

// BERT's erf Gelu: (x * 0.5) * (erf(x / sqrt 2) + 1).
ir::ValueId gelu_erf(TestGraph& t, ir::ValueId x) {
  const ir::ValueId half = t.node("Mul", {x, t.scalar("h", 0.5f)});
  const ir::ValueId e = t.node("Erf", {t.node("Div", {x, t.scalar("r2", 1.4142135f)})});
  return t.node("Mul", {half, t.node("Add", {e, t.scalar("one", 1.f)})});
}

TEST(SequenceFusionsTest, TanhGeluInBothExportedForms) {
  for (int form = 0; form < 2; ++form) {
    TestGraph t;
    const ir::ValueId x = t.input("x", Shape{2, 8});
    const ir::ValueId y = form == 0 ? gelu_new(t, x) : gelu_torch_tanh(t, x);
    t.output(y);
    const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
    ASSERT_EQ(fs.size(), 1u) << "form " << form;
    EXPECT_EQ(fs[0].name, "gelu tanh");
    EXPECT_EQ(fs[0].node.op_type, "Gelu");
    EXPECT_EQ(attr_of(fs[0], "approximate"), "tanh");
    EXPECT_EQ(fs[0].node.inputs, (std::vector<ir::ValueId>{x}));
    EXPECT_EQ(fs[0].node.outputs, (std::vector<ir::ValueId>{y}));
    EXPECT_EQ(fs[0].replaces.size(), form == 0 ? 8u : 9u);
  }
}

TEST(SequenceFusionsTest, TanhGeluNotWithOtherConstantsOrAnInnerValueReadOutside) {
  {
    TestGraph t;
    t.output(gelu_new(t, t.input("x", Shape{2, 8}), 0.05f));
    EXPECT_TRUE(find_portable_fusions(t.g, t.constants, t.all_eligible()).empty());
  }
  {
    TestGraph t;
    const ir::ValueId x = t.input("x", Shape{2, 8});
    t.output(gelu_new(t, x));
    t.output(t.g.nodes[3].outputs[0]);  // x + 0.044715 x^3, now a graph output
    EXPECT_TRUE(find_portable_fusions(t.g, t.constants, t.all_eligible()).empty());
  }
}

TEST(SequenceFusionsTest, MatMulBiasOnThreeDimensionalAndUntypedInputs) {
  TestGraph t;
  const ir::ValueId w = t.constant("w", zeros(Shape{4, 3}));
  const ir::ValueId bias = t.constant("b", zeros(Shape{3}));
  const ir::ValueId a3 = t.input("a3", Shape{2, 5, 4});
  const ir::ValueId y3 = t.node("Add", {bias, t.node("MatMul", {a3, w})});
  t.output(y3);
  // Untyped A (shape inference lost it): MatMulBias too.
  const ir::ValueId relu = t.node("Relu", {a3});  // untyped output
  const ir::ValueId yu = t.node("Add", {t.node("MatMul", {relu, w}), bias});
  t.output(yu);
  t.g.value(relu).type = ir::ValueType{};
  t.g.value(relu).type.kind = ir::ValueType::Kind::kTensor;
  t.g.value(relu).type.dtype = DType::kFloat32;
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 2u);
  for (const Fusion& f : fs) {
    EXPECT_EQ(f.name, "matmul+bias");
    EXPECT_EQ(f.node.domain, kKilnDomain);
    EXPECT_EQ(f.node.op_type, kMatMulBiasOp);
    EXPECT_EQ(f.node.inputs[1], w);
    EXPECT_EQ(f.node.inputs[2], bias);
    EXPECT_TRUE(f.node.attributes.empty());
  }
  EXPECT_EQ(fs[0].node.inputs[0], a3);
  EXPECT_EQ(fs[0].node.outputs[0], y3);
  EXPECT_EQ(fs[1].node.inputs[0], relu);
  EXPECT_EQ(fs[1].node.outputs[0], yu);
}

TEST(SequenceFusionsTest, MatMulBiasNotWithoutAConstantVectorBiasAndWeights) {
  TestGraph t;
  const ir::ValueId a = t.input("a", Shape{2, 5, 4});
  const ir::ValueId w = t.constant("w", zeros(Shape{4, 3}));
  // A [1, 3] bias (a rank the fused node does not take), a bias of the
  // wrong length, weights that are an input, a product read twice.
  t.output(t.node("Add", {t.node("MatMul", {a, w}), t.constant("b13", zeros(Shape{1, 3}))}));
  t.output(t.node("Add", {t.node("MatMul", {a, w}), t.constant("b1", zeros(Shape{1}))}));
  const ir::ValueId wi = t.input("wi", Shape{4, 3});
  t.output(t.node("Add", {t.node("MatMul", {a, wi}), t.constant("b3", zeros(Shape{3}))}));
  const ir::ValueId twice = t.node("MatMul", {a, w});
  t.output(t.node("Add", {twice, t.constant("b3b", zeros(Shape{3}))}));
  t.output(twice);
  EXPECT_TRUE(find_portable_fusions(t.g, t.constants, t.all_eligible()).empty());
}

TEST(SequenceFusionsTest, GeluAfterMatMulBiasGoesIntoIt) {
  TestGraph t;
  const ir::ValueId w = t.constant("w", zeros(Shape{4, 3}));
  const ir::ValueId bias = t.constant("b", zeros(Shape{3}));
  // 3-D, the erf pattern after it.
  const ir::ValueId a3 = t.input("a3", Shape{2, 5, 4});
  const ir::ValueId g3 = gelu_erf(t, t.node("Add", {t.node("MatMul", {a3, w}), bias}, {}, Shape{2, 5, 3}));
  t.output(g3);
  // 2-D (Gemm alone), the tanh pattern after it.
  const ir::ValueId a2 = t.input("a2", Shape{5, 4});
  const ir::ValueId g2 = gelu_new(t, t.node("Add", {t.node("MatMul", {a2, w}, {}, Shape{5, 3}), bias}, {}, Shape{5, 3}));
  t.output(g2);
  // 3-D, a Gelu-20 node after it.
  t.opset = 20;
  const ir::ValueId gn = t.node("Gelu", {t.node("Add", {t.node("MatMul", {a3, w}), bias})});
  t.output(gn);
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 3u);
  const char* acts[] = {"Gelu", "GeluTanh", "Gelu"};
  const ir::ValueId outs[] = {g3, g2, gn};
  const size_t sizes[] = {7u, 10u, 3u};
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(fs[k].name, "matmul+bias+gelu") << k;
    EXPECT_EQ(fs[k].node.op_type, kMatMulBiasOp) << k;
    EXPECT_EQ(fs[k].node.inputs.size(), 3u) << k;
    EXPECT_EQ(attr_of(fs[k], "activation"), acts[k]) << k;
    EXPECT_EQ(fs[k].node.outputs[0], outs[k]) << k;
    EXPECT_EQ(fs[k].replaces.size(), sizes[k]) << k;
  }
}

TEST(SequenceFusionsTest, GeluStaysApartWhenTheProductIsReadElsewhere) {
  TestGraph t;
  const ir::ValueId a = t.input("a", Shape{2, 5, 4});
  const ir::ValueId y = t.node("Add", {t.node("MatMul", {a, t.constant("w", zeros(Shape{4, 3}))}),
                                       t.constant("b", zeros(Shape{3}))},
                              {}, Shape{2, 5, 3});
  t.output(gelu_erf(t, y));
  t.output(t.node("Relu", {y}));
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].name, "matmul+bias");
  EXPECT_EQ(fs[1].name, "gelu");
}

// torch's LayerNorm below opset 17 over x.
ir::ValueId layer_norm(TestGraph& t, ir::ValueId x, int64_t h) {
  const ir::ValueId mean = t.node("ReduceMean", {x}, {attr_ints("axes", {-1})});
  const ir::ValueId d = t.node("Sub", {x, mean});
  const ir::ValueId var = t.node("ReduceMean", {t.node("Pow", {d, t.scalar("two", 2.f)})}, {attr_ints("axes", {-1})});
  const ir::ValueId n = t.node("Div", {d, t.node("Sqrt", {t.node("Add", {var, t.scalar("eps", 1e-5f)})})});
  return t.node("Add", {t.node("Mul", {n, t.constant("g", zeros(Shape{h}))}), t.constant("b", zeros(Shape{h}))});
}

TEST(SequenceFusionsTest, LayerNormOnAnUntypedInputTakesItsSizeFromGamma) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{2, 4});
  const ir::ValueId r = t.node("Relu", {x});
  t.g.value(r).type.kind = ir::ValueType::Kind::kTensor;
  t.g.value(r).type.dtype = DType::kFloat32;  // dtype known, shape lost
  t.output(layer_norm(t, r, 4));
  std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].name, "layernorm");
  EXPECT_EQ(fs[0].node.inputs[0], r);
  // A typed input whose last dim is not gamma's size: left alone.
  t.g.value(r).type = testing::f32_type(Shape{2, 5});
  EXPECT_TRUE(find_portable_fusions(t.g, t.constants, t.all_eligible()).empty());
}

// MultiheadAttention as torch exports it: q [S, BH, D] -> [BH, S, D],
// K^T = Transpose(k, [1, 2, 0]), P V with v -> [BH, S, D], the context back
// to [S, BH, D].
TEST(SequenceFusionsTest, TransposesAroundAttentionMatMulsGoIntoThem) {
  TestGraph t;
  const ir::ValueId q = t.input("q", Shape{9, 3, 8}), k = t.input("k", Shape{9, 3, 8}), v = t.input("v", Shape{9, 3, 8});
  const ir::ValueId qt = t.node("Transpose", {q}, {attr_ints("perm", {1, 0, 2})}, Shape{3, 9, 8});
  const ir::ValueId kt = t.node("Transpose", {k}, {attr_ints("perm", {1, 2, 0})}, Shape{3, 8, 9});
  const ir::ValueId s = t.node("MatMul", {qt, kt}, {}, Shape{3, 9, 9});
  const ir::ValueId p = t.node("Softmax", {s}, {}, Shape{3, 9, 9});
  const ir::ValueId vt = t.node("Transpose", {v}, {attr_ints("perm", {1, 0, 2})}, Shape{3, 9, 8});
  const ir::ValueId c = t.node("MatMul", {p, vt}, {}, Shape{3, 9, 8});
  const ir::ValueId y = t.node("Transpose", {c}, {attr_ints("perm", {1, 0, 2})}, Shape{9, 3, 8});
  t.output(y);
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].name, "transpose+matmul");
  EXPECT_EQ(fs[0].node.op_type, "TransposedMatMul");
  EXPECT_EQ(fs[0].node.inputs, (std::vector<ir::ValueId>{q, k}));
  EXPECT_EQ(*fs[0].node.attr_ints("perm_b"), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(fs[0].node.outputs[0], s);
  EXPECT_EQ(fs[0].replaces.size(), 3u);
  EXPECT_EQ(fs[1].node.inputs, (std::vector<ir::ValueId>{p, v}));
  EXPECT_FALSE(fs[1].node.attr_ints("perm_a").is_ok() && !fs[1].node.attr_ints("perm_a")->empty());
  EXPECT_EQ(*fs[1].node.attr_ints("perm_y"), (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(fs[1].node.outputs[0], y);
  EXPECT_EQ(fs[1].replaces.size(), 3u);
}

TEST(SequenceFusionsTest, TransposesThatMoveTheUnitStrideStay) {
  TestGraph t;
  const ir::ValueId a = t.input("a", Shape{4, 2, 3});
  // [4, 2, 3] -> [3, 4, 2]: neither matrix stride of the result is 1.
  const ir::ValueId at = t.node("Transpose", {a}, {attr_ints("perm", {2, 0, 1})}, Shape{3, 4, 2});
  const ir::ValueId mm = t.node("MatMul", {at, t.input("b", Shape{3, 2, 5})}, {}, Shape{3, 4, 5});
  // The product's last axis moved: no output fusion either.
  t.output(t.node("Transpose", {mm}, {attr_ints("perm", {0, 2, 1})}, Shape{3, 5, 4}));
  // A Transpose read twice stays.
  const ir::ValueId b2 = t.node("Transpose", {t.input("c", Shape{5, 2})}, {attr_ints("perm", {1, 0})}, Shape{2, 5});
  t.output(t.node("MatMul", {t.input("d", Shape{3, 2}), b2}, {}, Shape{3, 5}));
  t.output(b2);
  EXPECT_TRUE(find_portable_fusions(t.g, t.constants, t.all_eligible()).empty());
}

// q / sqrt(d) after q's Transpose (MultiheadAttention), scores * c after the
// product (BERT divides the scores): the GEMM's alpha. A product of weights
// (a constant B) stays a MatMul.
TEST(SequenceFusionsTest, ConstantScalesGoIntoAlpha) {
  TestGraph t;
  const ir::ValueId q = t.input("q", Shape{9, 3, 8}), k = t.input("k", Shape{3, 8, 9});
  const ir::ValueId qt = t.node("Transpose", {q}, {attr_ints("perm", {1, 0, 2})}, Shape{3, 9, 8});
  const ir::ValueId qs = t.node("Div", {qt, t.scalar("r", 4.f)}, {}, Shape{3, 9, 8});
  const ir::ValueId s = t.node("MatMul", {qs, k}, {}, Shape{3, 9, 9});
  const ir::ValueId y = t.node("Mul", {t.scalar("c", 0.5f), s}, {}, Shape{3, 9, 9});
  t.output(y);
  const ir::ValueId w = t.node("MatMul", {k, t.constant("w", zeros(Shape{9, 2}))}, {}, Shape{3, 8, 2});
  t.output(t.node("Mul", {w, t.scalar("c2", 2.f)}));
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].name, "transpose+matmul");
  EXPECT_EQ(fs[0].node.inputs, (std::vector<ir::ValueId>{q, k}));
  EXPECT_EQ(fs[0].node.outputs[0], y);
  EXPECT_FLOAT_EQ(*fs[0].node.attr_float("alpha", 1.f), 0.125f);
  EXPECT_EQ(fs[0].replaces.size(), 4u);
}

}  // namespace
}  // namespace kiln::optimizer
