// Inlining of model-local functions and of ONNX schema function bodies.
#include "onnx/function_inliner.h"

#include <gtest/gtest.h>

#include <set>

#include "onnx/test_util.h"

namespace kiln::importer {
namespace {

using testing::import_proto;
using testing::import_text;
using testing::parse_text;
using testing::value_named;

constexpr const char* kScaleModel = R"(
<ir_version: 8, opset_import: ["" : 15, "local" : 1]>
g (float[2] X) => (float[2] Y)
{
  Y = local.scale <alpha = 2.0> (X)
}
<domain: "local", opset_import: ["" : 13]>
scale <alpha, beta> (x) => (y)
{
  a = Constant <value_float: float = @alpha> ()
  t = Mul(x, a)
  y = LeakyRelu <alpha: float = @beta> (t)
}
)";

std::vector<std::string> ops(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Node& n : g.nodes) out.push_back(n.op_type);
  return out;
}

const ir::Node* find_op(const ir::Graph& g, const std::string& op) {
  for (const ir::Node& n : g.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

TEST(FunctionInlinerTest, InlinesAModelLocalFunctionWithAttributes) {
  auto r = import_text(kScaleModel);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph& g = r->graph;
  EXPECT_EQ(ops(g), (std::vector<std::string>{"Constant", "Mul", "LeakyRelu"}));
  // alpha came from the call; beta was neither given nor defaulted: absent.
  EXPECT_EQ(*find_op(g, "Constant")->attr_float("value_float", 0.f), 2.f);
  EXPECT_FALSE(find_op(g, "LeakyRelu")->has_attr("alpha"));
  // Formal parameters are bound to the call's names; body values renamed.
  EXPECT_EQ(g.value_name(find_op(g, "Mul")->inputs[0]), "X");
  EXPECT_EQ(g.value_name(find_op(g, "LeakyRelu")->outputs[0]), "Y");
  EXPECT_EQ(g.value_name(find_op(g, "Mul")->outputs[0]), "scale_0/t");
  EXPECT_EQ(find_op(g, "Mul")->name, "scale_0/Mul");
  // Body nodes keep the function's own opset import (13, not the model's 15).
  EXPECT_EQ(find_op(g, "Mul")->opset, 13);
  // Shape inference ran after inlining: body values are typed.
  EXPECT_EQ(value_named(g, "scale_0/t").type.to_string(), "float32[2]");
  // The function itself is listed with its body.
  ASSERT_EQ(r->functions.size(), 1u);
  const ir::Function& f = r->functions[0];
  EXPECT_EQ(f.name, "scale");
  EXPECT_EQ(f.domain, "local");
  EXPECT_EQ(f.attributes, (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(f.opsets.at(""), 13);
  ASSERT_TRUE(f.body);
  EXPECT_EQ(f.body->nodes.size(), 3u);
  EXPECT_EQ(f.body->nodes[0].find_attr("value_float")->ref_attr_name, "alpha");
  EXPECT_EQ(f.body->nodes[1].opset, 13);
}

TEST(FunctionInlinerTest, WithoutInliningTheCallStays) {
  ImportOptions opts;
  opts.inline_functions = false;
  auto r = import_text(kScaleModel, opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->graph.nodes.size(), 1u);
  EXPECT_EQ(r->graph.nodes[0].op_type, "scale");
  EXPECT_EQ(r->graph.nodes[0].domain, "local");
  EXPECT_EQ(r->graph.nodes[0].opset, 1);
  EXPECT_EQ(r->functions.size(), 1u);
}

// Appends FunctionProto.attribute_proto (field 11, IR version 9) entries,
// which ONNX 1.12's schema keeps as unknown fields.
void add_attribute_default(onnx::FunctionProto* f, const onnx::AttributeProto& a) {
  std::string bytes;
  a.SerializeToString(&bytes);
  f->mutable_unknown_fields()->AddLengthDelimited(11, bytes);
}

TEST(FunctionInlinerTest, AttributeDefaultsOfIrVersion9Apply) {
  auto m = parse_text(kScaleModel);
  onnx::AttributeProto beta;
  beta.set_name("beta");
  beta.set_type(onnx::AttributeProto::FLOAT);
  beta.set_f(0.25f);
  add_attribute_default(m.mutable_functions(0), beta);
  m.set_ir_version(9);
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*find_op(r->graph, "LeakyRelu")->attr_float("alpha", 0.f), 0.25f);
  ASSERT_EQ(r->functions[0].attribute_defaults.size(), 1u);
  EXPECT_EQ(r->functions[0].attribute_defaults[0].name, "beta");
  EXPECT_EQ(r->functions[0].attribute_defaults[0].f, 0.25f);

  // A value given by the caller wins over the default.
  auto* call = m.mutable_graph()->mutable_node(0);
  auto* b = call->add_attribute();
  b->set_name("beta");
  b->set_type(onnx::AttributeProto::FLOAT);
  b->set_f(0.75f);
  auto given = import_proto(m);
  ASSERT_TRUE(given.ok()) << given.status().to_string();
  EXPECT_EQ(*find_op(given->graph, "LeakyRelu")->attr_float("alpha", 0.f), 0.75f);
}

TEST(FunctionInlinerTest, AttributeOfTheWrongTypeIsNamed) {
  auto m = parse_text(kScaleModel);
  auto* a = m.mutable_graph()->mutable_node(0)->mutable_attribute(0);
  a->set_type(onnx::AttributeProto::INT);
  a->clear_f();
  a->set_i(2);
  auto r = import_proto(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("of type INT, but the body expects FLOAT"), std::string::npos)
      << r.status().message();
}

TEST(FunctionInlinerTest, EveryCallGetsItsOwnNames) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15, "local" : 1]>
g (float[2] X) => (float[2] Y)
{
  A = local.twice (X)
  Y = local.twice (A)
}
<domain: "local", opset_import: ["" : 15]>
twice (x) => (y)
{
  t = Add(x, x)
  y = Identity(t)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph& g = r->graph;
  ASSERT_EQ(g.nodes.size(), 4u);
  std::set<std::string> names;
  for (const ir::ValueInfo& v : g.values) EXPECT_TRUE(names.insert(v.name).second) << "duplicate " << v.name;
  EXPECT_NE(g.find_value("twice_0/t"), ir::kNoValue);
  EXPECT_NE(g.find_value("twice_1/t"), ir::kNoValue);
  EXPECT_EQ(g.value_name(g.nodes[3].outputs[0]), "Y");
}

TEST(FunctionInlinerTest, CallsInsideBodiesAndSubgraphsAreExpanded) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15, "local" : 1]>
g (float[2] X, bool c) => (float[2] Y)
{
  Y = If (c) <then_branch = then_g () => (float[2] a) { a = local.outer (X) },
              else_branch = else_g () => (float[2] b) { b = Neg(X) }>
}
<domain: "local", opset_import: ["" : 15, "local" : 1]>
outer (x) => (y)
{
  t = local.inner (x)
  y = Abs(t)
}
<domain: "local", opset_import: ["" : 15]>
inner (x) => (y)
{
  y = Neg(x)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph* then_g = *find_op(r->graph, "If")->attr_graph("then_branch");
  ASSERT_NE(then_g, nullptr);
  EXPECT_EQ(ops(*then_g), (std::vector<std::string>{"Neg", "Abs"}));
  EXPECT_EQ(then_g->value_name(then_g->nodes[0].inputs[0]), "X");
  ASSERT_EQ(then_g->outer_refs.size(), 1u);
}

TEST(FunctionInlinerTest, SubgraphsInsideABodyAreRenamedAndBound) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15, "local" : 1]>
g (float[2] X, bool c) => (float[2] Y)
{
  Y = local.pick (c, X)
}
<domain: "local", opset_import: ["" : 15]>
pick (cond, x) => (y)
{
  n = Neg(x)
  y = If (cond) <then_branch = then_g () => (float[2] a) { a = Abs(n) },
                 else_branch = else_g () => (float[2] b) { b = Identity(x) }>
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Node* if_node = find_op(r->graph, "If");
  ASSERT_NE(if_node, nullptr);
  const ir::Graph* then_g = *if_node->attr_graph("then_branch");
  const ir::Graph* else_g = *if_node->attr_graph("else_branch");
  ASSERT_EQ(then_g->outer_refs.size(), 1u);
  EXPECT_EQ(then_g->value_name(then_g->outer_refs[0]), "pick_0/n");
  ASSERT_EQ(else_g->outer_refs.size(), 1u);
  EXPECT_EQ(else_g->value_name(else_g->outer_refs[0]), "X");
  EXPECT_EQ(then_g->value_name(then_g->outputs[0]), "pick_0/a");
}

TEST(FunctionInlinerTest, OmittedInputsAndUnusedOutputs) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15, "local" : 1]>
g (float[2] X) => (float[2] Y)
{
  Y = local.clip (X)
}
<domain: "local", opset_import: ["" : 15]>
clip (x, lo, hi) => (y, z)
{
  y = Clip(x, lo, hi)
  z = Neg(x)
}
)");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Node* clip = find_op(r->graph, "Clip");
  ASSERT_NE(clip, nullptr);
  EXPECT_EQ(clip->inputs.size(), 1u);  // lo and hi were not passed
  const ir::Node* neg = find_op(r->graph, "Neg");
  EXPECT_EQ(r->graph.value_name(neg->outputs[0]), "clip_0/z");
}

TEST(FunctionInlinerTest, RecursionIsAnError) {
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15, "local" : 1]>
g (float[2] X) => (float[2] Y)
{
  Y = local.forever (X)
}
<domain: "local", opset_import: ["" : 15, "local" : 1]>
forever (x) => (y)
{
  y = local.forever (x)
}
)");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("functions must not be recursive"), std::string::npos) << r.status().message();
}

TEST(FunctionInlinerTest, BodyReadingAnUndefinedNameIsNamed) {
  ImportOptions no_inline;
  no_inline.inline_functions = false;
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 15, "local" : 1]>
g (float[2] X) => (float[2] Y)
{
  Y = local.bad (X)
}
<domain: "local", opset_import: ["" : 15]>
bad (x) => (y)
{
  y = Add(x, stranger)
}
)";
  auto r = import_text(text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reads 'stranger', which is neither a function input nor an output"),
            std::string::npos)
      << r.status().message();
  // Not inlined, the function body is still checked when it is converted.
  auto kept = import_text(text, no_inline);
  ASSERT_FALSE(kept.ok());
  EXPECT_NE(kept.status().message().find("function 'local.bad'"), std::string::npos) << kept.status().message();
}

TEST(FunctionInlinerTest, OverloadsOfIrVersion10AreToldApart) {
  // Two functions share domain and name and differ by `overload` (FunctionProto
  // field 13); a call picks one with NodeProto field 8.
  auto m = parse_text(R"(
<ir_version: 10, opset_import: ["" : 15, "local" : 1]>
g (float[2] X) => (float[2] Y, float[2] Z)
{
  Y = local.f (X)
  Z = local.f (X)
}
<domain: "local", opset_import: ["" : 15]>
f (x) => (y)
{
  y = Neg(x)
}
<domain: "local", opset_import: ["" : 15]>
f (x) => (y)
{
  y = Abs(x)
}
)");
  m.mutable_functions(0)->mutable_unknown_fields()->AddLengthDelimited(13, "neg");
  m.mutable_functions(1)->mutable_unknown_fields()->AddLengthDelimited(13, "abs");
  m.mutable_graph()->mutable_node(0)->mutable_unknown_fields()->AddLengthDelimited(8, "abs");
  m.mutable_graph()->mutable_node(1)->mutable_unknown_fields()->AddLengthDelimited(8, "neg");
  auto r = import_proto(m);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph& g = r->graph;
  EXPECT_EQ(g.value_name(find_op(g, "Abs")->outputs[0]), "Y");
  EXPECT_EQ(g.value_name(find_op(g, "Neg")->outputs[0]), "Z");
}

TEST(FunctionInlinerTest, DuplicateFunctionIsNamed) {
  auto m = parse_text(kScaleModel);
  *m.add_functions() = m.functions(0);
  auto r = import_proto(m);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'local.scale' is defined twice"), std::string::npos);
}

constexpr const char* kMvnModel = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1, 2, 3, 3] X) => (float[1, 2, 3, 3] Y)
{
  Y = MeanVarianceNormalization(X)
}
)";

TEST(FunctionInlinerTest, SchemaFunctionIsInlinedOnlyWithoutAKernel) {
  ImportOptions opts;
  std::vector<std::string> asked;
  opts.has_kernel = [&](const std::string& domain, const std::string& op, int opset) {
    asked.push_back((domain.empty() ? std::string("ai.onnx") : domain) + ":" + op + ":" + std::to_string(opset));
    return op != "MeanVarianceNormalization";
  };
  auto r = import_text(kMvnModel, opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(find_op(r->graph, "MeanVarianceNormalization"), nullptr);
  const ir::Node* mean = find_op(r->graph, "ReduceMean");
  ASSERT_NE(mean, nullptr);
  // axes was not given: the schema's default [0, 2, 3] applies.
  EXPECT_EQ(*mean->attr_ints("axes"), (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(mean->opset, 13);
  EXPECT_NE(std::find(asked.begin(), asked.end(), "ai.onnx:MeanVarianceNormalization:13"), asked.end());
  // The body's values were typed by shape inference after inlining.
  EXPECT_EQ(r->graph.value(mean->outputs[0]).type.to_string(), "float32[1, 2, 1, 1]");

  opts.has_kernel = [](const std::string&, const std::string&, int) { return true; };
  auto kept = import_text(kMvnModel, opts);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(ops(kept->graph), (std::vector<std::string>{"MeanVarianceNormalization"}));
}

TEST(FunctionInlinerTest, ContextDependentBodiesUseInputTypes) {
  // CastLike's body is a Cast to the type of its second input, which only the
  // value types can tell; Celu's body casts alpha to the input type.
  ImportOptions opts;
  opts.has_kernel = [](const std::string&, const std::string& op, int) { return op != "CastLike" && op != "Celu"; };
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[3] X, double[1] L) => (double[3] Y, float[3] Z)
{
  Y = CastLike(X, L)
  Z = Celu <alpha = 2.0> (X)
}
)",
                       opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(find_op(r->graph, "CastLike"), nullptr);
  EXPECT_EQ(find_op(r->graph, "Celu"), nullptr);
  const ir::Node* cast = find_op(r->graph, "Cast");
  ASSERT_NE(cast, nullptr);
  EXPECT_EQ(*cast->attr_int("to", 0), static_cast<int64_t>(DType::kFloat64));
  EXPECT_NE(find_op(r->graph, "Elu"), nullptr);
}

TEST(FunctionInlinerTest, SchemaBodyNodesKeepTheSchemaOpset) {
  // Range-11's body is written against opset 11; the model imports 15.
  ImportOptions opts;
  opts.has_kernel = [](const std::string&, const std::string& op, int) { return op != "Range"; };
  auto r = import_text(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float start, float limit, float delta) => (float[?] Y)
{
  Y = Range(start, limit, delta)
}
)",
                       opts);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(find_op(r->graph, "Range"), nullptr);
  const ir::Node* loop = find_op(r->graph, "Loop");
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->opset, 11);
}

}  // namespace
}  // namespace kiln::importer
