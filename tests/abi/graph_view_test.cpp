// The graph view through the C accessors: nodes in order, values with
// dtypes and symbolic shapes, zero-copy constants, producers/consumers,
// attributes of every type, subgraphs, and what lies outside the view.
#include <gtest/gtest.h>

#include "abi_test_util.h"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/host.h"

namespace kiln::abi_test {
namespace {

const kiln_host_api_t& api() { return *runtime::host_api(); }

ir::Attribute attr(const char* name, ir::AttrType t) {
  ir::Attribute a;
  a.name = name;
  a.type = t;
  return a;
}

std::shared_ptr<ir::Graph> graph_with_everything() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 3});
  ir::ValueId c = b.constant("c", Tensor::from_vector<float>({1, 2, 3}));
  std::vector<ir::Attribute> attrs;
  auto a = attr("i", ir::AttrType::kInt);
  a.i = 7;
  attrs.push_back(a);
  a = attr("f", ir::AttrType::kFloat);
  a.f = 0.5f;
  attrs.push_back(a);
  a = attr("s", ir::AttrType::kString);
  a.s = std::string("ab\0c", 4);
  attrs.push_back(a);
  a = attr("ints", ir::AttrType::kInts);
  a.ints = {1, 2, 3};
  attrs.push_back(a);
  a = attr("floats", ir::AttrType::kFloats);
  a.floats = {1.5f};
  attrs.push_back(a);
  a = attr("strings", ir::AttrType::kStrings);
  a.strings = {"u", "vw"};
  attrs.push_back(a);
  a = attr("t", ir::AttrType::kTensor);
  a.t = Tensor::from_vector<int64_t>({4, 5});
  attrs.push_back(a);
  a = attr("tensors", ir::AttrType::kTensors);
  a.tensors = {Tensor::from_vector<float>({9}), Tensor::from_vector<std::string>({"no"})};
  attrs.push_back(a);
  a = attr("g", ir::AttrType::kGraph);
  auto sub = std::make_shared<ir::Graph>();
  sub->name = "body";
  ir::ValueId outer = sub->add_value("a_out", ir::ValueType::tensor(DType::kFloat32, {}));
  sub->outer_refs = {outer};
  ir::ValueId so = sub->add_value("so", ir::ValueType::tensor(DType::kFloat32, {}));
  ir::Node sn;
  sn.op_type = "Neg";
  sn.inputs = {outer};
  sn.outputs = {so};
  sub->nodes.push_back(sn);
  sub->outputs = {so};
  a.g = sub;
  attrs.push_back(a);
  a = attr("tp", ir::AttrType::kTypeProto);
  a.tp = ir::ValueType::tensor(DType::kInt8, {ir::Dim{-1, "batch"}, ir::Dim{4, {}}});
  attrs.push_back(a);
  ir::ValueId ao = b.node("Add", {x, c}, "a", {2, 3});
  ir::ValueId r = b.node("Weird", {ao, ir::kNoValue}, "w", {2, 3}, DType::kFloat32, "com.example", attrs);
  ir::ValueId m = b.node("Mul", {ao, r}, "m", {2, 3});
  b.output(m);
  auto g = b.graph();
  g->value(x).type.dims[0] = ir::Dim{-1, "N"};
  return g;
}

TEST(GraphViewTest, NodesValuesAndConstants) {
  auto g = graph_with_everything();
  std::vector<int32_t> offered{0, 1, 2};
  auto v = runtime::make_graph_view(*g, nullptr, offered, {});
  ASSERT_EQ(api().graph_num_nodes(v.get()), 3u);
  EXPECT_EQ(api().graph_node(v.get(), 3), nullptr);
  const kiln_node_t* add = api().graph_node(v.get(), 0);
  EXPECT_STREQ(api().node_op_type(add), "Add");
  EXPECT_STREQ(api().node_name(add), "a");
  EXPECT_STREQ(api().node_domain(add), "");
  EXPECT_EQ(api().node_opset(add), 17);
  EXPECT_EQ(api().node_index(add), 0u);
  EXPECT_EQ(api().graph_opset(v.get(), "ai.onnx"), 17);
  EXPECT_EQ(api().graph_opset(v.get(), "nowhere"), 0);

  const kiln_value_t* x = api().node_input(add, 0);
  EXPECT_STREQ(api().value_name(x), "x");
  EXPECT_TRUE(api().value_is_graph_input(x));
  EXPECT_EQ(api().value_kind(x), KILN_VALUE_TENSOR);
  EXPECT_EQ(api().value_dtype(x), KILN_DTYPE_FLOAT32);
  EXPECT_EQ(api().value_rank(x), 2);
  const char* sym = nullptr;
  EXPECT_EQ(api().value_dim(x, 0, &sym), -1);
  EXPECT_STREQ(sym, "N");
  EXPECT_EQ(api().value_dim(x, 1, &sym), 3);
  EXPECT_EQ(api().value_dim(x, 5, &sym), -1);
  EXPECT_EQ(api().graph_find_value(v.get(), "x"), x);
  EXPECT_EQ(api().graph_find_value(v.get(), "nope"), nullptr);

  const kiln_value_t* c = api().node_input(add, 1);
  EXPECT_TRUE(api().value_is_constant(c));
  kiln_tensor_t t{};
  t.struct_size = sizeof(t);
  ASSERT_EQ(api().value_constant(c, &t), nullptr);
  EXPECT_EQ(t.data, g->initializer(g->find_value("c"))->raw_data());  // zero-copy
  EXPECT_EQ(t.nbytes, 12u);
  EXPECT_FALSE(runtime::take_status(api().value_constant(x, &t)).is_ok());

  const kiln_value_t* ao = api().node_output(add, 0);
  EXPECT_EQ(api().value_producer(ao), add);
  ASSERT_EQ(api().value_num_consumers(ao), 2u);  // Weird, Mul (and Weird's subgraph read counts once)
  EXPECT_STREQ(api().node_op_type(api().value_consumer(ao, 1)), "Mul");
  EXPECT_FALSE(api().value_has_outside_consumers(ao));

  const kiln_node_t* weird = api().graph_node(v.get(), 1);
  EXPECT_EQ(api().node_num_inputs(weird), 2u);
  EXPECT_EQ(api().node_input(weird, 1), nullptr);  // omitted optional input
  EXPECT_STREQ(api().node_domain(weird), "com.example");
  EXPECT_TRUE(api().value_is_graph_output(api().node_output(api().graph_node(v.get(), 2), 0)));
}

TEST(GraphViewTest, AttributesOfEveryType) {
  auto g = graph_with_everything();
  std::vector<int32_t> offered{0, 1, 2};
  auto v = runtime::make_graph_view(*g, nullptr, offered, {});
  const kiln_node_t* n = api().graph_node(v.get(), 1);
  ASSERT_EQ(api().node_num_attributes(n), 10u);
  EXPECT_EQ(api().node_find_attribute(n, "zzz"), nullptr);
  auto find = [&](const char* name) { return api().node_find_attribute(n, name); };
  EXPECT_EQ(api().attribute_type(find("i")), KILN_ATTR_INT);
  EXPECT_EQ(api().attribute_int(find("i")), 7);
  EXPECT_EQ(api().attribute_int(find("f")), 0);  // wrong type: 0
  EXPECT_FLOAT_EQ(api().attribute_float(find("f")), 0.5f);
  size_t len = 0;
  const char* s = api().attribute_string(find("s"), 0, &len);
  ASSERT_EQ(len, 4u);
  EXPECT_EQ(std::string(s, len), std::string("ab\0c", 4));
  EXPECT_EQ(api().attribute_string(find("s"), 1, &len), nullptr);
  size_t count = 0;
  const int64_t* ints = api().attribute_ints(find("ints"), &count);
  ASSERT_EQ(count, 3u);
  EXPECT_EQ(ints[2], 3);
  EXPECT_EQ(api().attribute_count(find("ints")), 3u);
  EXPECT_EQ(api().attribute_floats(find("floats"), &count)[0], 1.5f);
  EXPECT_STREQ(api().attribute_string(find("strings"), 1, &len), "vw");
  kiln_tensor_t t{};
  t.struct_size = sizeof(t);
  ASSERT_EQ(api().attribute_tensor(find("t"), 0, &t), nullptr);
  EXPECT_EQ(t.dtype, KILN_DTYPE_INT64);
  EXPECT_EQ(static_cast<const int64_t*>(t.data)[1], 5);
  ASSERT_EQ(api().attribute_tensor(find("tensors"), 0, &t), nullptr);
  EXPECT_EQ(static_cast<const float*>(t.data)[0], 9.f);
  EXPECT_NE(runtime::take_status(api().attribute_tensor(find("tensors"), 1, &t)).message().find("string"),
            std::string::npos);
  EXPECT_FALSE(runtime::take_status(api().attribute_tensor(find("i"), 0, &t)).is_ok());

  const kiln_graph_t* sub = api().attribute_graph(find("g"), 0);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(api().attribute_graph(find("g"), 0), sub);  // built once
  EXPECT_STREQ(api().graph_name(sub), "body");
  ASSERT_EQ(api().graph_num_nodes(sub), 1u);
  EXPECT_STREQ(api().node_op_type(api().graph_node(sub, 0)), "Neg");
  EXPECT_EQ(api().attribute_graph(find("i"), 0), nullptr);

  const kiln_value_t* tp = api().attribute_type_proto(find("tp"), 0);
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(api().value_dtype(tp), KILN_DTYPE_INT8);
  EXPECT_EQ(api().value_rank(tp), 2);
  const char* sym = nullptr;
  EXPECT_EQ(api().value_dim(tp, 0, &sym), -1);
  EXPECT_STREQ(sym, "batch");
  EXPECT_EQ(api().value_producer(tp), nullptr);
}

TEST(GraphViewTest, NodesOutsideTheViewAreHidden) {
  auto g = graph_with_everything();
  // Offer Add and Mul; Weird is claimed elsewhere (a hidden reader).
  std::vector<int32_t> offered{0, 2}, hidden{1};
  auto v = runtime::make_graph_view(*g, nullptr, offered, hidden);
  ASSERT_EQ(api().graph_num_nodes(v.get()), 2u);
  const kiln_node_t* mul = api().graph_node(v.get(), 1);
  EXPECT_EQ(api().node_index(mul), 1u);
  const kiln_value_t* weird_out = api().node_input(mul, 1);
  EXPECT_EQ(api().value_producer(weird_out), nullptr);  // produced outside the view
  const kiln_value_t* ao = api().node_output(api().graph_node(v.get(), 0), 0);
  EXPECT_EQ(api().value_num_consumers(ao), 1u);
  EXPECT_TRUE(api().value_has_outside_consumers(ao));  // Weird and its subgraph read it
}

// Sparse attributes are held dense; the view says TENSOR(S), as backend.h states.
TEST(GraphViewTest, SparseAttributesReadAsDenseTensors) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2});
  auto sparse = attr("st", ir::AttrType::kSparseTensor);
  sparse.t = Tensor::from_vector<float>({0, 3, 0});
  auto sparses = attr("sts", ir::AttrType::kSparseTensors);
  sparses.tensors = {Tensor::from_vector<float>({0, 0, 5})};
  b.output(b.node("Weird", {x}, "w", {2}, DType::kFloat32, "com.example", {sparse, sparses}));
  auto g = b.graph();
  std::vector<int32_t> offered{0};
  auto v = runtime::make_graph_view(*g, nullptr, offered, {});
  const kiln_node_t* n = api().graph_node(v.get(), 0);
  const kiln_attribute_t* st = api().node_find_attribute(n, "st");
  const kiln_attribute_t* sts = api().node_find_attribute(n, "sts");
  EXPECT_EQ(api().attribute_type(st), KILN_ATTR_TENSOR);
  EXPECT_EQ(api().attribute_type(sts), KILN_ATTR_TENSORS);
  EXPECT_EQ(api().attribute_count(sts), 1u);
  kiln_tensor_t t{};
  t.struct_size = sizeof(t);
  ASSERT_EQ(api().attribute_tensor(st, 0, &t), nullptr);
  ASSERT_EQ(t.nbytes, 12u);
  EXPECT_EQ(static_cast<const float*>(t.data)[1], 3.f);
  ASSERT_EQ(api().attribute_tensor(sts, 0, &t), nullptr);
  EXPECT_EQ(static_cast<const float*>(t.data)[2], 5.f);
}

// A subgraph reading the enclosing graph's constants by name (an initializer
// and a value the host folded) sees them as constants, with the host's data.
TEST(GraphViewTest, SubgraphsSeeTheHostsConstants) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {3});
  ir::ValueId c = b.constant("c", Tensor::from_vector<float>({1, 2, 3}));
  ir::ValueId folded = b.node("Neg", {c}, "f", {3});  // folded by the host: in `constants`, not an initializer
  auto body = std::make_shared<ir::Graph>();
  body->name = "body";
  ir::ValueId bc = body->add_value("c", ir::ValueType::tensor(DType::kFloat32, {}));
  ir::ValueId bf = body->add_value("f_out", ir::ValueType::tensor(DType::kFloat32, {}));
  ir::ValueId bx = body->add_value("x", ir::ValueType::tensor(DType::kFloat32, {}));
  body->outer_refs = {bc, bf, bx};
  ir::ValueId s1 = body->add_value("s1", ir::ValueType::tensor(DType::kFloat32, {}));
  ir::ValueId s2 = body->add_value("s2", ir::ValueType::tensor(DType::kFloat32, {}));
  ir::Node add1, add2;
  add1.op_type = add2.op_type = "Add";
  add1.inputs = {bx, bc};
  add1.outputs = {s1};
  add2.inputs = {s1, bf};
  add2.outputs = {s2};
  body->nodes = {add1, add2};
  body->outputs = {s2};
  auto g_attr = attr("body", ir::AttrType::kGraph);
  g_attr.g = body;
  b.output(b.node("Weird", {x, folded}, "w", {3}, DType::kFloat32, "com.example", {g_attr}));
  auto g = b.graph();
  std::unordered_map<ir::ValueId, Tensor> constants;
  constants.emplace(c, Tensor::from_vector<float>({1, 2, 3}));
  constants.emplace(folded, Tensor::from_vector<float>({-1, -2, -3}));
  std::vector<int32_t> offered{1};  // Neg was folded away
  auto v = runtime::make_graph_view(*g, &constants, offered, {});
  const kiln_graph_t* sub = api().attribute_graph(api().node_find_attribute(api().graph_node(v.get(), 0), "body"), 0);
  ASSERT_NE(sub, nullptr);
  const kiln_value_t* sc = api().graph_find_value(sub, "c");
  const kiln_value_t* sf = api().graph_find_value(sub, "f_out");
  EXPECT_TRUE(api().value_is_constant(sc));
  EXPECT_TRUE(api().value_is_constant(sf));
  EXPECT_FALSE(api().value_is_constant(api().graph_find_value(sub, "x")));
  kiln_tensor_t t{};
  t.struct_size = sizeof(t);
  ASSERT_EQ(api().value_constant(sf, &t), nullptr);
  EXPECT_EQ(t.data, constants.at(folded).raw_data());  // the host's data, zero-copy
  EXPECT_EQ(api().value_dtype(sf), KILN_DTYPE_FLOAT32);
  EXPECT_EQ(api().value_rank(sf), 1);
}

TEST(GraphViewTest, NullHandlesAreHarmless) {
  EXPECT_EQ(api().graph_num_nodes(nullptr), 0u);
  EXPECT_EQ(api().graph_node(nullptr, 0), nullptr);
  EXPECT_STREQ(api().node_op_type(nullptr), "");
  EXPECT_EQ(api().value_rank(nullptr), -1);
  EXPECT_EQ(api().value_dtype(nullptr), KILN_DTYPE_UNDEFINED);
  EXPECT_EQ(api().attribute_count(nullptr), 0u);
  EXPECT_EQ(api().attribute_graph(nullptr, 0), nullptr);
  EXPECT_FALSE(runtime::take_status(api().value_constant(nullptr, nullptr)).is_ok());
}

}  // namespace
}  // namespace kiln::abi_test
