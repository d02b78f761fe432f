// The optimizer's rewrites inside Program::build, on the portable kernels:
// each rewritten graph must give the unrewritten graph's results (within
// float rounding), and the rewrite must actually have applied.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "optimizer/test_graph.h"
#include "runtime/program.h"
#include "kernels/registry.h"

namespace kiln::runtime {
namespace {

using optimizer::testing::attr_float;
using optimizer::testing::attr_ints;
using optimizer::testing::TestGraph;

Tensor random_f32(const Shape& s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& f : v) f = dist(rng);
  return Tensor::from_vector<float>(v, s);
}

// Builds `t` twice (rewrites off and on), runs both on `inputs`, compares
// every output and returns the rewritten program's stats.
optimizer::RewriteStats expect_same_results(const TestGraph& t, const std::vector<Tensor>& inputs) {
  std::vector<Value> in;
  for (const Tensor& x : inputs) in.emplace_back(x);
  std::vector<std::vector<Value>> results;
  optimizer::RewriteStats stats;
  for (bool rewrite : {false, true}) {
    ProgramOptions opts;
    opts.registry = &kernels::portable_registry();
    opts.rewrite = rewrite;
    auto program = Program::build(std::make_shared<ir::Graph>(t.g), opts);
    EXPECT_TRUE(program.is_ok()) << program.status().message();
    if (!program.is_ok()) return stats;
    auto out = (*program)->run(in, {}, nullptr);
    EXPECT_TRUE(out.is_ok()) << out.status().message();
    if (!out.is_ok()) return stats;
    results.push_back(std::move(*out));
    if (rewrite) stats = (*program)->rewrites();
  }
  EXPECT_EQ(results[0].size(), results[1].size());
  for (size_t o = 0; o < results[0].size() && o < results[1].size(); ++o) {
    const Tensor& a = results[0][o].tensor();
    const Tensor& b = results[1][o].tensor();
    EXPECT_EQ(a.shape(), b.shape()) << "output " << o;
    if (a.shape() != b.shape()) continue;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float x = a.data<float>()[i], y = b.data<float>()[i];
      if (std::fabs(x - y) > 1e-5f + 1e-5f * std::fabs(x)) {
        ADD_FAILURE() << "output " << o << " element " << i << ": " << y << " rewritten, " << x << " not";
        break;
      }
    }
  }
  return stats;
}

TEST(RewriteTest, ConvBatchNormActivation) {
  for (const char* act : {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Silu"}) {
    TestGraph t;
    t.opset = 14;  // HardSwish
    const ir::ValueId x = t.input("x", Shape{1, 3, 9, 9});
    const ir::ValueId w = t.constant("w", random_f32(Shape{8, 3, 3, 3}, 1));
    const ir::ValueId y = t.node("Conv", {x, w, t.constant("b", random_f32(Shape{8}, 2))},
                                 {attr_ints("pads", {1, 1, 1, 1})}, Shape{1, 8, 9, 9});
    const ir::ValueId z = t.node("BatchNormalization",
                                 {y, t.constant("s", random_f32(Shape{8}, 3)), t.constant("o", random_f32(Shape{8}, 4)),
                                  t.constant("m", random_f32(Shape{8}, 5)), t.constant("v", random_f32(Shape{8}, 6, 0.5f, 2.f))},
                                 {attr_float("epsilon", 1e-3f)}, Shape{1, 8, 9, 9});
    ir::ValueId out;
    const std::string a = act;
    if (a == "Clip") out = t.node("Clip", {z, t.scalar("lo", 0.f), t.scalar("hi", 0.5f)});
    else if (a == "Silu") out = t.node("Mul", {z, t.node("Sigmoid", {z})});
    else out = t.node(a, {z});
    t.output(out);
    const optimizer::RewriteStats stats = expect_same_results(t, {random_f32(Shape{1, 3, 9, 9}, 7, -3.f, 3.f)});
    EXPECT_EQ(stats.count("conv+batchnorm"), 1) << act;
    std::string fused = "conv+" + a;
    for (char& c : fused) c = static_cast<char>(std::tolower(c));
    EXPECT_EQ(stats.count(fused), 1) << act << ": " << stats.to_string();
  }
}

// A pattern node without a kernel of its own (HardSwish before opset 14)
// fails the load as it would unrewritten, instead of hiding in a fusion.
TEST(RewriteTest, FusionNeverHidesANodeWithoutAKernel) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{1, 1, 3, 3});
  const ir::ValueId y = t.node("Conv", {x, t.constant("w", random_f32(Shape{1, 1, 2, 2}, 1))}, {}, Shape{1, 1, 2, 2});
  t.output(t.node("HardSwish", {y}));
  ProgramOptions opts;
  opts.registry = &kernels::portable_registry();
  auto program = Program::build(std::make_shared<ir::Graph>(t.g), opts);
  ASSERT_FALSE(program.is_ok());
  EXPECT_NE(program.status().message().find("HardSwish"), std::string::npos) << program.status().message();
}

TEST(RewriteTest, ConvTransposeBatchNormWithGroups) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{1, 4, 5, 5});
  const ir::ValueId y = t.node("ConvTranspose", {x, t.constant("w", random_f32(Shape{4, 3, 3, 3}, 1))},
                               {optimizer::testing::attr_int("group", 2), attr_ints("strides", {2, 2})},
                               Shape{1, 6, 11, 11});
  t.output(t.node("BatchNormalization",
                  {y, t.constant("s", random_f32(Shape{6}, 3)), t.constant("o", random_f32(Shape{6}, 4)),
                   t.constant("m", random_f32(Shape{6}, 5)), t.constant("v", random_f32(Shape{6}, 6, 0.5f, 2.f))},
                  {}, Shape{1, 6, 11, 11}));
  const optimizer::RewriteStats stats = expect_same_results(t, {random_f32(Shape{1, 4, 5, 5}, 7)});
  EXPECT_EQ(stats.count("conv+batchnorm"), 1) << stats.to_string();
}

TEST(RewriteTest, MatMulAddTransposeAndReshapeChains) {
  TestGraph t;
  const ir::ValueId a = t.input("a", Shape{4, 6});
  const ir::ValueId mm = t.node("MatMul", {a, t.constant("w", random_f32(Shape{6, 5}, 1))}, {}, Shape{4, 5});
  const ir::ValueId g = t.node("Add", {mm, t.constant("c", random_f32(Shape{5}, 2))}, {}, Shape{4, 5});
  const ir::ValueId t1 = t.node("Transpose", {g}, {attr_ints("perm", {1, 0})}, Shape{5, 4});
  const ir::ValueId t2 = t.node("Transpose", {t1}, {attr_ints("perm", {1, 0})}, Shape{4, 5});
  const ir::ValueId r1 = t.node("Reshape", {t2, t.constant("s1", Tensor::from_vector<int64_t>({2, 10}, Shape{2}))}, {},
                                Shape{2, 10});
  const ir::ValueId r2 = t.node("Unsqueeze", {r1, t.constant("ax", Tensor::from_vector<int64_t>({0}, Shape{1}))}, {},
                                Shape{1, 2, 10});
  t.output(t.node("Relu", {r2}, {}, Shape{1, 2, 10}));
  const optimizer::RewriteStats stats = expect_same_results(t, {random_f32(Shape{4, 6}, 3)});
  EXPECT_EQ(stats.count("matmul+add"), 1) << stats.to_string();
  EXPECT_EQ(stats.count("transpose+transpose"), 1) << stats.to_string();
  EXPECT_EQ(stats.count("reshape chain"), 1) << stats.to_string();
}

TEST(RewriteTest, GeluAndLayerNorm) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{3, 16});
  const ir::ValueId half = t.node("Mul", {x, t.scalar("h", 0.5f)});
  const ir::ValueId e = t.node("Erf", {t.node("Div", {x, t.scalar("r2", 1.4142135f)})});
  const ir::ValueId gelu = t.node("Mul", {half, t.node("Add", {e, t.scalar("one", 1.f)})}, {}, Shape{3, 16});
  const ir::ValueId mean = t.node("ReduceMean", {gelu}, {attr_ints("axes", {-1})});
  const ir::ValueId d = t.node("Sub", {gelu, mean});
  const ir::ValueId var = t.node("ReduceMean", {t.node("Pow", {d, t.scalar("two", 2.f)})}, {attr_ints("axes", {-1})});
  const ir::ValueId n = t.node("Div", {d, t.node("Sqrt", {t.node("Add", {var, t.scalar("eps", 1e-5f)})})});
  const ir::ValueId y = t.node("Add", {t.node("Mul", {n, t.constant("g", random_f32(Shape{16}, 1))}),
                                       t.constant("b", random_f32(Shape{16}, 2))});
  t.output(y);
  const optimizer::RewriteStats stats = expect_same_results(t, {random_f32(Shape{3, 16}, 3, -3.f, 3.f)});
  EXPECT_EQ(stats.count("gelu"), 1) << stats.to_string();
  EXPECT_EQ(stats.count("layernorm"), 1) << stats.to_string();
}

// A squeeze-and-excitation block (GlobalAveragePool, 1x1 Conv, Relu, 1x1
// Conv, HardSigmoid, Mul) before a 1x1 projection: the Mul and the
// projection run as one ChannelScaledConv, on a map that runs transposed
// (7x7, 32 outputs) and on one that does not.
TEST(RewriteTest, SqueezeExciteChannelScale) {
  for (const Shape& xs : {Shape{2, 20, 7, 7}, Shape{1, 12, 10, 9}}) {
    TestGraph t;
    const int64_t c = xs[1], m = 32;
    const ir::ValueId x = t.input("x", xs);
    const ir::ValueId pooled = t.node("GlobalAveragePool", {x}, {}, Shape{xs[0], c, 1, 1});
    const ir::ValueId h = t.node("Relu", {t.node("Conv", {pooled, t.constant("w1", random_f32(Shape{4, c, 1, 1}, 1))},
                                                 {}, Shape{xs[0], 4, 1, 1})});
    const ir::ValueId gate = t.node("HardSigmoid", {t.node("Conv", {h, t.constant("w2", random_f32(Shape{c, 4, 1, 1}, 2))},
                                                           {}, Shape{xs[0], c, 1, 1})},
                                    {attr_float("alpha", 0.2f)}, Shape{xs[0], c, 1, 1});
    const ir::ValueId scaled = t.node("Mul", {x, gate}, {}, xs);
    t.output(t.node("Conv", {scaled, t.constant("wp", random_f32(Shape{m, c, 1, 1}, 3)), t.constant("bp", random_f32(Shape{m}, 4))},
                    {}, Shape{xs[0], m, xs[2], xs[3]}));
    const optimizer::RewriteStats stats = expect_same_results(t, {random_f32(xs, 5)});
    EXPECT_EQ(stats.count("channel scale+conv"), 1) << stats.to_string();
  }
}

// A Linear layer on a 3-D input with the erf Gelu after it, one with the
// tanh Gelu (GPT-2's form) and a plain one, on a [2, 7, 12] input: one
// MatMulBias each, the activation in the GEMM's epilogue.
TEST(RewriteTest, MatMulBiasWithGeluActivations) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{2, 7, 12});
  auto linear = [&](ir::ValueId in, int64_t k, int64_t n, uint32_t seed) {
    const ir::ValueId mm = t.node("MatMul", {in, t.constant("w" + std::to_string(seed), random_f32(Shape{k, n}, seed))});
    return t.node("Add", {t.constant("b" + std::to_string(seed), random_f32(Shape{n}, seed + 1)), mm}, {},
                  Shape{2, 7, n});
  };
  const ir::ValueId h = linear(x, 12, 33, 1);
  const ir::ValueId half = t.node("Mul", {h, t.scalar("h", 0.5f)});
  const ir::ValueId e = t.node("Erf", {t.node("Div", {h, t.scalar("r2", 1.4142135f)})});
  const ir::ValueId g1 = t.node("Mul", {half, t.node("Add", {e, t.scalar("one", 1.f)})}, {}, Shape{2, 7, 33});
  const ir::ValueId h2 = linear(g1, 33, 17, 3);
  const ir::ValueId cube = t.node("Pow", {h2, t.scalar("three", 3.f)});
  const ir::ValueId s = t.node("Add", {h2, t.node("Mul", {cube, t.scalar("kappa", 0.044715f)})});
  const ir::ValueId th = t.node("Tanh", {t.node("Mul", {s, t.scalar("beta", 0.7978845608f)})});
  const ir::ValueId g2 = t.node("Mul", {t.node("Mul", {h2, t.scalar("half2", 0.5f)}),
                                        t.node("Add", {th, t.scalar("one2", 1.f)})}, {}, Shape{2, 7, 17});
  t.output(linear(g2, 17, 5, 5));
  const optimizer::RewriteStats stats = expect_same_results(t, {random_f32(Shape{2, 7, 12}, 7, -2.f, 2.f)});
  EXPECT_EQ(stats.count("matmul+bias+gelu"), 2) << stats.to_string();
  EXPECT_EQ(stats.count("matmul+bias"), 1) << stats.to_string();
}

// The tanh Gelu alone (not after a Linear layer), as torch's
// GELU(approximate="tanh") exports it.
TEST(RewriteTest, TanhGelu) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{3, 40});
  const ir::ValueId cube = t.node("Mul", {x, t.node("Mul", {x, x})});
  const ir::ValueId s = t.node("Add", {x, t.node("Mul", {t.scalar("kappa", 0.044715f), cube})});
  const ir::ValueId th = t.node("Tanh", {t.node("Mul", {t.scalar("beta", 0.7978845608f), s})});
  t.output(t.node("Mul", {t.scalar("half", 0.5f), t.node("Mul", {x, t.node("Add", {t.scalar("one", 1.f), th})})}));
  const optimizer::RewriteStats stats = expect_same_results(t, {random_f32(Shape{3, 40}, 9, -6.f, 6.f)});
  EXPECT_EQ(stats.count("gelu tanh"), 1) << stats.to_string();
}

// BERT's attention core on [2, 7, 4, 16] heads: q K^T / 4 and P V with their
// Transposes and the scale absorbed, the same results.
TEST(RewriteTest, TransposedMatMulInAttention) {
  TestGraph t;
  const ir::ValueId q = t.input("q", Shape{2, 7, 4, 16}), k = t.input("k", Shape{2, 7, 4, 16});
  const ir::ValueId v = t.input("v", Shape{2, 7, 4, 16});
  const ir::ValueId qt = t.node("Transpose", {q}, {attr_ints("perm", {0, 2, 1, 3})}, Shape{2, 4, 7, 16});
  const ir::ValueId kt = t.node("Transpose", {k}, {attr_ints("perm", {0, 2, 3, 1})}, Shape{2, 4, 16, 7});
  const ir::ValueId sc = t.node("MatMul", {qt, kt}, {}, Shape{2, 4, 7, 7});
  const ir::ValueId p = t.node("Softmax", {t.node("Div", {sc, t.scalar("d", 4.f)}, {}, Shape{2, 4, 7, 7})}, {},
                               Shape{2, 4, 7, 7});
  const ir::ValueId vt = t.node("Transpose", {v}, {attr_ints("perm", {0, 2, 1, 3})}, Shape{2, 4, 7, 16});
  const ir::ValueId c = t.node("MatMul", {p, vt}, {}, Shape{2, 4, 7, 16});
  t.output(t.node("Transpose", {c}, {attr_ints("perm", {0, 2, 1, 3})}, Shape{2, 7, 4, 16}));
  const optimizer::RewriteStats stats = expect_same_results(
      t, {random_f32(Shape{2, 7, 4, 16}, 1), random_f32(Shape{2, 7, 4, 16}, 2), random_f32(Shape{2, 7, 4, 16}, 3)});
  EXPECT_EQ(stats.count("transpose+matmul"), 2) << stats.to_string();
}

// Residual connections: Conv + Add (+ Relu) as FusedConv with a sum input, on
// each conv path (3x3 stride 1: padded rows, 1x1: pointwise GEMM, 3x3
// stride 2: im2col).
TEST(RewriteTest, ConvAddResiduals) {
  TestGraph t;
  const ir::ValueId x = t.input("x", Shape{1, 8, 10, 10});
  const ir::ValueId c1 = t.node("Conv", {x, t.constant("w1", random_f32(Shape{8, 8, 3, 3}, 1)),
                                         t.constant("b1", random_f32(Shape{8}, 2))},
                                {attr_ints("pads", {1, 1, 1, 1})}, Shape{1, 8, 10, 10});
  const ir::ValueId r1 = t.node("Relu", {t.node("Add", {c1, x}, {}, Shape{1, 8, 10, 10})}, {}, Shape{1, 8, 10, 10});
  const ir::ValueId c2 = t.node("Conv", {r1, t.constant("w2", random_f32(Shape{8, 8, 1, 1}, 3))}, {}, Shape{1, 8, 10, 10});
  const ir::ValueId a2 = t.node("Add", {r1, c2}, {}, Shape{1, 8, 10, 10});
  const ir::ValueId c3 = t.node("Conv", {a2, t.constant("w3", random_f32(Shape{4, 8, 3, 3}, 4))},
                                {attr_ints("pads", {1, 1, 1, 1}), attr_ints("strides", {2, 2})}, Shape{1, 4, 5, 5});
  const ir::ValueId skip = t.input("skip", Shape{1, 4, 5, 5});
  t.output(t.node("Clip", {t.node("Add", {c3, skip}, {}, Shape{1, 4, 5, 5}), t.scalar("lo", 0.f), t.scalar("hi", 1.f)}));
  const optimizer::RewriteStats stats =
      expect_same_results(t, {random_f32(Shape{1, 8, 10, 10}, 5), random_f32(Shape{1, 4, 5, 5}, 6)});
  EXPECT_EQ(stats.count("conv+add+relu"), 1) << stats.to_string();
  EXPECT_EQ(stats.count("conv+add"), 1) << stats.to_string();
  EXPECT_EQ(stats.count("conv+add+clip"), 1) << stats.to_string();
}

// DenseNet's pre-activation layer: BatchNormalization + Relu + 1x1 Conv (+
// Relu) as kiln::PreActivationConv, on a map the GEMM packs (14x14) and one
// the transposed pointwise path takes (7x7).
TEST(RewriteTest, BatchNormReluPointwiseConv) {
  for (int64_t side : {14, 7}) {
    TestGraph t;
    const ir::ValueId x = t.input("x", Shape{1, 24, side, side});
    const ir::ValueId n = t.node("BatchNormalization",
                                 {x, t.constant("s", random_f32(Shape{24}, 1)), t.constant("o", random_f32(Shape{24}, 2)),
                                  t.constant("m", random_f32(Shape{24}, 3)), t.constant("v", random_f32(Shape{24}, 4, 0.5f, 2.f))},
                                 {attr_float("epsilon", 1e-5f)}, Shape{1, 24, side, side});
    const ir::ValueId r = t.node("Relu", {n}, {}, Shape{1, 24, side, side});
    const ir::ValueId c = t.node("Conv", {r, t.constant("w", random_f32(Shape{48, 24, 1, 1}, 5)),
                                          t.constant("b", random_f32(Shape{48}, 6))},
                                 {}, Shape{1, 48, side, side});
    t.output(t.node("Relu", {c}, {}, Shape{1, 48, side, side}));
    const optimizer::RewriteStats stats = expect_same_results(t, {random_f32(Shape{1, 24, side, side}, 7, -2.f, 2.f)});
    EXPECT_EQ(stats.count("batchnorm+relu+conv+relu"), 1) << side << ": " << stats.to_string();
  }
}

}  // namespace
}  // namespace kiln::runtime
