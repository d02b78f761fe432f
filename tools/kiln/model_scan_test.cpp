#include "model_scan.h"

#include <gtest/gtest.h>

#include "demo_model.h"
#include "wire_format.h"

namespace kiln::cli {
namespace {

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

wire::Writer make_node(const std::string& op, std::vector<std::string> inputs) {
  wire::Writer n;
  for (const auto& i : inputs) n.bytes_field(1, i);
  n.bytes_field(4, op);
  return n;
}

TEST(ModelScanTest, ReadsTheDemoModel) {
  const std::string bytes = demo_model_bytes();
  Result<ModelScan> scan = scan_model_bytes(as_bytes(bytes), "demo");
  ASSERT_TRUE(scan.is_ok()) << scan.status().to_string();
  EXPECT_EQ(scan->onnx_opset(), 13);
  ASSERT_EQ(scan->nodes.size(), 11u);
  EXPECT_EQ(scan->nodes[0].op_type, "Conv");
  EXPECT_EQ(scan->nodes[0].inputs, (std::vector<std::string>{"image", "conv1.weight", "conv1.bias"}));
  EXPECT_EQ(scan->nodes[10].op_type, "ArgMax");
  EXPECT_EQ(scan->nodes[10].ints.at("keepdims"), 0);
}

TEST(ModelScanTest, FindsNodesInSubgraphsAndFunctionsWithAttributes) {
  // If(then: RandomUniform) in the graph, Dropout with a float attribute in a function.
  wire::Writer then_graph;
  then_graph.message_field(1, make_node("RandomUniform", {}));
  wire::Writer g_attr;
  g_attr.bytes_field(1, "then_branch");
  g_attr.message_field(6, then_graph);
  wire::Writer if_node = make_node("If", {"cond"});
  if_node.message_field(5, g_attr);
  wire::Writer graph;
  graph.message_field(1, if_node);

  wire::Writer ratio;
  ratio.bytes_field(1, "ratio");
  ratio.float_field(2, 0.25f);
  wire::Writer neg;
  neg.bytes_field(1, "is_test");
  neg.varint_field(3, static_cast<uint64_t>(int64_t{-1}));
  wire::Writer dropout = make_node("Dropout", {"x"});
  dropout.message_field(5, ratio);
  dropout.message_field(5, neg);
  dropout.bytes_field(7, "ai.onnx");
  wire::Writer function;
  function.message_field(7, dropout);

  wire::Writer opset;
  opset.bytes_field(1, "ai.onnx");
  opset.varint_field(2, 6);
  wire::Writer model;
  model.message_field(7, graph);
  model.message_field(8, opset);
  model.message_field(25, function);

  Result<ModelScan> scan = scan_model_bytes(as_bytes(model.bytes()), "m");
  ASSERT_TRUE(scan.is_ok()) << scan.status().to_string();
  EXPECT_EQ(scan->onnx_opset(), 6);
  ASSERT_EQ(scan->nodes.size(), 3u);
  EXPECT_EQ(scan->nodes[0].op_type, "If");
  EXPECT_EQ(scan->nodes[1].op_type, "RandomUniform");
  EXPECT_EQ(scan->nodes[2].op_type, "Dropout");
  EXPECT_EQ(scan->nodes[2].domain, "");
  EXPECT_FLOAT_EQ(scan->nodes[2].floats.at("ratio"), 0.25f);
  EXPECT_EQ(scan->nodes[2].ints.at("is_test"), -1);
}

TEST(ModelScanTest, RejectsMalformedBytes) {
  const std::string full = demo_model_bytes();
  const std::string truncated = full.substr(0, full.size() / 2);  // inside the graph
  Result<ModelScan> scan = scan_model_bytes(as_bytes(truncated), "cut.onnx");
  ASSERT_FALSE(scan.is_ok());
  EXPECT_EQ(scan.status().message(), "'cut.onnx' is not a valid ONNX model file");
  const std::string garbage = "\xff\xff\xff\x0f";
  EXPECT_FALSE(scan_model_bytes(as_bytes(garbage), "g").is_ok());
  Result<ModelScan> missing = scan_model_file("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIo);
}

}  // namespace
}  // namespace kiln::cli
