// `kiln check-backend`'s device group (backend_check_device.cpp) against the
// faulty device fakes (fakes/fake_device_faulty.c): each fault is reported
// on its own row with a line that names it, and a plugin without device
// declarations passes as 1.0 behaviour.
#include <gtest/gtest.h>

#include <cstdlib>

#include "abi_test_util.h"
#include "kiln/backend_check.h"

namespace kiln::abi_test {
namespace {

std::string device_fake(const std::string& name) {
  return std::string(KILN_FAKES_DIR) + "/device_faulty/libkiln_fake_dev_" + name + ".so";
}

// The rows of the device group for `library`.
std::vector<backend_check::Row> device_rows(const std::string& library) {
  backend_check::Options o;
  o.library = library;
  backend_check::Report r;
  backend_check::check_device(o, r);
  return r.rows();
}

const backend_check::Row* find(const std::vector<backend_check::Row>& rows, const std::string& check) {
  for (const backend_check::Row& row : rows)
    if (row.check == check) return &row;
  return nullptr;
}

std::string dump(const std::vector<backend_check::Row>& rows) {
  std::string s;
  for (const backend_check::Row& row : rows) s += row.check + ": " + row.detail + "\n";
  return s;
}

TEST(CheckDeviceTest, AFenceNeverSignalledFailsNamingThePartition) {
  setenv("KILN_CHECK_FENCE_TIMEOUT_MS", "300", 1);
  auto rows = device_rows(device_fake("no_signal"));
  unsetenv("KILN_CHECK_FENCE_TIMEOUT_MS");
  const backend_check::Row* row = find(rows, "fences signalled");
  ASSERT_NE(row, nullptr) << dump(rows);
  EXPECT_EQ(row->outcome, backend_check::Outcome::kFail);
  EXPECT_EQ(row->detail.rfind("partition 'dev_no_signal:", 0), 0u) << row->detail;
  EXPECT_NE(row->detail.find("compiled_execute_async returned OK but never signalled its fence (value 1) within 300 ms"),
            std::string::npos)
      << row->detail;
  backend_check::Report r;
  r.add(row->check, row->outcome, row->detail);
  EXPECT_FALSE(backend_check::fences_signalled(r));  // the executing groups are skipped after this
}

TEST(CheckDeviceTest, DeviceKindsWithoutAllocationAreRefusedDeclarations) {
  auto rows = device_rows(device_fake("bad_kinds"));
  const backend_check::Row* row = find(rows, "device declarations");
  ASSERT_NE(row, nullptr) << dump(rows);
  EXPECT_EQ(row->outcome, backend_check::Outcome::kFail);
  EXPECT_NE(row->detail.find("compiled_get_info declares non-host memory but the plugin has no"), std::string::npos)
      << row->detail;
}

TEST(CheckDeviceTest, AnInPlacePairOutOfRangeIsARefusedDeclaration) {
  auto rows = device_rows(device_fake("bad_inplace"));
  const backend_check::Row* row = find(rows, "device declarations");
  ASSERT_NE(row, nullptr) << dump(rows);
  EXPECT_EQ(row->outcome, backend_check::Outcome::kFail);
  EXPECT_NE(row->detail.find("in-place pair 0 (input 0"), std::string::npos) << row->detail;
}

TEST(CheckDeviceTest, WorkspaceLargerThanTheDeviceIsARefusedDeclaration) {
  auto rows = device_rows(device_fake("big_workspace"));
  const backend_check::Row* row = find(rows, "device declarations");
  ASSERT_NE(row, nullptr) << dump(rows);
  EXPECT_EQ(row->outcome, backend_check::Outcome::kFail);
  EXPECT_NE(row->detail.find("declares 1073741824 bytes of device workspace; the device has 1048576"), std::string::npos)
      << row->detail;
}

TEST(CheckDeviceTest, HostMemoryUnderADeviceLabelFails) {
  auto rows = device_rows(device_fake("host_pointer"));
  const backend_check::Row* row = find(rows, "device memory is not host memory");
  ASSERT_NE(row, nullptr) << dump(rows);
  EXPECT_EQ(row->outcome, backend_check::Outcome::kFail);
  EXPECT_NE(row->detail.find("instance_alloc(device) returned memory the host can read"), std::string::npos)
      << row->detail;
  // Everything else about it works: copies round-trip and its partitions run on device inputs.
  for (const char* check : {"device declarations", "instance_copy round trip", "partitions alone in their memory kinds"}) {
    const backend_check::Row* ok = find(rows, check);
    ASSERT_NE(ok, nullptr) << check;
    EXPECT_EQ(ok->outcome, backend_check::Outcome::kPass) << check << ": " << ok->detail;
  }
}

TEST(CheckDeviceTest, APluginWithoutDeviceDeclarationsPassesAs10) {
  auto rows = device_rows(template_plugin());
  const backend_check::Row* row = find(rows, "device declarations");
  ASSERT_NE(row, nullptr) << dump(rows);
  EXPECT_EQ(row->outcome, backend_check::Outcome::kPass);
  EXPECT_EQ(row->detail, "none: host memory, synchronous execute (the 1.0 behaviour)");
  for (const backend_check::Row& r : rows) EXPECT_NE(r.outcome, backend_check::Outcome::kFail) << r.check << ": " << r.detail;
}

}  // namespace
}  // namespace kiln::abi_test
