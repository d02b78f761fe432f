// Structural tests of the rewrites: what each one changes in the graph, and
// that none of them rewrites through graph outputs or values read twice.
// src/runtime/rewrite_test.cpp runs rewritten graphs against the originals.
#include "optimizer/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "optimizer/test_graph.h"

namespace kiln::optimizer {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::TestGraph;

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }

RewriteStats run_phase_a(TestGraph& t, std::vector<uint8_t>* removed) {
  RewriteStats stats;
  GraphRewrite rw{t.g, t.constants, t.all_eligible(), {}, &stats};
  EXPECT_TRUE(rewrite_graph(rw).is_ok());
  *removed = rw.removed;
  return stats;
}

TEST(OptimizerTest, IdentityRemovedUnlessGraphOutput) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{2});
  const ir::ValueId a = t.node("Identity", {x});
  const ir::ValueId b = t.node("Relu", {a});
  const ir::ValueId c = t.node("Identity", {b});
  t.output(c);
  std::vector<uint8_t> removed;
  const RewriteStats stats = run_phase_a(t, &removed);
  EXPECT_EQ(stats.count("identity"), 1);
  EXPECT_EQ(removed, (std::vector<uint8_t>{1, 0, 0}));
  EXPECT_EQ(t.g.nodes[1].inputs[0], x);
}

TEST(OptimizerTest, DropoutKeptWhenItsMaskIsRead) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{2});
  const ir::ValueId y = t.node("Dropout", {x});
  const ir::ValueId mask = t.g.add_value("mask");
  t.g.nodes[0].outputs.push_back(mask);
  t.output(t.node("Relu", {y}));
  t.output(t.node("Not", {mask}));
  std::vector<uint8_t> removed;
  EXPECT_EQ(run_phase_a(t, &removed).count("identity"), 0);
  // Without a reader of the mask it goes.
  t.g.outputs.pop_back();
  t.g.nodes.pop_back();
  EXPECT_EQ(run_phase_a(t, &removed).count("identity"), 1);
}

TEST(OptimizerTest, BatchNormFoldsIntoConv) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{1, 1, 3, 3});
  const ir::ValueId w = t.constant("w", f32({1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 1, 2, 2}));
  const ir::ValueId b = t.constant("b", f32({0.5f, -1}, Shape{2}));
  const ir::ValueId y = t.node("Conv", {x, w, b});
  const ir::ValueId z = t.node("BatchNormalization",
                               {y, t.constant("s", f32({2, 3}, Shape{2})), t.constant("o", f32({1, 1}, Shape{2})),
                                t.constant("m", f32({0.5f, 1}, Shape{2})), t.constant("v", f32({4, 9}, Shape{2}))},
                               {attr_float("epsilon", 0.f)});
  t.output(z);
  std::vector<uint8_t> removed;
  EXPECT_EQ(run_phase_a(t, &removed).count("conv+batchnorm"), 1);
  EXPECT_EQ(removed, (std::vector<uint8_t>{0, 1}));
  const ir::Node& conv = t.g.nodes[0];
  ASSERT_EQ(conv.outputs[0], z);
  const Tensor& w2 = t.constants.at(conv.inputs[1]);
  const Tensor& b2 = t.constants.at(conv.inputs[2]);
  // s = scale / sqrt(var): 1 and 1; W unchanged, B = (B - mean) * s + shift.
  EXPECT_FLOAT_EQ(w2.data<float>()[0], 1.f);
  EXPECT_FLOAT_EQ(w2.data<float>()[7], 8.f);
  EXPECT_FLOAT_EQ(b2.data<float>()[0], 1.f);
  EXPECT_FLOAT_EQ(b2.data<float>()[1], -1.f);
  // The original weights are untouched (another node may read them).
  EXPECT_FLOAT_EQ(t.constants.at(w).data<float>()[0], 1.f);
}

TEST(OptimizerTest, BatchNormNotFoldedWhenConvOutputIsReadTwice) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{1, 1, 3, 3});
  const ir::ValueId y = t.node("Conv", {x, t.constant("w", f32({1, 2, 3, 4}, Shape{1, 1, 2, 2}))});
  auto one = [&](const char* n) { return t.constant(n, f32({1}, Shape{1})); };
  t.output(t.node("BatchNormalization", {y, one("s"), one("o"), one("m"), one("v")}));
  t.output(t.node("Relu", {y}));
  std::vector<uint8_t> removed;
  EXPECT_EQ(run_phase_a(t, &removed).count("conv+batchnorm"), 0);
}

TEST(OptimizerTest, MatMulAddBecomesGemmOnlyIn2D) {
  TestGraph t;
  const ir::ValueId a = t.input("a", Shape{2, 3});
  const ir::ValueId w = t.constant("w", f32({1, 2, 3, 4, 5, 6}, Shape{3, 2}));
  const ir::ValueId mm = t.node("MatMul", {a, w}, {}, Shape{2, 2});
  const ir::ValueId y = t.node("Add", {t.constant("c", f32({1, 2}, Shape{2})), mm});
  t.output(y);
  const ir::ValueId a3 = t.input("a3", Shape{1, 2, 3});
  const ir::ValueId mm3 = t.node("MatMul", {a3, w}, {}, Shape{1, 2, 2});
  t.output(t.node("Add", {mm3, t.constant("c3", f32({1, 2}, Shape{2}))}));
  // A bias that would grow the product ([2, 2] + [3, 1, 2]) is no Gemm's C.
  const ir::ValueId mm4 = t.node("MatMul", {a, w}, {}, Shape{2, 2});
  t.output(t.node("Add", {mm4, t.constant("c4", f32({1, 2, 3, 4, 5, 6}, Shape{3, 1, 2}))}));
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].name, "matmul+add");
  EXPECT_EQ(fs[0].node.op_type, "Gemm");
  EXPECT_EQ(fs[0].node.inputs.size(), 3u);
  EXPECT_EQ(fs[0].node.outputs[0], y);
  EXPECT_EQ(fs[0].replaces, (std::vector<size_t>{0, 1}));
  // The 3-D one is kiln MatMulBias (sequence_fusions_test.cpp), not Gemm.
  EXPECT_EQ(fs[1].name, "matmul+bias");
  EXPECT_EQ(fs[1].replaces, (std::vector<size_t>{2, 3}));
}

TEST(OptimizerTest, TransposesCancelOrMerge) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{2, 3, 4});
  const ir::ValueId a = t.node("Transpose", {x}, {attr_ints("perm", {1, 2, 0})});
  const ir::ValueId b = t.node("Transpose", {a}, {attr_ints("perm", {2, 0, 1})});  // cancels
  const ir::ValueId c = t.node("Transpose", {b}, {attr_ints("perm", {0, 2, 1})});
  const ir::ValueId d = t.node("Transpose", {c}, {attr_ints("perm", {1, 0, 2})});
  t.output(d);
  std::vector<uint8_t> removed;
  EXPECT_EQ(run_phase_a(t, &removed).count("transpose+transpose"), 2);
  EXPECT_EQ(removed, (std::vector<uint8_t>{1, 1, 1, 0}));
  const ir::Node& last = t.g.nodes[3];
  EXPECT_EQ(last.inputs[0], x);
  // d[j] = c[p2[j]] = x[p1[p2[j]]]: p1 = {0, 2, 1}, p2 = {1, 0, 2} -> {2, 0, 1}.
  EXPECT_EQ(*last.attr_ints("perm"), (std::vector<int64_t>{2, 0, 1}));
}

TEST(OptimizerTest, ReshapeChainsMergeAndNoOpsGo) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{2, 1, 6});
  const ir::ValueId a = t.node("Squeeze", {x, t.constant("ax", Tensor::from_vector<int64_t>({1}, Shape{1}))}, {},
                               Shape{2, 6});
  const ir::ValueId b = t.node("Reshape", {a, t.constant("s", Tensor::from_vector<int64_t>({3, 4}, Shape{2}))}, {},
                               Shape{3, 4});
  const ir::ValueId c = t.node("Flatten", {b}, {attr_int("axis", 1)}, Shape{3, 4});  // a no-op
  t.output(t.node("Relu", {c}, {}, Shape{3, 4}));
  std::vector<uint8_t> removed;
  EXPECT_EQ(run_phase_a(t, &removed).count("reshape chain"), 2);
  EXPECT_EQ(removed, (std::vector<uint8_t>{1, 0, 1, 0}));
  const ir::Node& r = t.g.nodes[1];
  EXPECT_EQ(r.op_type, "Reshape");
  EXPECT_EQ(r.inputs[0], x);
  const Tensor& shape = t.constants.at(r.inputs[1]);
  EXPECT_EQ(std::vector<int64_t>(shape.data<int64_t>(), shape.data<int64_t>() + shape.numel()),
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(t.g.nodes[3].inputs[0], b);
}

// x * HardSigmoid(x) with alpha 1/6, beta 1/2 (torch's HardSwish before
// opset 14): after a Conv it fuses into the conv, elsewhere it becomes one
// HardSwish node; other alphas and a gate read twice stay as they are.
TEST(OptimizerTest, SelfGatedHardSigmoidBecomesHardSwish) {
  for (const bool after_conv : {true, false}) {
    for (const float alpha : {1.f / 6.f, 0.2f}) {
      TestGraph t;
      const ir::ValueId x = t.input("x", Shape{1, 1, 3, 3});
      const ir::ValueId w = t.constant("w", f32({1, 2, 3, 4}, Shape{1, 1, 2, 2}));
      const ir::ValueId y = after_conv ? t.node("Conv", {x, w}, {}, Shape{1, 1, 2, 2}) : t.node("Relu", {x}, {}, Shape{1, 1, 3, 3});
      const ir::ValueId hs = t.node("HardSigmoid", {y}, {attr_float("alpha", alpha), attr_float("beta", 0.5f)});
      const ir::ValueId m = t.node("Mul", {y, hs});
      t.output(m);
      const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
      if (alpha != 1.f / 6.f) {
        EXPECT_TRUE(fs.empty() || fs[0].name == "conv+hardsigmoid") << fs[0].name;
        continue;
      }
      ASSERT_EQ(fs.size(), 1u);
      EXPECT_EQ(fs[0].name, after_conv ? "conv+hardswish" : "hardswish");
      EXPECT_EQ(fs[0].node.op_type, after_conv ? "FusedConv" : "HardSwish");
      EXPECT_EQ(fs[0].node.outputs[0], m);
      EXPECT_EQ(fs[0].replaces, after_conv ? (std::vector<size_t>{0, 1, 2}) : (std::vector<size_t>{1, 2}));
      if (!after_conv) {
        EXPECT_EQ(fs[0].node.inputs, (std::vector<ir::ValueId>{y}));
      }
    }
  }
  // The gate is also a graph output: it stays.
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{4});
  const ir::ValueId hs = t.node("HardSigmoid", {x}, {attr_float("alpha", 1.f / 6.f), attr_float("beta", 0.5f)});
  t.output(t.node("Mul", {hs, x}));
  t.output(hs);
  EXPECT_TRUE(find_portable_fusions(t.g, t.constants, t.all_eligible()).empty());
}

TEST(OptimizerTest, ConvActivationsFuseButNotThroughAGraphOutput) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{1, 1, 3, 3});
  const ir::ValueId w = t.constant("w", f32({1, 2, 3, 4}, Shape{1, 1, 2, 2}));
  const ir::ValueId y1 = t.node("Conv", {x, w}, {}, Shape{1, 1, 2, 2});
  const ir::ValueId r1 = t.node("Clip", {y1, t.scalar("lo", 0.f), t.scalar("hi", 6.f)});
  const ir::ValueId y2 = t.node("Conv", {r1, w}, {}, Shape{1, 1, 1, 1});
  const ir::ValueId s2 = t.node("Sigmoid", {y2});
  const ir::ValueId m2 = t.node("Mul", {s2, y2});  // SiLU
  const ir::ValueId y3 = t.node("Conv", {x, w}, {}, Shape{1, 1, 2, 2});
  t.output(m2);
  t.output(y3);
  t.output(t.node("Relu", {y3}));
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].name, "conv+clip");
  EXPECT_EQ(fs[0].node.op_type, "FusedConv");
  EXPECT_EQ(fs[0].node.domain, "com.microsoft");
  EXPECT_EQ(*fs[0].node.attr_floats("activation_params"), (std::vector<float>{0.f, 6.f}));
  EXPECT_EQ(fs[0].node.outputs[0], r1);
  EXPECT_EQ(fs[0].replaces, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(fs[1].name, "conv+silu");
  EXPECT_EQ(fs[1].replaces, (std::vector<size_t>{2, 3, 4}));
  // Not eligible (a backend claimed it): no proposal.
  std::vector<uint8_t> eligible = t.all_eligible();
  eligible[1] = 0;
  EXPECT_EQ(find_portable_fusions(t.g, t.constants, eligible).size(), 1u);
}

// A squeeze-and-excitation block: x [1, C, H, W], its channel gate s
// [1, C, 1, 1] (GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid),
// Mul(x, s) in either order, then a 1x1 projection Conv. Returns the Mul's
// output; `proj` receives the projection's.
struct SeBlock {
  ir::ValueId x, gate, mul, proj;
};
SeBlock se_block(TestGraph& t, bool gate_first, const Shape& xs = Shape{1, 8, 5, 5}) {
  SeBlock b;
  const int64_t c = xs[1];
  b.x = t.input("x", xs);
  const ir::ValueId pooled = t.node("GlobalAveragePool", {b.x}, {}, Shape{1, c, 1, 1});
  const ir::ValueId w1 = t.constant("w1", f32(std::vector<float>(static_cast<size_t>(2 * c), 0.5f), Shape{2, c, 1, 1}));
  const ir::ValueId w2 = t.constant("w2", f32(std::vector<float>(static_cast<size_t>(2 * c), 0.25f), Shape{c, 2, 1, 1}));
  const ir::ValueId h = t.node("Relu", {t.node("Conv", {pooled, w1}, {}, Shape{1, 2, 1, 1})}, {}, Shape{1, 2, 1, 1});
  b.gate = t.node("HardSigmoid", {t.node("Conv", {h, w2}, {}, Shape{1, c, 1, 1})}, {}, Shape{1, c, 1, 1});
  b.mul = gate_first ? t.node("Mul", {b.gate, b.x}, {}, xs) : t.node("Mul", {b.x, b.gate}, {}, xs);
  return b;
}

ir::ValueId pointwise(TestGraph& t, ir::ValueId in, const Shape& xs, std::vector<ir::Attribute> attrs = {},
                      int64_t k = 1) {
  const int64_t c = xs[1];
  const ir::ValueId w = t.constant("wp" + std::to_string(t.g.nodes.size()),
                                   f32(std::vector<float>(static_cast<size_t>(3 * c * k * k), 0.1f), Shape{3, c, k, k}));
  return t.node("Conv", {in, w, t.constant("bp" + std::to_string(t.g.nodes.size()), f32({1, 2, 3}, Shape{3}))},
                std::move(attrs), Shape{1, 3, xs[2], xs[3]});
}

// The proposals named "channel scale+conv".
std::vector<Fusion> channel_scale_fusions(const TestGraph& t) {
  std::vector<Fusion> out;
  for (Fusion& f : find_portable_fusions(t.g, t.constants, t.all_eligible()))
    if (f.name == "channel scale+conv") out.push_back(std::move(f));
  return out;
}

TEST(OptimizerTest, SqueezeExciteScaleFusesIntoTheProjectionConv) {
  for (bool gate_first : {false, true}) {
    TestGraph t;
    const SeBlock b = se_block(t, gate_first);
    const size_t mul_index = t.g.nodes.size() - 1;
    const ir::ValueId y = pointwise(t, b.mul, Shape{1, 8, 5, 5});
    t.output(y);
    const std::vector<Fusion> fs = channel_scale_fusions(t);
    ASSERT_EQ(fs.size(), 1u) << "gate first " << gate_first;
    const ir::Node& n = fs[0].node;
    EXPECT_EQ(n.domain, "kiln");
    EXPECT_EQ(n.op_type, "ChannelScaledConv");
    ASSERT_EQ(n.inputs.size(), 4u);
    EXPECT_EQ(n.inputs[0], b.x);  // X, whichever side of the Mul it was on
    EXPECT_EQ(n.inputs[3], b.gate);
    EXPECT_EQ(n.outputs, std::vector<ir::ValueId>{y});
    EXPECT_EQ(fs[0].replaces, (std::vector<size_t>{mul_index, mul_index + 1}));
  }
}

TEST(OptimizerTest, SqueezeExciteNearMissesAreLeftAlone) {
  const Shape xs{1, 8, 5, 5};
  // A scale that is not per channel: per position, per element, a scalar.
  for (const Shape& ss : {Shape{1, 1, 5, 5}, Shape{1, 8, 5, 5}, Shape{1, 1, 1, 1}, Shape{8, 1, 1, 1}}) {
    TestGraph t;
    const ir::ValueId x = t.input("x", xs);
    const ir::ValueId s = t.input("s", ss);
    t.output(pointwise(t, t.node("Mul", {x, s}, {}, xs), xs));
    EXPECT_TRUE(channel_scale_fusions(t).empty()) << ss.to_string();
  }
  // The Mul's output has a second reader, or is a graph output.
  for (int variant : {0, 1}) {
    TestGraph t;
    const SeBlock b = se_block(t, false);
    t.output(pointwise(t, b.mul, xs));
    if (variant == 0) t.output(t.node("Relu", {b.mul}, {}, xs));
    else t.output(b.mul);
    EXPECT_TRUE(channel_scale_fusions(t).empty()) << "variant " << variant;
  }
  // The reader is not a plain 1x1 GEMM: 3x3, strided, grouped.
  const std::vector<std::pair<std::vector<ir::Attribute>, int64_t>> convs = {
      {{attr_ints("pads", {1, 1, 1, 1})}, 3},
      {{attr_ints("strides", {2, 2})}, 1},
      {{attr_int("group", 8)}, 1},
  };
  for (size_t i = 0; i < convs.size(); ++i) {
    TestGraph t;
    const SeBlock b = se_block(t, false);
    if (i == 2) {  // depthwise: W [8, 1, 1, 1]
      const ir::ValueId w = t.constant("wd", f32(std::vector<float>(8, 0.1f), Shape{8, 1, 1, 1}));
      t.output(t.node("Conv", {b.mul, w}, convs[i].first, xs));
    } else {
      t.output(pointwise(t, b.mul, xs, convs[i].first, convs[i].second));
    }
    EXPECT_TRUE(channel_scale_fusions(t).empty()) << "conv " << i;
  }
  // W is not a constant.
  {
    TestGraph t;
    const SeBlock b = se_block(t, false);
    const ir::ValueId w = t.input("w", Shape{3, 8, 1, 1});
    t.output(t.node("Conv", {b.mul, w}, {}, Shape{1, 3, 5, 5}));
    EXPECT_TRUE(channel_scale_fusions(t).empty());
  }
  // Not eligible (a backend claimed the Conv).
  {
    TestGraph t;
    const SeBlock b = se_block(t, false);
    t.output(pointwise(t, b.mul, xs));
    std::vector<uint8_t> eligible = t.all_eligible();
    eligible.back() = 0;
    for (const Fusion& f : find_portable_fusions(t.g, t.constants, eligible)) EXPECT_NE(f.name, "channel scale+conv");
  }
}

TEST(OptimizerTest, GeluAndLayerNormPatterns) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{2, 4});
  // torch's Gelu: (x * 0.5) * (erf(x / sqrt 2) + 1).
  const ir::ValueId half = t.node("Mul", {x, t.scalar("h", 0.5f)});
  const ir::ValueId e = t.node("Erf", {t.node("Div", {x, t.scalar("r2", 1.4142135f)})});
  const ir::ValueId gelu = t.node("Mul", {half, t.node("Add", {e, t.scalar("one", 1.f)})});
  // LayerNorm over the last axis.
  const ir::ValueId mean = t.node("ReduceMean", {gelu}, {attr_ints("axes", {-1})});
  const ir::ValueId d = t.node("Sub", {gelu, mean});
  const ir::ValueId var = t.node("ReduceMean", {t.node("Pow", {d, t.scalar("two", 2.f)})}, {attr_ints("axes", {-1})});
  const ir::ValueId den = t.node("Sqrt", {t.node("Add", {var, t.scalar("eps", 1e-5f)})});
  const ir::ValueId n = t.node("Div", {d, den});
  const ir::ValueId gamma = t.constant("g", f32({1, 2, 3, 4}, Shape{4}));
  const ir::ValueId beta = t.constant("b", f32({0, 0, 1, 1}, Shape{4}));
  const ir::ValueId y = t.node("Add", {t.node("Mul", {n, gamma}), beta});
  t.output(y);
  t.g.value(gelu).type = testing::f32_type(Shape{2, 4});
  const std::vector<Fusion> fs = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs.size(), 2u);
  EXPECT_EQ(fs[0].name, "gelu");
  EXPECT_EQ(fs[0].node.inputs, (std::vector<ir::ValueId>{x}));
  EXPECT_EQ(fs[0].replaces.size(), 5u);
  EXPECT_EQ(fs[1].name, "layernorm");
  EXPECT_EQ(fs[1].node.inputs, (std::vector<ir::ValueId>{gelu, gamma, beta}));
  EXPECT_EQ(fs[1].replaces.size(), 9u);
  EXPECT_FLOAT_EQ(*fs[1].node.attr_float("epsilon", 0.f), 1e-5f);
  // The centred value read by a third node: no LayerNorm.
  t.output(d);
  const std::vector<Fusion> fs2 = find_portable_fusions(t.g, t.constants, t.all_eligible());
  ASSERT_EQ(fs2.size(), 1u);
  EXPECT_EQ(fs2[0].name, "gelu");
}

TEST(OptimizerTest, StatsListInFirstAppliedOrder) {
  RewriteStats s;
  s.add("conv+batchnorm", 20);
  s.add("identity");
  s.add("conv+batchnorm", 2);
  s.add("none", 0);
  EXPECT_EQ(s.to_string(), "conv+batchnorm 22, identity 1");
}

}  // namespace
}  // namespace kiln::optimizer
