// libonnx 1.12's shape inference segfaults on some malformed models; the
// importer runs it in a child process, so such a model imports (untyped)
// instead of crashing the caller.
#include "onnx/test_util.h"

namespace kiln::importer::testing {
namespace {

TEST(InferenceIsolationTest, LibonnxCrashLeavesTheModelUntyped) {
  // Gemm-6's inference function indexes dims of A without checking its
  // rank; A is a scalar here (this segfaults onnx.shape_inference in-process).
  auto m = parse_text(R"(
<ir_version: 3, opset_import: ["" : 6]>
g (float A, float[3, 4] B, float[4] C) => (float[4] Y)
{
  Y = Gemm(A, B, C)
}
)");
  auto model = import_proto(m);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ(model->graph.nodes.size(), 1u);
}

TEST(InferenceIsolationTest, WellFormedModelsAreStillTyped) {
  auto model = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] X) => (float[2, 3] Y)
{
  T = Relu(X)
  Y = Neg(T)
}
)");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const ir::Graph& g = model->graph;
  ir::ValueId t = g.find_value("T");
  ASSERT_NE(t, ir::kNoValue);
  EXPECT_TRUE(g.value(t).type.is_static());  // came back from the child
}

}  // namespace
}  // namespace kiln::importer::testing
