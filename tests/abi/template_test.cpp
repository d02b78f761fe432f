// The template plugin against portable kernels: broadcasting Add/Mul,
// MatMul shapes (1-D, batched, broadcast batches), Relu edge values, the
// MulAdd custom op, export/import of compiled partitions, properties.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "abi_test_util.h"
#include "runtime/backends/partition_kernel.h"

namespace kiln::abi_test {
namespace {

std::shared_ptr<BackendRegistry> reg() {
  static std::shared_ptr<BackendRegistry> r = registry_of({template_plugin()});
  return r;
}

// One node `op` over inputs of the given shapes; the template must claim it
// (fallback require) and match portable kernels.
void expect_matches_portable(const std::string& op, std::vector<std::vector<int64_t>> shapes,
                             std::vector<int64_t> out, uint32_t seed = 1) {
  GraphBuilder b;
  std::vector<ir::ValueId> ins;
  std::vector<Value> values;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ins.push_back(b.input("in" + std::to_string(i), shapes[i]));
    values.emplace_back(random_tensor(shapes[i], seed + static_cast<uint32_t>(i)));
  }
  b.output(b.node(op, ins, "n", out));
  SCOPED_TRACE(op + " " + std::to_string(shapes.size()) + " inputs, first rank " + std::to_string(shapes[0].size()));
  auto t = build(b.graph(), reg().get(), {"template"}, {}, FallbackPolicy::kRequire);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  auto p = build(b.graph(), nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto a = (*t)->run(values, {}, nullptr);
  auto c = (*p)->run(values, {}, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  expect_close(a.value()[0].tensor(), c.value()[0].tensor(), 1e-5f);
}

TEST(TemplateTest, AddAndMulBroadcastLikeNumpy) {
  const std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}, {2, 3, 4}},       {{2, 3, 4}, {3, 1}, {2, 3, 4}},
      {{1, 3, 1}, {2, 1, 5}, {2, 3, 5}}, {{}, {2, 2}, {2, 2}},              {{5}, {1}, {5}},
      {{2, 1, 4}, {1, 3, 1}, {2, 3, 4}}, {{1, 64, 7, 7}, {64, 1, 1}, {1, 64, 7, 7}},
      {{0, 3}, {3}, {0, 3}},             {{3, 1, 2, 1}, {1, 4, 1, 5}, {3, 4, 2, 5}}};
  for (const char* op : {"Add", "Mul"})
    for (const auto& [a, b, out] : cases) expect_matches_portable(op, {a, b}, out);
}

TEST(TemplateTest, MatMulFollowsNumpySemantics) {
  expect_matches_portable("MatMul", {{3}, {3}}, {});
  expect_matches_portable("MatMul", {{3}, {3, 4}}, {4});
  expect_matches_portable("MatMul", {{2, 3}, {3}}, {2});
  expect_matches_portable("MatMul", {{2, 3}, {3, 4}}, {2, 4});
  expect_matches_portable("MatMul", {{2, 5, 3}, {3, 4}}, {2, 5, 4});
  expect_matches_portable("MatMul", {{5, 2, 3}, {5, 3, 4}}, {5, 2, 4});
  expect_matches_portable("MatMul", {{2, 1, 3, 4}, {3, 4, 2}}, {2, 3, 3, 2});
  expect_matches_portable("MatMul", {{1, 3}, {2, 3, 6}}, {2, 1, 6});
  expect_matches_portable("MatMul", {{0, 3}, {3, 4}}, {0, 4});
  expect_matches_portable("MatMul", {{33, 65}, {65, 17}}, {33, 17});
}

TEST(TemplateTest, ReluKeepsNaNAndZeroes) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {5});
  b.output(b.node("Relu", {x}, "r", {5}));
  auto t = build(b.graph(), reg().get(), {"template"}, {}, FallbackPolicy::kRequire);
  ASSERT_TRUE(t.ok());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Value> in{Value(Tensor::from_vector<float>({-1.f, 0.f, 2.5f, -INFINITY, nan}))};
  auto out = (*t)->run(in, {}, nullptr);
  ASSERT_TRUE(out.ok());
  const float* y = out.value()[0].tensor().data<float>();
  EXPECT_EQ(y[0], 0.f);
  EXPECT_EQ(y[1], 0.f);
  EXPECT_EQ(y[2], 2.5f);
  EXPECT_EQ(y[3], 0.f);
  EXPECT_TRUE(std::isnan(y[4]));
}

TEST(TemplateTest, DeclinesWhatItCannotRunWithReasons) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4}, DType::kInt64);
  ir::ValueId f = b.input("f", {4});
  ir::ValueId a = b.node("Add", {x, x}, "int_add", {4}, DType::kInt64);
  ir::ValueId s = b.node("Sigmoid", {f}, "sig", {4});
  b.output(a);
  b.output(s);
  auto g = b.graph();
  g->nodes[0].opset = 6;  // an Add older than numpy broadcasting
  auto t = build(g, reg().get(), {"template"});
  ASSERT_TRUE(t.ok());
  const auto& nodes = (*t)->placement().nodes;
  EXPECT_EQ(nodes[0].reasons.at(0).second, "Add at opset 6 is older than the template supports (7)");
  g->nodes[0].opset = 13;
  auto t2 = build(g, reg().get(), {"template"});
  EXPECT_EQ((*t2)->placement().nodes[0].reasons.at(0).second, "input 'x' is int64; the template runs float32 only");
  EXPECT_EQ((*t2)->placement().nodes[1].reasons.at(0).second, "op Sigmoid is not one of Add, Mul, Relu, MatMul");
}

TEST(TemplateTest, ExportImportRoundTripsAndRejectsCorruptBlobs) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {3, 4});
  ir::ValueId w = b.constant("w", random_tensor({4, 2}, 3));
  ir::ValueId m = b.node("MatMul", {x, w}, "mm", {3, 2});
  b.output(b.node("Relu", {m}, "r", {3, 2}));
  auto t = build(b.graph(), reg().get(), {"template"}, {}, FallbackPolicy::kRequire);
  ASSERT_TRUE(t.ok());
  const runtime::PartitionKernel* pk = nullptr;
  for (const runtime::Step& s : (*t)->steps()) pk = dynamic_cast<const runtime::PartitionKernel*>(s.kernel.get());
  ASSERT_NE(pk, nullptr);
  const runtime::CompiledPartition& cp = pk->compiled();
  EXPECT_EQ(cp.concurrency(), KILN_CONCURRENCY_REENTRANT);
  EXPECT_EQ(cp.num_inputs(), 1);
  EXPECT_EQ(cp.num_outputs(), 1);
  auto bytes = cp.export_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  runtime::LoadedPlugin& plugin = cp.instance().plugin();
  EXPECT_TRUE(plugin.check_compiled(bytes->data(), bytes->size()).is_ok());
  auto imported = cp.instance().import_compiled(bytes->data(), bytes->size());
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  auto again = (*imported)->export_bytes();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes);  // same program, same bytes

  std::vector<uint8_t> flipped = *bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  EXPECT_NE(plugin.check_compiled(flipped.data(), flipped.size()).message().find("checksum"), std::string::npos);
  std::vector<uint8_t> newer = *bytes;
  newer[4] = 9;  // format version 9
  EXPECT_FALSE(plugin.check_compiled(newer.data(), newer.size()).is_ok());
  EXPECT_FALSE(cp.instance().import_compiled(bytes->data(), bytes->size() - 1).ok());
  EXPECT_FALSE(cp.instance().import_compiled(nullptr, 0).ok());
}

TEST(TemplateTest, PropertiesAreCheckedAndFailedSetsChangeNothing) {
  auto plugin = kiln::runtime::registry_impl(*reg()).all().at(0);
  auto inst = plugin->create_instance(0, {{"max_group_size", "3"}});
  ASSERT_TRUE(inst.ok());
  EXPECT_EQ(*(*inst)->get_property("max_group_size"), "3");
  EXPECT_FALSE((*inst)->set_property("max_group_size", "-1").is_ok());
  EXPECT_EQ(*(*inst)->get_property("max_group_size"), "3");
  EXPECT_TRUE((*inst)->set_property("verbose", "true").is_ok());
  EXPECT_EQ(*(*inst)->get_property("verbose"), "true");
  EXPECT_NE((*inst)->get_property("colour").status().message().find("unknown option 'colour'"), std::string::npos);
}

TEST(TemplateTest, MulAddBroadcasts) {
  expect_matches_portable("Mul", {{2, 3}, {3}}, {2, 3});  // sanity of the reference below
  GraphBuilder b;
  ir::ValueId a = b.input("a", {2, 3});
  ir::ValueId m = b.input("m", {3});
  ir::ValueId c = b.input("c", {2, 1});
  b.output(b.node("MulAdd", {a, m, c}, "fma", {2, 3}, DType::kFloat32, "kiln.template"));
  auto t = build(b.graph(), reg().get(), {"template"}, {}, FallbackPolicy::kRequire);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  std::vector<Value> in{Value(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3})),
                        Value(Tensor::from_vector<float>({10, 100, 1000})),
                        Value(Tensor::from_vector<float>({0.5f, -0.5f}, Shape{2, 1}))};
  auto out = (*t)->run(in, {}, nullptr);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const float want[] = {10.5f, 200.5f, 3000.5f, 39.5f, 499.5f, 5999.5f};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out.value()[0].tensor().data<float>()[i], want[i]);
}

}  // namespace
}  // namespace kiln::abi_test
