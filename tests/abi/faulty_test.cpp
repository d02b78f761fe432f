// Faulty plugins (fakes/fake_faulty.c): one whose execute fails mid-run, one
// whose compile fails, one that hangs in is_available, one that writes past
// its output buffer. Each must be survived and reported by name, and the
// session must stay usable.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "abi_test_util.h"
#include "kiln/backend_check.h"
#include "runtime/backends/guarded_outputs.h"
#include "runtime/backends/plugin_contract.h"

namespace kiln::abi_test {
namespace {

std::string faulty(const std::string& fault) {
  return std::string(KILN_FAKES_DIR) + "/faulty/libkiln_fake_faulty_" + fault + ".so";
}

// x -> Neg (portable) -> Relu (the plugin) -> Sigmoid (portable).
std::shared_ptr<ir::Graph> neg_relu_sigmoid() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 4});
  ir::ValueId n = b.node("Neg", {x}, "neg", {2, 4});
  ir::ValueId r = b.node("Relu", {n}, "relu", {2, 4});
  b.output(b.node("Sigmoid", {r}, "sigmoid", {2, 4}));
  return b.graph();
}

TEST(FaultyPluginTest, ExecuteFailureMidRunNamesThePluginAndTheNextRunWorks) {
  auto reg = registry_of({faulty("execute")});
  auto program = build(neg_relu_sigmoid(), reg.get(), {"faulty_execute"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  ASSERT_EQ((*program)->placement().partitions.size(), 1u);
  auto reference = build(neg_relu_sigmoid(), nullptr, {});
  ASSERT_TRUE(reference.ok());

  Tensor bad = random_tensor({2, 4}, 1);
  bad.data<float>()[5] = -1234.f;  // Neg makes it 1234: the plugin's trigger, after a portable step ran
  auto failed = (*program)->run(std::vector<Value>{Value(bad)}, {}, nullptr);
  ASSERT_FALSE(failed.ok());
  const std::string msg = failed.status().message();
  EXPECT_NE(msg.find("backend 'faulty_execute'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fake device lost while running the group"), std::string::npos) << msg;
  EXPECT_NE(msg.find("faulty_execute:"), std::string::npos) << "the partition is not named: " << msg;

  // The same program (a session's inside) runs again, and concurrently, as before.
  for (uint32_t seed = 2; seed < 5; ++seed) {
    Tensor good = random_tensor({2, 4}, seed);
    auto got = (*program)->run(std::vector<Value>{Value(good)}, {}, nullptr);
    auto want = (*reference)->run(std::vector<Value>{Value(good)}, {}, nullptr);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_TRUE(want.ok());
    expect_close((*got)[0].tensor(), (*want)[0].tensor());
  }
}

TEST(FaultyPluginTest, CompileFailureFallsBackToPortableWithTheReason) {
  auto reg = registry_of({faulty("compile")});
  auto program = build(neg_relu_sigmoid(), reg.get(), {"faulty_compile"});
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  const PlacementReport& rep = (*program)->placement();
  EXPECT_TRUE(rep.partitions.empty());
  const NodePlacement& relu = rep.nodes.at(1);
  EXPECT_EQ(relu.node, "Relu 'relu'");
  EXPECT_EQ(relu.placement, "portable");
  ASSERT_EQ(relu.reasons.size(), 1u);
  EXPECT_EQ(relu.reasons[0].first, "faulty_compile");
  EXPECT_NE(relu.reasons[0].second.find("compile failed: "), std::string::npos) << relu.reasons[0].second;
  EXPECT_NE(relu.reasons[0].second.find("fake compiler crashed on the group (code 7)"), std::string::npos);
  Tensor x = random_tensor({2, 4}, 3);
  auto got = (*program)->run(std::vector<Value>{Value(x)}, {}, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  auto want = (*build(neg_relu_sigmoid(), nullptr, {}))->run(std::vector<Value>{Value(x)}, {}, nullptr);
  expect_close((*got)[0].tensor(), (*want)[0].tensor());

  // Under `require` the same fallback is an error naming the node and the reason.
  auto strict = build(neg_relu_sigmoid(), reg.get(), {"faulty_compile"}, {}, FallbackPolicy::kRequire);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("fake compiler crashed"), std::string::npos) << strict.status().message();
}

TEST(FaultyPluginTest, HangingIsAvailableIsBoundedAndTheLibraryStaysMapped) {
  ScopedEnv timeout("KILN_PLUGIN_PROBE_TIMEOUT_MS", "200");
  const std::string path = faulty("hang");
  {
    auto reg = registry_of({path});
    const std::vector<BackendInfo> b = reg->backends();
    ASSERT_EQ(b.size(), 1u) << (reg->errors().empty() ? "" : reg->errors()[0].message);
    EXPECT_EQ(b[0].name, "faulty_hang");
    EXPECT_FALSE(b[0].available);
    EXPECT_NE(b[0].unavailable_reason.find("is_available did not answer within 200 ms (KILN_PLUGIN_PROBE_TIMEOUT_MS)"),
              std::string::npos)
        << b[0].unavailable_reason;
    // Named under fallback `allow`, it is skipped with the reason in the report.
    auto program = build(neg_relu_sigmoid(), reg.get(), {"faulty_hang"});
    ASSERT_TRUE(program.ok()) << program.status().to_string();
    const PlacementReport& rep = (*program)->placement();
    EXPECT_TRUE(rep.partitions.empty());
    std::string notes;
    for (const std::string& n : rep.notes) notes += n + "\n";
    EXPECT_NE(notes.find("did not answer within 200 ms"), std::string::npos) << notes;
    // A session naming no backend skips it and runs on portable kernels.
    auto fallback = build(neg_relu_sigmoid(), reg.get(), {});
    EXPECT_TRUE(fallback.ok()) << fallback.status().to_string();
  }
  // The registry is gone, but a thread is still inside is_available: the
  // library must never be unmapped under it.
  void* still = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(still, nullptr) << "the hung plugin was unloaded while a thread may be inside it";
  if (still) dlclose(still);
}

TEST(FaultyPluginTest, ProbeTimeoutComesFromTheEnvironment) {
  {
    ScopedEnv unset("KILN_PLUGIN_PROBE_TIMEOUT_MS", nullptr);
    EXPECT_EQ(runtime::probe_timeout_ms(), 10000);
  }
  for (const auto& [text, ms] : std::vector<std::pair<const char*, int64_t>>{
           {"250", 250}, {"0", 0}, {"-5", 10000}, {"soon", 10000}, {"12ms", 10000}, {"", 10000}}) {
    ScopedEnv env("KILN_PLUGIN_PROBE_TIMEOUT_MS", text);
    EXPECT_EQ(runtime::probe_timeout_ms(), ms) << "'" << text << "'";
  }
}

TEST(FaultyPluginTest, OutputOverflowIsCaughtByTheGuardCheck) {
  backend_check::Options o;
  o.library = faulty("overflow");
  backend_check::Report r;
  backend_check::check_execute(o, r);
  const backend_check::Row* guard = nullptr;
  for (const backend_check::Row& row : r.rows())
    if (row.check == "outputs stay in bounds") guard = &row;
  ASSERT_NE(guard, nullptr);
  EXPECT_EQ(guard->outcome, backend_check::Outcome::kFail);
  EXPECT_NE(guard->detail.find("wrote 16 bytes past the end"), std::string::npos) << guard->detail;
  EXPECT_NE(guard->detail.find("(of Relu '"), std::string::npos) << "the op is not named: " << guard->detail;

  // A plugin that stays in bounds passes the same check.
  o.library = fake("minimal");
  backend_check::Report ok;
  backend_check::check_execute(o, ok);
  for (const backend_check::Row& row : ok.rows())
    if (row.check == "outputs stay in bounds") {
      EXPECT_EQ(row.outcome, backend_check::Outcome::kPass) << row.detail;
    }
}

TEST(GuardedOutputsTest, ReportsWritesOnEitherSide) {
  runtime::GuardedOutputs outs(2);
  auto a = outs.allocate(0, DType::kFloat32, Shape{4});
  auto b = outs.allocate(1, DType::kFloat32, Shape{2});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(outs.guard_damage(), "");
  static_cast<uint8_t*>((*a)->raw_data())[16 + 2] = 0;  // 3 bytes past the end of 16
  static_cast<uint8_t*>((*b)->raw_data())[-1] = 0;      // 1 byte before the start
  EXPECT_EQ(outs.guard_damage({"'y'", ""}),
            "output 0 'y': wrote 3 bytes past the end of its 16-byte buffer; output 1: wrote 1 bytes before the "
            "start of its 8-byte buffer");
  EXPECT_FALSE(outs.allocate(2, DType::kFloat32, Shape{1}).ok());
}

}  // namespace
}  // namespace kiln::abi_test
