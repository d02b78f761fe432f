// The plugin contract's validators, shared by the loader and `kiln
// check-backend`: the kit now reports what only the loader used to refuse
// (the device-count limit, the reserved names `portable` and `device`,
// custom ops in ai.onnx.ml).
#include "runtime/backends/plugin_contract.h"

#include <gtest/gtest.h>

#include "runtime/backends/host.h"

#include <string>

namespace kiln::runtime {
namespace {

// What the fake plugin answers; each test changes one thing.
struct FakeAnswers {
  const char* name = "fake";
  size_t devices = 1;
  const char* option = "threads";
  const char* custom_op_domain = "com.fake";
};
FakeAnswers g_answers;

kiln_status_t* get_info(kiln_plugin_t*, kiln_plugin_info_t* out) {
  out->name = g_answers.name;
  out->version = "1.0";
  out->vendor = "test";
  return nullptr;
}
kiln_status_t* device_count(kiln_plugin_t*, size_t* n) {
  *n = g_answers.devices;
  return nullptr;
}
kiln_status_t* device_info(kiln_plugin_t*, size_t index, kiln_device_info_t* out) {
  if (index >= g_answers.devices) return make_c_status(Status(StatusCode::kOutOfRange, "no such device"));
  out->name = "cpu0";
  return nullptr;
}
kiln_status_t* option_count(kiln_plugin_t*, size_t* n) {
  *n = 1;
  return nullptr;
}
kiln_status_t* option_info(kiln_plugin_t*, size_t, kiln_option_info_t* out) {
  out->name = g_answers.option;
  out->type = KILN_OPTION_INT;
  out->default_value = "1";
  out->doc = "how many";
  return nullptr;
}
kiln_status_t* custom_op_count(kiln_plugin_t*, size_t* n) {
  *n = 1;
  return nullptr;
}
kiln_status_t* custom_op_info(kiln_plugin_t*, size_t, kiln_custom_op_info_t* out) {
  out->domain = g_answers.custom_op_domain;
  out->op_type = "FakeOp";
  out->since_version = 1;
  return nullptr;
}

kiln_backend_api_t fake_api() {
  kiln_backend_api_t api{};
  api.plugin_get_info = get_info;
  api.plugin_get_device_count = device_count;
  api.plugin_get_device_info = device_info;
  api.plugin_get_option_count = option_count;
  api.plugin_get_option_info = option_info;
  api.plugin_get_custom_op_count = custom_op_count;
  api.plugin_get_custom_op_info = custom_op_info;
  return api;
}

// The kit's reading (it goes on after a refusal): the findings of `check`.
std::vector<ContractFinding> kit_findings(const std::string& check) {
  BackendInfo info;
  std::vector<ContractFinding> out;
  const ContractFindings all = read_plugin_info(fake_api(), nullptr, &info, /*stop_at_refusal=*/false);
  for (const ContractFinding& f : all.items())
    if (f.check == check) out.push_back(f);
  return out;
}

class PluginContractTest : public ::testing::Test {
 protected:
  void SetUp() override { g_answers = FakeAnswers{}; }
};

TEST_F(PluginContractTest, AGoodPluginPassesEveryCheck) {
  BackendInfo info;
  ContractFindings f = read_plugin_info(fake_api(), nullptr, &info, false);
  for (const ContractFinding& x : f.items()) EXPECT_TRUE(x.ok) << x.check << ": " << x.detail;
  EXPECT_TRUE(f.first_refusal().is_ok());
  EXPECT_EQ(info.name, "fake");
  ASSERT_EQ(info.options.size(), 1u);
  ASSERT_EQ(info.custom_ops.size(), 1u);
}

TEST_F(PluginContractTest, ReportsTheDeviceCountLimit) {
  g_answers.devices = 5000;
  auto f = kit_findings("devices");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].ok);
  EXPECT_TRUE(f[0].refused);
  EXPECT_NE(f[0].detail.find("5000 devices (0 to 4096 expected)"), std::string::npos) << f[0].detail;
}

// ABI 1.1: no device found is not a load failure. The plugin loads,
// unavailable; the kit asks for a reason when is_available gave none.
TEST_F(PluginContractTest, NoDeviceLoadsAsUnavailable) {
  g_answers.devices = 0;
  BackendInfo info;
  ContractFindings loader = read_plugin_info(fake_api(), nullptr, &info, /*stop_at_refusal=*/true);
  EXPECT_FALSE(loader.refused());
  EXPECT_FALSE(info.available);
  EXPECT_EQ(info.unavailable_reason, "it found no device");
  EXPECT_TRUE(info.devices.empty());
  auto f = kit_findings("devices");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].ok);
  EXPECT_FALSE(f[0].refused);
  EXPECT_NE(f[0].detail.find("0 devices while is_available says available"), std::string::npos) << f[0].detail;
}

TEST_F(PluginContractTest, ReportsTheReservedNamePortable) {
  g_answers.name = "portable";
  auto f = kit_findings("info");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].refused);
  EXPECT_EQ(f[0].detail, "plugin_get_info: the name 'portable' is reserved");
  // The kit goes on with the other checks; the loader stops here.
  BackendInfo info;
  EXPECT_GT(read_plugin_info(fake_api(), nullptr, &info, false).items().size(), 1u);
  EXPECT_EQ(read_plugin_info(fake_api(), nullptr, &info, true).items().size(), 1u);
}

TEST_F(PluginContractTest, ReportsTheReservedOptionDevice) {
  g_answers.option = "device";
  auto f = kit_findings("option schema");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].refused);
  EXPECT_EQ(f[0].detail, "option 'device' is reserved for the host");
}

TEST_F(PluginContractTest, ReportsCustomOpsInTheOnnxMlDomain) {
  g_answers.custom_op_domain = "ai.onnx.ml";
  auto f = kit_findings("custom ops");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].refused);
  EXPECT_NE(f[0].detail.find("must name an op of the plugin's own domain"), std::string::npos) << f[0].detail;
}

TEST_F(PluginContractTest, TheLoaderRefusesWithTheFirstRefusal) {
  g_answers.option = "device";
  g_answers.custom_op_domain = "ai.onnx.ml";
  BackendInfo info;
  Status st = read_plugin_info(fake_api(), nullptr, &info, true).first_refusal();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "option 'device' is reserved for the host");
}

}  // namespace
}  // namespace kiln::runtime
