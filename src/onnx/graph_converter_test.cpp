// Subgraphs (outer references, nesting, ordering) and attributes of every kind.
#include "onnx/graph_converter.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "onnx/test_util.h"

namespace kiln::importer {
namespace {

using testing::import_proto;
using testing::import_text;
using testing::parse_text;
using testing::value_named;

std::vector<std::string> outer_ref_names(const ir::Graph& g) {
  std::vector<std::string> names;
  for (ir::ValueId id : g.outer_refs) names.push_back(g.value_name(id));
  std::sort(names.begin(), names.end());
  return names;
}

const ir::Node* find_op(const ir::Graph& g, const std::string& op) {
  for (const ir::Node& n : g.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

TEST(GraphConverterTest, IfBranchesReadOuterValuesByName) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X, bool c) => (float[2] Y)
{
  T = Relu(X)
  Y = If (c) <then_branch = then_g () => (float[2] a) { a = Neg(T) },
              else_branch = else_g () => (float[2] b) { b = Identity(X) }>
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Node* if_node = find_op(r->graph, "If");
  ASSERT_NE(if_node, nullptr);
  const ir::Graph* then_g = *if_node->attr_graph("then_branch");
  const ir::Graph* else_g = *if_node->attr_graph("else_branch");
  ASSERT_NE(then_g, nullptr);
  ASSERT_NE(else_g, nullptr);
  EXPECT_EQ(outer_ref_names(*then_g), (std::vector<std::string>{"T"}));
  EXPECT_EQ(outer_ref_names(*else_g), (std::vector<std::string>{"X"}));
  EXPECT_TRUE(then_g->inputs.empty());
  // The outer ref carries the enclosing graph's type.
  EXPECT_EQ(value_named(*then_g, "T").type.to_string(), "float32[2]");
  EXPECT_EQ(then_g->nodes[0].opset, 15);
  EXPECT_EQ(then_g->opsets.at(""), 15);
  EXPECT_TRUE(r->graph.outer_refs.empty());
}

TEST(GraphConverterTest, NestedOuterRefsAreListedByEveryGraphInBetween) {
  // The Loop body inside the If branch reads W from the main graph: the
  // branch does not use W itself, but must list it so it can pass it on.
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X, bool c, int64 n) => (float[2] Y)
{
  W = Abs(X)
  Y = If (c) <
    then_branch = then_g () => (float[2] a) {
      a = Loop (n, , X) <body = body_g (int64 i, bool cond_in, float[2] acc) => (bool cond_out, float[2] acc_out) {
        cond_out = Identity(cond_in)
        acc_out = Add(acc, W)
      }>
    },
    else_branch = else_g () => (float[2] b) { b = Identity(X) }>
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph* then_g = *find_op(r->graph, "If")->attr_graph("then_branch");
  ASSERT_NE(then_g, nullptr);
  const ir::Graph* body = *find_op(*then_g, "Loop")->attr_graph("body");
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(outer_ref_names(*body), (std::vector<std::string>{"W"}));
  EXPECT_EQ(outer_ref_names(*then_g), (std::vector<std::string>{"W", "X", "n"}));
  EXPECT_EQ(body->inputs.size(), 3u);
  // The Loop's omitted optional input stays a hole.
  const ir::Node* loop = find_op(*then_g, "Loop");
  ASSERT_EQ(loop->inputs.size(), 3u);
  EXPECT_EQ(loop->inputs[1], ir::kNoValue);
}

TEST(GraphConverterTest, SubgraphOutputMayBeAnOuterValue) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X, bool c) => (float[2] Y)
{
  Y = If (c) <then_branch = then_g () => (float[2] X) { },
              else_branch = else_g () => (float[2] b) { b = Neg(X) }>
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph* then_g = *find_op(r->graph, "If")->attr_graph("then_branch");
  EXPECT_EQ(outer_ref_names(*then_g), (std::vector<std::string>{"X"}));
  ASSERT_EQ(then_g->outputs.size(), 1u);
  EXPECT_EQ(then_g->outputs[0], then_g->outer_refs[0]);
}

TEST(GraphConverterTest, SubgraphReadingAnUndefinedNameIsNamed) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X, bool c) => (float[2] Y)
{
  Y = If (c) <then_branch = then_g () => (float[2] a) { a = Neg(Nope) },
              else_branch = else_g () => (float[2] b) { b = Neg(X) }>
}
)");
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("node If: attribute 'then_branch': graph 'then_g': node Neg: input 0 reads 'Nope'"),
            std::string::npos)
      << m;
}

TEST(GraphConverterTest, NodeReadingAValueOfAnotherBranchIsAnError) {
  // Values of a sibling subgraph are not in scope.
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X, bool c) => (float[2] Y)
{
  Y = If (c) <then_branch = then_g () => (float[2] a) { a = Neg(X) },
              else_branch = else_g () => (float[2] b) { b = Neg(a) }>
}
)");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reads 'a'"), std::string::npos) << r.status().message();
}

TEST(GraphConverterTest, NodeRunningASubgraphFollowsWhatTheSubgraphReads) {
  // In file order the If comes before the node producing T, which only its
  // branch reads: sorting must still put T's producer first.
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X, bool c) => (float[2] Y)
{
  Y = If (c) <then_branch = then_g () => (float[2] a) { a = Neg(T) },
              else_branch = else_g () => (float[2] b) { b = Identity(X) }>
  T = Relu(X)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph.nodes.size(), 2u);
  EXPECT_EQ(r->graph.nodes[0].op_type, "Relu");
  EXPECT_EQ(r->graph.nodes[1].op_type, "If");
}

TEST(GraphConverterTest, SortedGraphKeepsItsOrder) {
  // An already valid order must not be reshuffled: the If reads B through its
  // branch, and B's producer must stay before it.
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X, bool c) => (float[2] Y)
{
  A = Relu(X)
  B = Abs(X)
  C = Neg(A)
  Y = If (c) <then_branch = then_g () => (float[2] a) { a = Add(B, C) },
              else_branch = else_g () => (float[2] b) { b = Identity(X) }>
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::vector<std::string> order;
  for (const auto& n : r->graph.nodes) order.push_back(n.op_type);
  EXPECT_EQ(order, (std::vector<std::string>{"Relu", "Abs", "Neg", "If"}));
}

TEST(GraphConverterTest, ScanAndSequenceMapBodiesAreConverted) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[3, 2] X, float[2] init) => (float[2] final, float[3, 2] scan_out)
{
  final, scan_out = Scan <num_scan_inputs = 1, body = scan_body (float[2] s, float[2] x) => (float[2] s2, float[2] y) {
    s2 = Add(s, x)
    y = Identity(s2)
  }> (init, X)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph* body = *find_op(r->graph, "Scan")->attr_graph("body");
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->inputs.size(), 2u);
  EXPECT_EQ(body->outputs.size(), 2u);
  EXPECT_TRUE(body->outer_refs.empty());
}

onnx::AttributeProto attr(const std::string& name, onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(type);
  return a;
}

onnx::TensorProto float_tensor(const std::string& name, std::vector<float> v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(static_cast<int64_t>(v.size()));
  for (float f : v) t.add_float_data(f);
  return t;
}

TEST(GraphConverterTest, AttributesOfEveryKind) {
  auto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 15, "com.test" : 1]>
g (float[2] X) => (float[2] Y)
{
  Y = com.test.Everything(X)
}
)");
  auto* n = m.mutable_graph()->mutable_node(0);
  using A = onnx::AttributeProto;
  auto f = attr("f", A::FLOAT);
  f.set_f(0.5f);
  auto i = attr("i", A::INT);
  i.set_i(-7);
  auto s = attr("s", A::STRING);
  s.set_s(std::string("bytes\0!", 7));
  auto t = attr("t", A::TENSOR);
  *t.mutable_t() = float_tensor("tv", {1, 2});
  auto g = attr("g", A::GRAPH);
  *g.mutable_g() = parse_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
sub () => (float[2] out) { out = Neg(X) }
)").graph();
  auto sp = attr("sp", A::SPARSE_TENSOR);
  sp.mutable_sparse_tensor()->add_dims(3);
  *sp.mutable_sparse_tensor()->mutable_values() = float_tensor("spv", {9});
  auto* idx = sp.mutable_sparse_tensor()->mutable_indices();
  idx->set_data_type(onnx::TensorProto::INT64);
  idx->add_dims(1);
  idx->add_int64_data(2);
  auto tp = attr("tp", A::TYPE_PROTO);
  tp.mutable_tp()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT32);
  auto fs = attr("fs", A::FLOATS);
  fs.add_floats(1.f);
  fs.add_floats(2.f);
  auto is = attr("is", A::INTS);
  is.add_ints(3);
  auto ss = attr("ss", A::STRINGS);
  ss.add_strings("a");
  ss.add_strings("b");
  auto ts = attr("ts", A::TENSORS);
  *ts.add_tensors() = float_tensor("t0", {1});
  *ts.add_tensors() = float_tensor("t1", {2, 3});
  auto gs = attr("gs", A::GRAPHS);
  *gs.add_graphs() = g.g();
  auto sps = attr("sps", A::SPARSE_TENSORS);
  *sps.add_sparse_tensors() = sp.sparse_tensor();
  auto tps = attr("tps", A::TYPE_PROTOS);
  *tps.add_type_protos() = tp.tp();
  tps.add_type_protos()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(7);
  auto untyped = attr("untyped", A::UNDEFINED);  // old models: type inferred from the field set
  untyped.add_ints(4);
  for (const auto& a : {f, i, s, t, g, sp, tp, fs, is, ss, ts, gs, sps, tps, untyped}) *n->add_attribute() = a;

  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Node& node = r->graph.nodes[0];
  EXPECT_EQ(node.domain, "com.test");
  EXPECT_EQ(*node.attr_float("f", 0), 0.5f);
  EXPECT_EQ(*node.attr_int("i", 0), -7);
  EXPECT_EQ(*node.attr_string("s", ""), std::string("bytes\0!", 7));
  ASSERT_NE(*node.attr_tensor("t"), nullptr);
  EXPECT_EQ((*node.attr_tensor("t"))->data<float>()[1], 2.f);
  const ir::Graph* sub = *node.attr_graph("g");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(outer_ref_names(*sub), (std::vector<std::string>{"X"}));
  // Sparse tensors arrive dense, as plain tensor attributes.
  const ir::Attribute* spa = node.find_attr("sp");
  ASSERT_NE(spa, nullptr);
  EXPECT_EQ(spa->type, ir::AttrType::kTensor);
  EXPECT_EQ(spa->t.shape(), (Shape{3}));
  EXPECT_EQ(spa->t.data<float>()[2], 9.f);
  EXPECT_EQ(spa->t.data<float>()[0], 0.f);
  EXPECT_EQ(node.find_attr("tp")->tp.to_string(), "int32[...]");
  EXPECT_EQ(*node.attr_floats("fs"), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(*node.attr_ints("is"), (std::vector<int64_t>{3}));
  EXPECT_EQ(*node.attr_strings("ss"), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(node.find_attr("ts")->tensors.size(), 2u);
  EXPECT_EQ(node.find_attr("ts")->tensors[1].numel(), 2);
  ASSERT_EQ(node.find_attr("gs")->graphs.size(), 1u);
  EXPECT_EQ(outer_ref_names(*node.find_attr("gs")->graphs[0]), (std::vector<std::string>{"X"}));
  EXPECT_EQ(node.find_attr("sps")->type, ir::AttrType::kTensors);
  EXPECT_EQ(node.find_attr("sps")->tensors[0].data<float>()[2], 9.f);
  ASSERT_EQ(node.find_attr("tps")->tps.size(), 2u);
  EXPECT_EQ(node.find_attr("tps")->tps[1].to_string(), "seq(int64[...])");
  EXPECT_EQ(node.find_attr("untyped")->type, ir::AttrType::kInts);
  EXPECT_EQ(*node.attr_ints("untyped"), (std::vector<int64_t>{4}));
}

TEST(GraphConverterTest, BadAttributesAreNamed) {
  auto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] X) => (float[2] Y)
{
  Y = Transpose <perm = [0]> (X)
}
)");
  *m.mutable_graph()->mutable_node(0)->add_attribute() = m.graph().node(0).attribute(0);
  auto twice = import_proto(m);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("node Transpose: attribute 'perm' is given twice"), std::string::npos)
      << twice.status().message();

  m.mutable_graph()->mutable_node(0)->mutable_attribute()->RemoveLast();
  auto* a = m.mutable_graph()->mutable_node(0)->mutable_attribute(0);
  a->Clear();
  a->set_name("perm");
  auto empty = import_proto(m);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("attribute 'perm': the attribute has neither a type nor a value"),
            std::string::npos)
      << empty.status().message();

  a->set_type(onnx::AttributeProto::GRAPH);
  auto no_graph = import_proto(m);
  ASSERT_FALSE(no_graph.ok());
  EXPECT_NE(no_graph.status().message().find("type GRAPH but no graph"), std::string::npos);

  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  t->add_float_data(1.f);
  auto bad_tensor = import_proto(m);
  ASSERT_FALSE(bad_tensor.ok());
  // The schema check names the mismatch before the tensor is even read.
  EXPECT_NE(bad_tensor.status().message().find("attribute 'perm' has type TENSOR, expected INTS"), std::string::npos)
      << bad_tensor.status().message();
}

TEST(GraphConverterTest, SparseInitializersBecomeDense) {
  auto m = parse_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[4] X) => (float[4] Y)
{
  Y = Add(X, S)
}
)");
  auto* sp = m.mutable_graph()->add_sparse_initializer();
  sp->add_dims(4);
  *sp->mutable_values() = float_tensor("S", {3, 4});
  auto* idx = sp->mutable_indices();
  idx->set_data_type(onnx::TensorProto::INT64);
  idx->add_dims(2);
  idx->add_int64_data(0);
  idx->add_int64_data(3);
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor* s = r->graph.initializer(r->graph.find_value("S"));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(std::vector<float>(s->data<float>(), s->data<float>() + 4), (std::vector<float>{3, 0, 0, 4}));
}

TEST(GraphConverterTest, TrailingOmittedInputsAndOutputsAreDropped) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2, 3] X) => (float[2, 3] Y)
{
  Y, , = Dropout(X, , )
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph.nodes[0].inputs.size(), 1u);
  EXPECT_EQ(r->graph.nodes[0].outputs.size(), 1u);
}

}  // namespace
}  // namespace kiln::importer
