// Devices with metadata (ABI 1.1): vendor/device ids, uuid, memory and
// driver version reach BackendInfo; a plugin that finds no device still
// loads and is listed as unavailable with its reason.
#include <gtest/gtest.h>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"

namespace kiln::abi_test {
namespace {

class NoCompile final : public sdk::Instance {
 public:
  using Instance::Instance;
  void get_capability(const sdk::Graph& g, sdk::Capability& cap) override {
    for (size_t i = 0; i < g.num_nodes(); ++i) cap.decline(i, "runs nothing");
  }
  std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition&) override {
    sdk::fail(KILN_STATUS_UNIMPLEMENTED, "runs nothing");
  }
};

class TwoGpus final : public sdk::Plugin {
 public:
  Info info() const override { return {"two_gpus", "1", "tests", "", "describes its devices", 0}; }
  std::vector<Device> devices() const override {
    Device a{"gpu0", KILN_DEVICE_GPU, "first"};
    a.vendor_id = 0x10de;
    a.device_id = 0x2330;
    for (uint8_t i = 0; i < 16; ++i) a.uuid[i] = static_cast<uint8_t>(i * 17);
    a.memory_bytes = uint64_t{80} << 30;
    a.driver_version = "550.54.14";
    return {a, Device{"gpu1", KILN_DEVICE_GPU, "says nothing more"}};
  }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    return std::make_unique<NoCompile>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(two_gpus_entry, TwoGpus)

class NoDevice final : public sdk::Plugin {
 public:
  Info info() const override { return {"no_device", "1", "tests", "", "finds no device here", 5}; }
  std::string unavailable_reason() override { return "no accelerator found (is the driver loaded?)"; }
  std::vector<Device> devices() const override { return {}; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    return std::make_unique<NoCompile>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(no_device_entry, NoDevice)

TEST(DevicesTest, MetadataReachesTheBackendInfo) {
  auto reg = registry_of({});
  ASSERT_TRUE(runtime::registry_impl(*reg).add_entry(&two_gpus_entry, "(test)").is_ok());
  const BackendInfo info = reg->backends().at(0);  // backends() returns a copy
  ASSERT_EQ(info.devices.size(), 2u);
  const BackendDeviceInfo& a = info.devices[0];
  EXPECT_EQ(a.kind, "gpu");
  EXPECT_EQ(a.vendor_id, 0x10deu);
  EXPECT_EQ(a.device_id, 0x2330u);
  EXPECT_EQ(a.uuid, "00112233445566778899aabbccddeeff");
  EXPECT_EQ(a.memory_bytes, uint64_t{80} << 30);
  EXPECT_EQ(a.driver_version, "550.54.14");
  const BackendDeviceInfo& b = info.devices[1];  // zero: unknown
  EXPECT_EQ(b.vendor_id, 0u);
  EXPECT_EQ(b.uuid, "");
  EXPECT_EQ(b.memory_bytes, 0u);
  EXPECT_EQ(b.driver_version, "");
}

TEST(DevicesTest, APluginWithoutADeviceLoadsAsUnavailable) {
  auto reg = registry_of({});
  ASSERT_TRUE(runtime::registry_impl(*reg).add_entry(&no_device_entry, "(test)").is_ok());
  EXPECT_TRUE(reg->errors().empty());
  const BackendInfo info = reg->backends().at(0);  // backends() returns a copy
  EXPECT_FALSE(info.available);
  EXPECT_EQ(info.unavailable_reason, "no accelerator found (is the driver loaded?)");
  EXPECT_TRUE(info.devices.empty());
  auto p = runtime::registry_impl(*reg).all().at(0);
  EXPECT_EQ(p->create_instance(0, {}).status().code(), StatusCode::kOutOfRange);
  // Sessions skip it by default (priority 5) and run on portable kernels.
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2});
  b.output(b.node("Relu", {x}, "r", {2}));
  auto prog = build(b.graph(), reg.get(), {});
  ASSERT_TRUE(prog.ok()) << prog.status().to_string();
  EXPECT_EQ((*prog)->placement().backends, (std::vector<std::string>{"portable"}));
}

}  // namespace
}  // namespace kiln::abi_test
