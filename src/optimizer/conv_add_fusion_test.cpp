// Conv + Add (+ activation) as FusedConv with a sum input (fusion_patterns.h):
// where it fires and where it must not. src/runtime/rewrite_test.cpp runs the
// fused graph against the original.
#include <gtest/gtest.h>

#include "optimizer/optimizer.h"
#include "optimizer/test_graph.h"

namespace kiln::optimizer {
namespace {

using testing::attr_ints;
using testing::TestGraph;

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }

struct Residual {
  TestGraph t;
  ir::ValueId x, w, y;
  Residual() {
    x = t.input("x", Shape{1, 2, 4, 4});
    w = t.constant("w", f32({1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 2, 1, 2}));
    y = t.node("Conv", {x, w}, {attr_ints("pads", {0, 0, 0, 1})}, Shape{1, 2, 4, 4});
  }
};

TEST(ConvAddFusionTest, ResidualAddAndActivationFuse) {
  for (bool z_first : {false, true}) {
    Residual r;
    const ir::ValueId sum = z_first ? r.t.node("Add", {r.x, r.y}, {}, Shape{1, 2, 4, 4})
                                    : r.t.node("Add", {r.y, r.x}, {}, Shape{1, 2, 4, 4});
    const ir::ValueId out = r.t.node("Relu", {sum}, {}, Shape{1, 2, 4, 4});
    r.t.output(out);
    const std::vector<Fusion> fs = find_portable_fusions(r.t.g, r.t.constants, r.t.all_eligible());
    ASSERT_EQ(fs.size(), 1u);
    EXPECT_EQ(fs[0].name, "conv+add+relu");
    EXPECT_EQ(fs[0].node.op_type, "FusedConv");
    EXPECT_EQ(fs[0].node.domain, "com.microsoft");
    ASSERT_EQ(fs[0].node.inputs.size(), 4u);
    EXPECT_EQ(fs[0].node.inputs[2], ir::kNoValue);  // no bias
    EXPECT_EQ(fs[0].node.inputs[3], r.x);           // Z
    EXPECT_EQ(fs[0].node.outputs[0], out);
    EXPECT_EQ(*fs[0].node.attr_string("activation", ""), "Relu");
    EXPECT_EQ(fs[0].replaces, (std::vector<size_t>{0, 1, 2}));
  }
}

TEST(ConvAddFusionTest, AddAloneWhenTheSumIsReadTwice) {
  Residual r;
  const ir::ValueId sum = r.t.node("Add", {r.y, r.x}, {}, Shape{1, 2, 4, 4});
  r.t.output(r.t.node("Relu", {sum}, {}, Shape{1, 2, 4, 4}));
  r.t.output(r.t.node("Sigmoid", {sum}, {}, Shape{1, 2, 4, 4}));
  const std::vector<Fusion> fs = find_portable_fusions(r.t.g, r.t.constants, r.t.all_eligible());
  ASSERT_EQ(fs.size(), 1u);
  EXPECT_EQ(fs[0].name, "conv+add");
  EXPECT_EQ(fs[0].node.outputs[0], sum);
  EXPECT_FALSE(fs[0].node.has_attr("activation"));
}

TEST(ConvAddFusionTest, DoesNotFireOnBroadcastsOrSharedValues) {
  {  // Z broadcasts (a per-channel bias): not FusedConv's Z
    Residual r;
    const ir::ValueId c = r.t.constant("c", f32({1, 2}, Shape{1, 2, 1, 1}));
    r.t.output(r.t.node("Add", {r.y, c}, {}, Shape{1, 2, 4, 4}));
    EXPECT_TRUE(find_portable_fusions(r.t.g, r.t.constants, r.t.all_eligible()).empty());
  }
  {  // the conv output is read twice
    Residual r;
    r.t.output(r.t.node("Add", {r.y, r.x}, {}, Shape{1, 2, 4, 4}));
    r.t.output(r.t.node("Neg", {r.y}, {}, Shape{1, 2, 4, 4}));
    EXPECT_TRUE(find_portable_fusions(r.t.g, r.t.constants, r.t.all_eligible()).empty());
  }
  {  // the conv output is a graph output
    Residual r;
    r.t.output(r.t.node("Add", {r.y, r.x}, {}, Shape{1, 2, 4, 4}));
    r.t.output(r.y);
    EXPECT_TRUE(find_portable_fusions(r.t.g, r.t.constants, r.t.all_eligible()).empty());
  }
  {  // y + y
    Residual r;
    r.t.output(r.t.node("Add", {r.y, r.y}, {}, Shape{1, 2, 4, 4}));
    EXPECT_TRUE(find_portable_fusions(r.t.g, r.t.constants, r.t.all_eligible()).empty());
  }
  {  // Z's shape unknown at load
    Residual r;
    const ir::ValueId u = r.t.node("Neg", {r.x});  // untyped output
    r.t.output(r.t.node("Add", {r.y, u}, {}, Shape{1, 2, 4, 4}));
    EXPECT_TRUE(find_portable_fusions(r.t.g, r.t.constants, r.t.all_eligible()).empty());
  }
  {  // the Add was claimed by a backend
    Residual r;
    r.t.output(r.t.node("Add", {r.y, r.x}, {}, Shape{1, 2, 4, 4}));
    std::vector<uint8_t> eligible = r.t.all_eligible();
    eligible[1] = 0;
    EXPECT_TRUE(find_portable_fusions(r.t.g, r.t.constants, eligible).empty());
  }
}

}  // namespace
}  // namespace kiln::optimizer
