// Malformed inputs, model-level conversion and shape inference.
#include "onnx/importer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "onnx/graph_converter.h"
#include "onnx/test_util.h"

namespace kiln::importer {
namespace {

using testing::import_proto;
using testing::import_text;
using testing::parse_text;
using testing::TempDir;
using testing::to_bytes;
using testing::value_named;

#define EXPECT_ERROR_HAS(result, text)                                                     \
  do {                                                                                     \
    ASSERT_FALSE((result).ok()) << "expected an error containing: " << (text);             \
    EXPECT_NE((result).status().message().find(text), std::string::npos)                  \
        << "message: " << (result).status().message() << "\nexpected to contain: " << (text); \
  } while (0)

constexpr const char* kSmallModel = R"(
<ir_version: 8, opset_import: ["" : 15]>
small (float[2, 3] X) => (float[3, 2] Y)
{
  R = Relu(X)
  Y = Transpose <perm = [1, 0]> (R)
}
)";

onnx::ModelProto model_with_weights(int n) {
  onnx::ModelProto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[N] X) => (float[N] Y)
{
  Y = Add(X, W)
}
)");
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(n);
  std::vector<float> v(static_cast<size_t>(n), 1.5f);
  w->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return m;
}

TEST(ImporterTest, ImportsASmallModel) {
  auto m = import_text(kSmallModel);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->ir_version, 8);
  const ir::Graph& g = m->graph;
  EXPECT_EQ(g.name, "small");
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op_type, "Relu");
  EXPECT_EQ(g.nodes[0].opset, 15);
  EXPECT_EQ(*g.nodes[1].attr_ints("perm"), (std::vector<int64_t>{1, 0}));
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.value(g.inputs[0]).type.to_string(), "float32[2, 3]");
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.value(g.outputs[0]).type.to_string(), "float32[3, 2]");
  EXPECT_EQ(g.opsets.at(""), 15);
}

TEST(ImporterTest, MissingFileIsNotFound) {
  auto m = import_model_file("/nonexistent/dir/model.onnx");
  EXPECT_ERROR_HAS(m, "model file '/nonexistent/dir/model.onnx' does not exist");
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
}

TEST(ImporterTest, DirectoryIsNotAModelFile) {
  TempDir dir;
  auto m = import_model_file(dir.path());
  EXPECT_ERROR_HAS(m, "is not a regular file");
}

TEST(ImporterTest, EmptyFileIsNamed) {
  TempDir dir;
  dir.write("empty.onnx", "");
  auto m = import_model_file(dir.file("empty.onnx"));
  EXPECT_ERROR_HAS(m, "empty.onnx' is empty");
  auto b = import_model_bytes({});
  EXPECT_ERROR_HAS(b, "is empty");
}

TEST(ImporterTest, NotAProtobufIsNamed) {
  const std::string text = "hello, this is certainly not an ONNX model\n";
  auto m = import_model_bytes({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  EXPECT_ERROR_HAS(m, "is not an ONNX model");
  const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  auto j = import_model_bytes(junk);
  EXPECT_ERROR_HAS(j, "is not an ONNX model");
}

TEST(ImporterTest, ATensorFileIsNotAModel) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(1);
  t.add_float_data(1.f);
  t.set_name("x");
  std::string bytes;
  t.SerializeToString(&bytes);
  auto m = import_model_bytes({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  EXPECT_ERROR_HAS(m, "is not an ONNX model");
}

TEST(ImporterTest, TruncatedFileIsNamed) {
  TempDir dir;
  const auto bytes = to_bytes(model_with_weights(1000));
  dir.write("cut.onnx", std::string(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() / 2)));
  auto m = import_model_file(dir.file("cut.onnx"));
  EXPECT_ERROR_HAS(m, "cut.onnx' is truncated");
  EXPECT_ERROR_HAS(m, "field 'graph' (7)");
}

TEST(ImporterTest, EveryPrefixOfAModelFailsCleanly) {
  // No prefix may crash; most must say "truncated", none may import a model
  // that silently lost its graph.
  const auto bytes = to_bytes(model_with_weights(4));
  size_t truncated = 0;
  for (size_t n = 1; n < bytes.size(); ++n) {
    auto m = import_model_bytes({bytes.data(), n});
    if (m.ok()) {
      EXPECT_EQ(m->graph.nodes.size(), 1u) << "prefix " << n;
      continue;
    }
    truncated += m.status().message().find("truncated") != std::string::npos;
  }
  EXPECT_GT(truncated, bytes.size() / 2);
}

TEST(ImporterTest, CorruptNestedMessageIsAnError) {
  auto bytes = to_bytes(model_with_weights(2));
  // Damage a byte inside the graph: the top level stays intact.
  auto m = parse_text(kSmallModel);
  auto good = to_bytes(m);
  bool failed_cleanly = true;
  for (size_t i = 0; i < good.size(); ++i) {
    auto copy = good;
    copy[i] = 0xff;
    auto r = import_model_bytes(copy);
    if (!r.ok() && r.status().message().empty()) failed_cleanly = false;
  }
  EXPECT_TRUE(failed_cleanly);
  bytes[bytes.size() / 2] ^= 0x07;  // a flipped wire type deep inside
  (void)import_model_bytes(bytes);
}

TEST(ImporterTest, ModelWithoutGraphIsNamed) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_version(15);
  auto r = import_proto(m);
  EXPECT_ERROR_HAS(r, "the model has no graph");
}

TEST(ImporterTest, UnsupportedIrVersionIsNamed) {
  auto m = parse_text(kSmallModel);
  m.set_ir_version(14);
  auto r = import_proto(m);
  EXPECT_ERROR_HAS(r, "IR version 14");
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  m.clear_ir_version();
  auto none = import_proto(m);
  EXPECT_ERROR_HAS(none, "has no ir_version");
}

TEST(ImporterTest, NewerIrVersionsAreRefusedOnlyForFeaturesKilnLacks) {
  auto m = parse_text(kSmallModel);
  for (int v = 11; v <= 13; ++v) {
    m.set_ir_version(v);
    EXPECT_TRUE(import_proto(m).ok()) << "IR version " << v;
  }
  // ModelProto.configuration (26) and NodeProto.device_configurations (10):
  // multi-device execution, which Kiln does not implement.
  auto with_config = m;
  with_config.mutable_unknown_fields()->AddLengthDelimited(kModelConfigurationField, "");
  auto r = import_proto(with_config);
  EXPECT_ERROR_HAS(r, "ModelProto.configuration");
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  auto node_config = m;
  node_config.mutable_graph()->mutable_node(0)->mutable_unknown_fields()->AddLengthDelimited(
      kNodeDeviceConfigurationsField, "");
  EXPECT_ERROR_HAS(import_proto(node_config), "device_configurations");
}

TEST(ImporterTest, OldIrVersionWithoutOpsetImportMeansOpsetOne) {
  auto m = parse_text(kSmallModel);
  m.set_ir_version(2);
  m.clear_opset_import();
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph.nodes[0].opset, 1);
  // From IR version 3 on, a missing import is an error naming the domain.
  m.set_ir_version(3);
  auto bad = import_proto(m);
  EXPECT_ERROR_HAS(bad, "domain 'ai.onnx' is not imported");
}

TEST(ImporterTest, DomainsAreNormalizedAndEachNodeGetsItsOpset) {
  auto m = parse_text(R"(
<ir_version: 8, opset_import: ["ai.onnx" : 13, "com.example" : 2]>
g (float[2] X) => (float[2] Y, float[2] Z)
{
  Y = Relu(X)
  Z = com.example.Custom(X)
}
)");
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& nodes = r->graph.nodes;
  EXPECT_EQ(nodes[0].domain, "");
  EXPECT_EQ(nodes[0].opset, 13);
  EXPECT_EQ(nodes[1].domain, "com.example");
  EXPECT_EQ(nodes[1].opset, 2);
  EXPECT_EQ(r->graph.opsets.at(""), 13);
}

TEST(ImporterTest, DuplicateValueDefinitionsAreNamed) {
  auto twice = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[2] Y)
{
  Y = Relu(X)
  Y = Neg(X)
}
)");
  EXPECT_ERROR_HAS(twice, "value 'Y' is defined twice: by node Relu and by node Neg");

  auto input_too = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[2] X)
{
  X = Relu(X)
}
)");
  EXPECT_ERROR_HAS(input_too, "value 'X' is defined twice: by graph input 0 and by node Relu");

  auto m = parse_text(kSmallModel);
  *m.mutable_graph()->add_input() = m.graph().input(0);
  auto listed_twice = import_proto(m);
  EXPECT_ERROR_HAS(listed_twice, "graph input 'X' is listed twice");
}

TEST(ImporterTest, UndefinedNodeInputIsNamed) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[2] Y)
{
  Y = Add(X, Ghost)
}
)");
  EXPECT_ERROR_HAS(r, "node Add: input 1 reads 'Ghost', which no node output, graph input or initializer defines");
}

TEST(ImporterTest, UndefinedGraphOutputIsNamed) {
  auto m = parse_text(kSmallModel);
  m.mutable_graph()->mutable_output(0)->set_name("Nowhere");
  auto r = import_proto(m);
  EXPECT_ERROR_HAS(r, "graph output 'Nowhere' is not produced by any node");
}

TEST(ImporterTest, BadInitializerSizeIsNamed) {
  auto m = model_with_weights(4);
  m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(10);
  auto r = import_proto(m);
  EXPECT_ERROR_HAS(r, "initializer 'W': tensor 'W' has raw_data of 10 bytes, but dims [4] of FLOAT need 16 bytes");
}

TEST(ImporterTest, CycleIsNamed) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[2] Y)
{
  A = Add(X, B)
  B = Relu(A)
  Y = Identity(B)
}
)");
  EXPECT_ERROR_HAS(r, "cycle");
}

TEST(ImporterTest, UnsortedGraphIsSorted) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[2] Y)
{
  Y = Neg(B)
  B = Relu(A)
  A = Abs(X)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<std::string> order;
  for (const auto& n : r->graph.nodes) order.push_back(n.op_type);
  EXPECT_EQ(order, (std::vector<std::string>{"Abs", "Relu", "Neg"}));
}

TEST(ImporterTest, InitializersAreNotInputsAndKeepTheirValues) {
  // IR < 4 style: the initializer is also listed as a graph input.
  auto m = model_with_weights(3);
  auto* in = m.mutable_graph()->add_input();
  in->set_name("W");
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph& g = r->graph;
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.value_name(g.inputs[0]), "X");
  const ir::ValueId w = g.find_value("W");
  ASSERT_TRUE(g.is_initializer(w));
  const Tensor* t = g.initializer(w);
  EXPECT_EQ(t->shape(), (Shape{3}));
  EXPECT_EQ(t->data<float>()[2], 1.5f);
  EXPECT_EQ(g.value(w).type.to_string(), "float32[3]");
}

TEST(ImporterTest, ConstantNodesStayNodes) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[2] Y)
{
  C = Constant <value = float[2] {1.0, 2.0}> ()
  Y = Add(X, C)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph.nodes.size(), 2u);
  EXPECT_EQ(r->graph.nodes[0].op_type, "Constant");
  const Tensor* v = *r->graph.nodes[0].attr_tensor("value");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->data<float>()[1], 2.f);
  EXPECT_TRUE(r->graph.initializers.empty());
}

TEST(ImporterTest, ExternalDataRelativeToTheModelFile) {
  TempDir dir;
  auto m = model_with_weights(4);
  auto* w = m.mutable_graph()->mutable_initializer(0);
  const std::string data = w->raw_data();
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  const auto bytes = to_bytes(m);
  dir.write("model.onnx", std::string(bytes.begin(), bytes.end()));

  // Missing side file.
  auto missing = import_model_file(dir.file("model.onnx"));
  EXPECT_ERROR_HAS(missing, "w.bin' does not exist");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  // Too short.
  dir.write("w.bin", data.substr(0, 8));
  auto short_file = import_model_file(dir.file("model.onnx"));
  EXPECT_ERROR_HAS(short_file, "w.bin' is too short for tensor 'W'");

  dir.write("w.bin", data);
  auto ok = import_model_file(dir.file("model.onnx"));
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  const Tensor* t = ok->graph.initializer(ok->graph.find_value("W"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->data<float>()[3], 1.5f);
  // Where the bytes came from is kept (value_constant_info reports it).
  auto loc = ok->graph.external_data.find(ok->graph.find_value("W"));
  ASSERT_NE(loc, ok->graph.external_data.end());
  EXPECT_EQ(loc->second.path, std::filesystem::canonical(dir.file("w.bin")).string());
  EXPECT_EQ(loc->second.offset, 0u);
  EXPECT_EQ(loc->second.length, 16u);
  EXPECT_EQ(loc->second.data, t->raw_data());
  EXPECT_TRUE(loc->second.mapped);  // offset 0 of a mapping is aligned

  // From bytes, the folder comes from the options.
  ImportOptions opts;
  opts.base_dir = dir.path();
  auto from_bytes = import_model_bytes(bytes, opts);
  ASSERT_TRUE(from_bytes.ok()) << from_bytes.status().to_string();
}

TEST(ImporterTest, MetadataIsKept) {
  auto m = parse_text(kSmallModel);
  m.set_producer_name("pytorch");
  m.set_producer_version("1.13");
  m.set_doc_string("a doc");
  auto* kv = m.add_metadata_props();
  kv->set_key("author");
  kv->set_value("me");
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->producer, "pytorch 1.13");
  EXPECT_EQ(r->doc, "a doc");
  EXPECT_EQ(r->metadata.at("author"), "me");
}

TEST(ImporterTest, ShapeInferenceTypesIntermediateValues) {
  auto with = import_text(kSmallModel);
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  EXPECT_EQ(value_named(with->graph, "R").type.to_string(), "float32[2, 3]");

  ImportOptions off;
  off.infer_shapes = false;
  auto without = import_text(kSmallModel, off);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(value_named(without->graph, "R").type.kind, ir::ValueType::Kind::kUnknown);
}

TEST(ImporterTest, ShapeInferencePropagatesShapeData) {
  // Reshape's target comes from Shape(): only data propagation knows it.
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2, 3, 4] X, float[24] Z) => (float[?, ?, ?] Y)
{
  S = Shape(X)
  Y = Reshape(Z, S)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(value_named(r->graph, "S").type.to_string(), "int64[3]");
  EXPECT_EQ(value_named(r->graph, "Y").type.to_string(), "float32[2, 3, 4]");
}

TEST(ImporterTest, InferenceSeesSmallConstantsAndKeepsLargeData) {
  // Shape inference works on a copy without the data of large tensors; the
  // small shape initializer must still reach Reshape's inference, and the
  // large tensors must come out of the import intact.
  auto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2000] X) => (float[?, ?] Y)
{
  C = Constant <value = float[1] {0.5}> ()
  A = Add(X, W)
  B = Mul(A, C)
  Y = Reshape(B, S)
}
)");
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2000);
  for (int i = 0; i < 2000; ++i) w->add_float_data(static_cast<float>(i));
  auto* c = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_t();
  c->clear_dims();
  c->add_dims(2000);
  c->clear_float_data();
  for (int i = 0; i < 2000; ++i) c->add_float_data(-static_cast<float>(i));
  auto* shape = m.mutable_graph()->add_initializer();
  shape->set_name("S");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(2);
  shape->add_int64_data(40);
  shape->add_int64_data(50);
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph& g = r->graph;
  EXPECT_EQ(value_named(g, "Y").type.to_string(), "float32[40, 50]");
  EXPECT_EQ(value_named(g, "C").type.to_string(), "float32[2000]");
  const Tensor* wt = g.initializer(g.find_value("W"));
  ASSERT_NE(wt, nullptr);
  EXPECT_EQ(wt->data<float>()[1999], 1999.f);
  const Tensor* ct = *g.nodes[0].attr_tensor("value");
  ASSERT_NE(ct, nullptr);
  EXPECT_EQ(ct->data<float>()[1999], -1999.f);
}

TEST(ImporterTest, SymbolicDimsAreKept) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[batch, 3] X) => (float[batch, 3] Y)
{
  Y = Relu(X)
}
)");
  ASSERT_TRUE(r.ok());
  const ir::ValueType& t = r->graph.value(r->graph.inputs[0]).type;
  ASSERT_EQ(t.dims.size(), 2u);
  EXPECT_FALSE(t.dims[0].known());
  EXPECT_EQ(t.dims[0].param, "batch");
  EXPECT_EQ(t.dims[1].value, 3);
}

TEST(ImporterTest, FailedShapeInferenceKeepsDeclaredTypes) {
  // The declared output shape contradicts what inference computes: ONNX
  // throws while merging; the import goes on with the declarations.
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[5] Y)
{
  T = Relu(X)
  Y = Neg(T)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(value_named(r->graph, "Y").type.to_string(), "float32[5]");
}

TEST(ImporterTest, ModelsThatCrashLibonnxInferenceAreGuarded) {
  // libonnx 1.12's Shape-15 data propagation dereferences a null type when
  // the input is untyped (here: the output of an op without a schema).
  auto custom = import_text(R"(
<ir_version: 8, opset_import: ["" : 15, "custom" : 1]>
g (float[2, 3] X) => (int64[1] Z)
{
  Y = custom.Foo(X)
  Z = Shape <end = 1> (Y)
}
)");
  ASSERT_TRUE(custom.ok()) << custom.status().to_string();
  EXPECT_EQ(value_named(custom->graph, "Z").type.dtype, DType::kInt64);

  // Shape reading a name nobody defines: caught before inference runs.
  auto undefined = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2, 3] X) => (int64[1] Z)
{
  Z = Shape <end = 1> (Q)
}
)");
  EXPECT_ERROR_HAS(undefined, "reads 'Q'");

  // Scan without its required body (which crashes libonnx inference) is
  // rejected by the schema check before inference could run.
  auto scan = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[2] Y)
{
  Y = Scan <num_scan_inputs = 1> (X)
}
)");
  EXPECT_ERROR_HAS(scan, "required attribute 'body' is missing");
}

TEST(ImporterTest, SequenceOptionalAndMapTypes) {
  auto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 16]>
g (float[N] X) => (float[?] Y)
{
  Y = SequenceAt(S, I)
}
)");
  // The 1.12 text syntax has no sequence types: build S by hand.
  auto* seq = m.mutable_graph()->mutable_input(0);
  seq->set_name("S");
  auto* elem = seq->mutable_type()->mutable_sequence_type()->mutable_elem_type();
  elem->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  elem->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_param("N");
  auto* i = m.mutable_graph()->add_input();
  i->set_name("I");
  i->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  i->mutable_type()->mutable_tensor_type()->mutable_shape();
  auto* o = m.mutable_graph()->add_value_info();
  o->set_name("unused");
  auto* opt = m.mutable_graph()->add_input();
  opt->set_name("O");
  opt->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  auto* map = m.mutable_graph()->add_input();
  map->set_name("M");
  map->mutable_type()->mutable_map_type()->set_key_type(onnx::TensorProto::INT64);
  map->mutable_type()->mutable_map_type()->mutable_value_type()->mutable_tensor_type()->set_elem_type(1);
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph& g = r->graph;
  EXPECT_EQ(value_named(g, "S").type.to_string(), "seq(float32[N])");
  EXPECT_EQ(value_named(g, "I").type.to_string(), "int64[]");
  EXPECT_EQ(value_named(g, "O").type.to_string(), "optional(float32[...])");
  const ir::ValueType& mt = value_named(g, "M").type;
  EXPECT_EQ(mt.kind, ir::ValueType::Kind::kMap);
  EXPECT_EQ(mt.dtype, DType::kInt64);
  ASSERT_TRUE(mt.elem);
  EXPECT_EQ(mt.elem->dtype, DType::kFloat32);
}

TEST(ImporterTest, UnsupportedInputElementTypeIsNamed) {
  auto m = parse_text(kSmallModel);
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(40);
  auto r = import_proto(m);
  EXPECT_ERROR_HAS(r, "graph input 'X': element type 40 (unknown) is not supported");
}

TEST(ImporterTest, LargeModelOverSixtyFourMegabytesParses) {
  // 20M floats = 80 MB of raw_data: above protobuf's historical 64 MB limit.
  auto m = model_with_weights(20 * 1000 * 1000);
  TempDir dir;
  {
    std::string bytes;
    m.SerializeToString(&bytes);
    m.Clear();
    dir.write("big.onnx", bytes);
  }
  ImportOptions opts;
  opts.infer_shapes = false;
  auto r = import_model_file(dir.file("big.onnx"), opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor* w = r->graph.initializer(r->graph.find_value("W"));
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->numel(), 20 * 1000 * 1000);
  EXPECT_EQ(w->data<float>()[19999999], 1.5f);
}

}  // namespace
}  // namespace kiln::importer

namespace kiln::importer {
namespace {

using testing::import_text;

// ReduceMean-18 takes axes as an input; libonnx 1.12 knows only ReduceMean-13
// (one input). Kiln's own schema data (op_versions.cpp) decides.
TEST(ImporterTest, OpVersionsNewerThanLibonnxUseKilnSchemaData) {
  auto ok = import_text(R"(
<ir_version: 10, opset_import: ["" : 18]>
g (float[2, 3] X, int64[1] A) => (float[2, 1] Y)
{
  Y = ReduceMean <keepdims = 1> (X, A)
}
)");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  auto bad = import_text(R"(
<ir_version: 10, opset_import: ["" : 18]>
g (float[2, 3] X, int64[1] A) => (float[2, 1] Y)
{
  Y = ReduceMean <keepdims = 1> (X, A, A)
}
)");
  EXPECT_ERROR_HAS(bad, "ReduceMean-18 takes 1 to 2");
  auto wrong_attr = import_text(R"(
<ir_version: 10, opset_import: ["" : 18]>
g (float[2, 3] X) => (float[2, 3] Y)
{
  Y = GroupNormalization <num_groups = 1.5> (X, X, X)
}
)");
  EXPECT_ERROR_HAS(wrong_attr, "attribute 'num_groups' has type FLOAT");
  // At opset 17 libonnx's ReduceMean-13 still decides.
  auto old = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] X, int64[1] A) => (float[2, 1] Y)
{
  Y = ReduceMean <keepdims = 1> (X, A)
}
)");
  EXPECT_ERROR_HAS(old, "ReduceMean-13 takes 1 to 1");
}

}  // namespace
}  // namespace kiln::importer
