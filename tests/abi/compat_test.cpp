// Minor versions work both ways: a plugin binary built against the 1.0
// headers (tests/abi/v1_0/, frozen) loads on this host, is read through its
// 1.0-sized table, and runs partitions exactly like the current template.
// (abi.check_backend.v1_0 runs the whole conformance kit on the same binary.)
#include <gtest/gtest.h>

#include "abi_test_util.h"

namespace kiln::abi_test {
namespace {

// The size of kiln_backend_api_t in 1.0: its last 1.0 member ends here.
constexpr size_t kTable10Size = offsetof(kiln_backend_api_t, plugin_get_custom_op_info) + sizeof(void*);

TEST(CompatTest, APluginBuiltAgainstTheFrozen10HeaderLoadsAndRuns) {
  auto reg = registry_of({KILN_TEMPLATE_V1_0_PLUGIN});
  ASSERT_TRUE(reg->errors().empty()) << reg->errors().at(0).message;
  auto plugins = runtime::registry_impl(*reg).all();
  ASSERT_EQ(plugins.size(), 1u);
  const runtime::LoadedPlugin& p = *plugins[0];
  EXPECT_EQ(p.info().abi_version, "1.0");
  EXPECT_EQ(p.declared_table_size(), kTable10Size);
  EXPECT_LE(kTable10Size, sizeof(kiln_backend_api_t));
  EXPECT_TRUE(p.available());
  EXPECT_TRUE(p.info().supports_export);
  // Device members appended in 1.1 read as zero from a 1.0 plugin: unknown.
  ASSERT_EQ(p.info().devices.size(), 1u);
  EXPECT_EQ(p.info().devices[0].vendor_id, 0u);
  EXPECT_EQ(p.info().devices[0].uuid, "");
  EXPECT_EQ(p.info().devices[0].driver_version, "");
  EXPECT_FALSE(p.info().no_unload);

  // MatMul -> Add -> Relu through the 1.0 binary, against portable kernels.
  GraphBuilder b;
  ir::ValueId x = b.input("x", {3, 4});
  ir::ValueId w = b.constant("w", random_tensor({4, 5}, 7));
  ir::ValueId c = b.constant("c", random_tensor({5}, 8));
  ir::ValueId m = b.node("MatMul", {x, w}, "m", {3, 5});
  ir::ValueId a = b.node("Add", {m, c}, "a", {3, 5});
  b.output(b.node("Relu", {a}, "r", {3, 5}));
  auto plugin_prog = build(b.graph(), reg.get(), {"template"}, {}, FallbackPolicy::kRequire);
  ASSERT_TRUE(plugin_prog.ok()) << plugin_prog.status().to_string();
  auto portable_prog = build(b.graph(), nullptr, {});
  ASSERT_TRUE(portable_prog.ok()) << portable_prog.status().to_string();
  std::vector<Value> in{Value(random_tensor({3, 4}, 9))};
  auto got = (*plugin_prog)->run(in, {}, nullptr);
  auto want = (*portable_prog)->run(in, {}, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  expect_close(got.value()[0].tensor(), want.value()[0].tensor());
  EXPECT_EQ((*plugin_prog)->placement().backends[0], "template");
}

}  // namespace
}  // namespace kiln::abi_test
