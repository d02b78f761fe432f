// Run control (ABI 1.1): a cancel flag and a deadline stop a run between
// nodes, and a plugin inside a long partition sees them through
// exec_should_cancel. The status says which, and before which node.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"
#include "runtime/backends/host.h"

namespace kiln::abi_test {
namespace {

using Clock = std::chrono::steady_clock;

// x -> Relu -> Sigmoid -> Neg -> out, all portable unless a plugin claims Relu.
std::shared_ptr<ir::Graph> three_nodes() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4});
  ir::ValueId r = b.node("Relu", {x}, "relu", {4});
  ir::ValueId s = b.node("Sigmoid", {r}, "sigmoid", {4});
  b.output(b.node("Neg", {s}, "neg", {4}));
  return b.graph();
}

Result<std::vector<Value>> run_with(const runtime::Program& p, const RunOptions* options) {
  std::vector<Value> in{Value(Tensor::from_vector<float>({-1, 2, -3, 4}))};
  return p.run(in, {}, nullptr, nullptr, options);
}

TEST(RunControlTest, CancelAndDeadlineStopPortableRunsBetweenNodes) {
  auto p = build(three_nodes(), nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::atomic<bool> cancel{false};
  RunOptions options;
  options.cancel = &cancel;
  options.deadline = Clock::now() + std::chrono::hours(1);
  EXPECT_TRUE(run_with(**p, &options).ok());  // neither set: runs

  cancel = true;
  auto cancelled = run_with(**p, &options);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_NE(cancelled.status().message().find("before node"), std::string::npos) << cancelled.status().message();
  EXPECT_NE(cancelled.status().message().find("the run was cancelled"), std::string::npos);

  cancel = false;
  options.deadline = Clock::now() - std::chrono::milliseconds(1);
  auto late = run_with(**p, &options);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.status().message().find("the run's deadline passed"), std::string::npos);

  // The program stays usable after a stopped run.
  options.deadline = {};
  auto again = run_with(**p, &options);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_FLOAT_EQ(again.value()[0].tensor().data<float>()[0], -0.5f);
}

// --- a plugin that polls ---------------------------------------------------------

std::atomic<bool> g_started{false};
std::atomic<bool>* g_cancel_from_plugin = nullptr;  // set: the plugin cancels the run itself

// Claims Relu. Its execute either waits (bounded) for the run to be
// cancelled, polling exec_should_cancel, or cancels the run itself and
// succeeds.
class Poller final : public sdk::Plugin {
 public:
  Info info() const override { return {"poller", "1", "tests", "", "polls exec_should_cancel", 0}; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    class Run final : public sdk::Compiled {
     public:
      void execute(sdk::ExecContext& ctx, const sdk::Inputs& in) override {
        sdk::TensorView x = in[0];
        sdk::TensorView y = ctx.allocate_output(0, KILN_DTYPE_FLOAT32, x.dims, x.rank);
        for (int64_t k = 0; k < x.numel(); ++k) y.as<float>()[k] = std::max(0.f, x.as<float>()[k]);
        if (g_cancel_from_plugin) {
          g_cancel_from_plugin->store(true);
          return;
        }
        g_started = true;
        const auto give_up = Clock::now() + std::chrono::seconds(30);  // never hang the suite
        while (!ctx.should_cancel()) {
          if (Clock::now() > give_up) sdk::fail(KILN_STATUS_INTERNAL, "exec_should_cancel never said so");
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ctx.check_cancel();
      }
      size_t num_inputs() const override { return 1; }
      size_t num_outputs() const override { return 1; }
    };
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      void get_capability(const sdk::Graph& g, sdk::Capability& cap) override {
        for (size_t i = 0; i < g.num_nodes(); ++i) {
          if (g.node(i).op_type() == "Relu") cap.add_single_node_group(i);
          else cap.decline(i, "only Relu");
        }
      }
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition&) override {
        return std::make_unique<Run>();
      }
    };
    return std::make_unique<Inst>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(poller_entry, Poller)

std::shared_ptr<BackendRegistry> poller_registry() {
  auto reg = registry_of({});
  EXPECT_TRUE(runtime::registry_impl(*reg).add_entry(&poller_entry, "(test)").is_ok());
  return reg;
}

TEST(RunControlTest, APluginPollingShouldCancelStopsALongPartition) {
  auto reg = poller_registry();
  auto p = build(three_nodes(), reg.get(), {"poller"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ((*p)->placement().partitions.size(), 1u);
  std::atomic<bool> cancel{false};
  RunOptions options;
  options.cancel = &cancel;
  g_started = false;
  std::optional<Result<std::vector<Value>>> result;
  std::thread runner([&] { result.emplace(run_with(**p, &options)); });
  while (!g_started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cancel = true;  // from another thread, while the plugin is inside execute
  runner.join();
  ASSERT_TRUE(result.has_value());
  const Result<std::vector<Value>>& out = *result;
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled);
  EXPECT_NE(out.status().message().find("backend 'poller'"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("the run was cancelled"), std::string::npos) << out.status().message();
}

TEST(RunControlTest, ACancelDuringAPartitionStopsBeforeTheNextNode) {
  auto reg = poller_registry();
  auto p = build(three_nodes(), reg.get(), {"poller"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::atomic<bool> cancel{false};
  RunOptions options;
  options.cancel = &cancel;
  g_cancel_from_plugin = &cancel;
  auto out = run_with(**p, &options);
  g_cancel_from_plugin = nullptr;
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled);
  EXPECT_NE(out.status().message().find("sigmoid"), std::string::npos) << out.status().message();
}

TEST(RunControlTest, ShouldCancelIsFalseWithoutRunOptions) {
  kiln_exec_context_t* none = nullptr;
  EXPECT_FALSE(runtime::host_api()->exec_should_cancel(none));
  auto reg = poller_registry();
  auto p = build(three_nodes(), reg.get(), {"poller"});
  ASSERT_TRUE(p.ok());
  std::atomic<bool> cancel{false};
  g_cancel_from_plugin = &cancel;  // the plugin sets a flag no run watches
  auto out = run_with(**p, nullptr);
  g_cancel_from_plugin = nullptr;
  EXPECT_TRUE(out.ok()) << out.status().to_string();
}

// --- RESOURCE_EXHAUSTED: back to portable kernels when allowed ----------------------

// Claims Relu and Sigmoid as one group and always runs out of device memory.
class OutOfMemory final : public sdk::Plugin {
 public:
  Info info() const override { return {"oom", "1", "tests", "", "its device is always full", 0}; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    class Run final : public sdk::Compiled {
     public:
      void execute(sdk::ExecContext&, const sdk::Inputs&) override {
        sdk::fail(KILN_STATUS_RESOURCE_EXHAUSTED, "simulated device out of memory");
      }
      size_t num_inputs() const override { return 1; }
      size_t num_outputs() const override { return 1; }
    };
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      void get_capability(const sdk::Graph& g, sdk::Capability& cap) override {
        std::vector<size_t> group;
        for (size_t i = 0; i < g.num_nodes(); ++i) {
          if (g.node(i).op_type() == "Relu" || g.node(i).op_type() == "Sigmoid") group.push_back(i);
          else cap.decline(i, "only Relu and Sigmoid");
        }
        cap.add_group(group);
      }
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition&) override {
        return std::make_unique<Run>();
      }
    };
    return std::make_unique<Inst>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(oom_entry, OutOfMemory)

TEST(RunControlTest, ResourceExhaustedFallsBackToPortableWhenAllowedAndSaysSo) {
  std::vector<std::string> logs;
  auto reg = registry_of({});
  runtime::registry_impl(*reg).load_options.log_sink = [&](kiln_log_level_t level, const std::string&,
                                                           const std::string& m) {
    if (level == KILN_LOG_WARNING) logs.push_back(m);
  };
  ASSERT_TRUE(runtime::registry_impl(*reg).add_entry(&oom_entry, "(test)").is_ok());
  auto portable = build(three_nodes(), nullptr, {});
  ASSERT_TRUE(portable.ok());
  auto want = run_with(**portable, nullptr);
  ASSERT_TRUE(want.ok());

  auto allowed = build(three_nodes(), reg.get(), {"oom"}, {}, FallbackPolicy::kAllow);
  ASSERT_TRUE(allowed.ok()) << allowed.status().to_string();
  ASSERT_EQ((*allowed)->placement().partitions.size(), 1u);
  auto got = run_with(**allowed, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_close(got.value()[0].tensor(), want.value()[0].tensor());
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_NE(logs[0].find("ran out of resources (backend 'oom': simulated device out of memory); running it on "
                         "portable kernels"),
            std::string::npos)
      << logs[0];

  // Fallback `require`: the run fails with the plugin's status.
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4});
  b.output(b.node("Sigmoid", {b.node("Relu", {x}, "relu", {4})}, "sigmoid", {4}));
  auto required = build(b.graph(), reg.get(), {"oom"}, {}, FallbackPolicy::kRequire);
  ASSERT_TRUE(required.ok()) << required.status().to_string();
  auto failed = run_with(**required, nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(failed.status().message().find("simulated device out of memory"), std::string::npos);
}

}  // namespace
}  // namespace kiln::abi_test
