// BatchNormalization + Relu + pointwise Conv as kiln::PreActivationConv
// (fusion_patterns.h): where it fires and where it must not.
// src/runtime/rewrite_test.cpp runs the fused graph against the original.
#include <gtest/gtest.h>

#include "optimizer/optimizer.h"
#include "optimizer/test_graph.h"

namespace kiln::optimizer {
namespace {

using testing::attr_float;
using testing::attr_int;
using testing::attr_ints;
using testing::TestGraph;

Tensor filled(Shape s, float v) {
  std::vector<float> data(static_cast<size_t>(s.numel()), v);
  return Tensor::from_vector<float>(data, std::move(s));
}

// x [1, 4, 5, 5] -> BatchNormalization -> Relu -> Conv (kernel k x k) [-> Relu].
struct PreAct {
  TestGraph t;
  ir::ValueId x, norm, relu, conv;
  explicit PreAct(int64_t k = 1, std::vector<ir::Attribute> conv_attrs = {}, bool constant_stats = true) {
    x = t.input("x", Shape{1, 4, 5, 5});
    const ir::ValueId mean = constant_stats ? t.constant("m", filled(Shape{4}, 0.1f)) : t.input("m", Shape{4});
    norm = t.node("BatchNormalization",
                  {x, t.constant("s", filled(Shape{4}, 2.f)), t.constant("b", filled(Shape{4}, 0.5f)), mean,
                   t.constant("v", filled(Shape{4}, 1.f))},
                  {attr_float("epsilon", 1e-3f)}, Shape{1, 4, 5, 5});
    relu = t.node("Relu", {norm}, {}, Shape{1, 4, 5, 5});
    const int64_t out = 5 - k + 1;
    conv = t.node("Conv", {relu, t.constant("w", filled(Shape{3, 4, k, k}, 0.25f))}, std::move(conv_attrs),
                  Shape{1, 3, out, out});
  }
};

TEST(PreactConvFusionTest, FiresOnBatchNormReluPointwiseConv) {
  PreAct p;
  const ir::ValueId out = p.t.node("Relu", {p.conv}, {}, Shape{1, 3, 5, 5});
  p.t.output(out);
  const std::vector<Fusion> fs = find_portable_fusions(p.t.g, p.t.constants, p.t.all_eligible());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].name, "batchnorm+relu+conv+relu");
  EXPECT_EQ(fs[0].node.domain, "kiln");
  EXPECT_EQ(fs[0].node.op_type, "PreActivationConv");
  ASSERT_EQ(fs[0].node.inputs.size(), 7u);
  EXPECT_EQ(fs[0].node.inputs[0], p.x);
  EXPECT_EQ(fs[0].node.inputs[2], ir::kNoValue);
  EXPECT_EQ(fs[0].node.outputs[0], out);
  EXPECT_FLOAT_EQ(*fs[0].node.attr_float("epsilon", 0.f), 1e-3f);
  EXPECT_EQ(fs[0].replaces, (std::vector<size_t>{0, 1, 2, 3}));

  PreAct plain(1, {attr_ints("strides", {1, 1}), attr_ints("pads", {0, 0, 0, 0})});
  plain.t.output(plain.conv);
  const std::vector<Fusion> fp = find_portable_fusions(plain.t.g, plain.t.constants, plain.t.all_eligible());
  ASSERT_EQ(fp.size(), 1u);
  EXPECT_EQ(fp[0].name, "batchnorm+relu+conv");
}

TEST(PreactConvFusionTest, DoesNotFireOffThePattern) {
  {  // a 3x3 conv (the conv+relu rules may still apply elsewhere)
    PreAct p(3);
    p.t.output(p.conv);
    EXPECT_TRUE(find_portable_fusions(p.t.g, p.t.constants, p.t.all_eligible()).empty());
  }
  {  // strided, padded or grouped 1x1
    for (const ir::Attribute& a : {attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1}), attr_int("group", 2)}) {
      PreAct p(1, {a});
      p.t.output(p.conv);
      EXPECT_TRUE(find_portable_fusions(p.t.g, p.t.constants, p.t.all_eligible()).empty()) << a.name;
    }
  }
  {  // statistics not constant
    PreAct p(1, {}, false);
    p.t.output(p.conv);
    EXPECT_TRUE(find_portable_fusions(p.t.g, p.t.constants, p.t.all_eligible()).empty());
  }
  {  // the normalized value is read twice, or is a graph output
    PreAct p;
    p.t.output(p.conv);
    p.t.output(p.norm);
    EXPECT_TRUE(find_portable_fusions(p.t.g, p.t.constants, p.t.all_eligible()).empty());
  }
  {  // the Relu's output is read twice
    PreAct p;
    p.t.output(p.conv);
    p.t.output(p.t.node("Neg", {p.relu}, {}, Shape{1, 4, 5, 5}));
    EXPECT_TRUE(find_portable_fusions(p.t.g, p.t.constants, p.t.all_eligible()).empty());
  }
  {  // the Conv was claimed by a backend
    PreAct p;
    p.t.output(p.conv);
    std::vector<uint8_t> eligible = p.t.all_eligible();
    eligible[2] = 0;
    EXPECT_TRUE(find_portable_fusions(p.t.g, p.t.constants, eligible).empty());
  }
}

}  // namespace
}  // namespace kiln::optimizer
