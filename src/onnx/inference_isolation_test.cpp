// libonnx 1.12's shape inference segfaults on some malformed models; the
// importer runs it in a child process, so such a model imports (untyped)
// instead of crashing the caller.
#include "onnx/op_versions.h"
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

namespace kiln::importer::testing {
namespace {

void expect_error_has(const Result<ir::Model>& r, const std::string& text) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << text;
  EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
}

// A model whose one node is rewritten to have the given inputs.
onnx::ModelProto with_node(const std::string& op, std::vector<std::string> inputs) {
  auto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 2] X) => (float[2, 2] Y)
{
  Y = Relu(X)
}
)");
  auto* n = m.mutable_graph()->mutable_node(0);
  n->set_op_type(op);
  n->clear_input();
  for (const auto& i : inputs) n->add_input(i);
  return m;
}

TEST(SchemaCheckTest, NodesMustFitTheirSchema) {
  expect_error_has(import_proto(with_node("HannWindow", {})), "node HannWindow has 0 inputs; HannWindow-17 takes 1 to 1");
  expect_error_has(import_proto(with_node("Add", {"X", "", "X"})), "node Add has 3 inputs; Add-14 takes 2 to 2");
  expect_error_has(import_proto(with_node("Gemm", {"", "X"})), "node Gemm: input 0 (A) is required but given as ''");
  // Trailing empty names are omitted optional inputs, not extra ones.
  auto ok = import_proto(with_node("Clip", {"X", "", ""}));
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
}

// The same node at `opset`, named `name`.
onnx::ModelProto at_opset(onnx::ModelProto m, int opset, const std::string& name) {
  m.mutable_opset_import(0)->set_version(opset);
  m.mutable_graph()->mutable_node(0)->set_name(name);
  return m;
}

// A required (Single) formal input given as '' is refused at import, under
// libonnx's schemas (opset 17) and Kiln's own (op_versions.cpp, opset 18 on);
// optional inputs may still be omitted in the middle.
TEST(SchemaCheckTest, RequiredInputsMayNotBeGivenAsEmpty) {
  expect_error_has(import_proto(at_opset(with_node("Resize", {"", "", "", "X"}), 18, "r")),
                   "node Resize 'r': input 0 (X) is required but given as ''");
  expect_error_has(import_proto(at_opset(with_node("Resize", {"", "", "", "X"}), 13, "r")),
                   "node Resize 'r': input 0 (X) is required but given as ''");
  expect_error_has(import_proto(at_opset(with_node("Pad", {"X", "", "X"}), 18, "p")),
                   "node Pad 'p': input 1 (pads) is required but given as ''");
  expect_error_has(import_proto(at_opset(with_node("RotaryEmbedding", {"X", "X", "", "X"}), 23, "")),
                   "node RotaryEmbedding: input 2 (sin_cache) is required but given as ''");
  for (int opset : {13, 17, 18}) {
    auto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2, 2] X, int64[2] S) => (float[4, 4] Y)
{
  Y = Resize <mode = "nearest"> (X, S)
}
)");
    auto* n = m.mutable_graph()->mutable_node(0);
    n->clear_input();
    for (const char* i : {"X", "", "", "S"}) n->add_input(i);
    auto ok = import_proto(at_opset(m, opset, "r"));
    EXPECT_TRUE(ok.ok()) << "opset " << opset << ": " << ok.status().to_string();
  }
}

// Nodes of model-local functions (inlined into the graph) are checked too.
TEST(SchemaCheckTest, LocalFunctionNodesMeetTheirSchemas) {
  auto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 18, "local" : 1]>
g (float[2, 2] X) => (float[2, 2] Y)
{
  Y = local.F(X)
}
<domain: "local", opset_import: ["" : 18]>
F (A) => (B)
{
  B = Relu(A)
}
)");
  ASSERT_TRUE(import_proto(m).ok());
  auto* n = m.mutable_functions(0)->mutable_node(0);
  n->set_op_type("Resize");
  n->clear_input();
  for (const char* i : {"", "", "", "A"}) n->add_input(i);
  expect_error_has(import_proto(m), "input 0 (X) is required but given as ''");
  expect_error_has(import_proto(m), "model-local function 'F'");
}

// Kiln's table names exactly its min_inputs required inputs, each non-empty.
TEST(SchemaCheckTest, OwnSchemaDataNamesEveryRequiredInput) {
  for (const OpVersion& v : op_versions()) {
    for (int i = 0; i < v.min_inputs; ++i)
      EXPECT_FALSE(required_input_name(v, i).empty()) << v.op_type << "-" << v.since_version << " input " << i;
    EXPECT_TRUE(required_input_name(v, v.min_inputs).empty()) << v.op_type << "-" << v.since_version;
  }
}

}  // namespace
}  // namespace kiln::importer::testing
