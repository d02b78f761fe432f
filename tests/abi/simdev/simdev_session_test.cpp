// The scenarios over simdev through the runtime (Program with
// --backends simdev): a simulated out-of-memory falls back to portable
// kernels under fallback allow (and fails under require), and cancellation
// stops a long run inside the device partition.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "../abi_test_util.h"
#include "runtime/backends/plugin.h"

namespace kiln::abi_test {
namespace {

std::shared_ptr<BackendRegistry> reg() {
  static std::shared_ptr<BackendRegistry> r = registry_of({KILN_SIMDEV_PLUGIN});
  return r;
}

struct SimProgram {
  std::shared_ptr<runtime::BackendInstance> instance;
  std::unique_ptr<runtime::Program> program;
  int64_t counter(const std::string& key) const {
    auto v = instance->get_property(key);
    return v.ok() ? std::stoll(*v) : -1;
  }
};

// A Program over `g` with simdev (options as KEY=VALUE) and portable.
SimProgram build_simdev(std::shared_ptr<ir::Graph> g, std::vector<std::pair<std::string, std::string>> options,
                        FallbackPolicy fallback = FallbackPolicy::kAllow) {
  std::vector<BackendOption> opts;
  for (auto& [k, v] : options) opts.push_back({"simdev", k, v});
  auto req = runtime::select_backends(*reg(), {"simdev"}, opts, fallback);
  EXPECT_TRUE(req.ok()) << req.status().to_string();
  if (!req.ok()) return {};
  SimProgram sp;
  sp.instance = req->backends.at(0).instance;
  runtime::ProgramOptions po;
  po.registry = &kernels::portable_registry();
  po.partition = &*req;
  auto p = runtime::Program::build(std::move(g), po);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  if (p.ok()) sp.program = std::move(*p);
  return sp;
}

// y = Relu(x @ W + B) with x [n, n]: simdev claims all three as one group.
std::shared_ptr<ir::Graph> mlp(int64_t n) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {n, n});
  ir::ValueId w = b.constant("W", random_tensor({n, n}, 3));
  ir::ValueId bias = b.constant("B", random_tensor({n}, 4));
  ir::ValueId m = b.node("MatMul", {x, w}, "mm", {n, n});
  ir::ValueId a = b.node("Add", {m, bias}, "add", {n, n});
  b.output(b.node("Relu", {a}, "relu", {n, n}));
  return b.graph();
}

Tensor portable_result(std::shared_ptr<ir::Graph> g, const std::vector<Value>& in) {
  auto p = build(std::move(g), nullptr, {});
  EXPECT_TRUE(p.ok());
  auto r = (*p)->run(in, {}, nullptr);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.value()[0].tensor();
}

TEST(SimdevSession, OutOfDeviceMemoryFallsBackToPortableUnderAllow) {
  // The weights fit (16 KiB + 256 B); the 16 KiB intermediates of a run do not.
  const int64_t n = 64;
  std::vector<Value> in{Value(random_tensor({n, n}, 9))};
  const Tensor want = portable_result(mlp(n), in);
  SimProgram sp = build_simdev(mlp(n), {{"memory_bytes", "20480"}});
  ASSERT_TRUE(sp.program);
  std::vector<std::string> warnings;
  sp.instance->plugin().host()->sink = [&](kiln_log_level_t level, const std::string&, const std::string& m) {
    if (level >= KILN_LOG_WARNING) warnings.push_back(m);
  };
  auto r = sp.program->run(in, {}, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_close(r.value()[0].tensor(), want);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("out of device memory"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("running it on portable kernels"), std::string::npos) << warnings[0];
  sp.instance->plugin().host()->sink = nullptr;

  SimProgram strict = build_simdev(mlp(n), {{"memory_bytes", "20480"}}, FallbackPolicy::kRequire);
  ASSERT_TRUE(strict.program);
  auto no = strict.program->run(in, {}, nullptr);
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().code(), StatusCode::kResourceExhausted) << no.status().to_string();
}

TEST(SimdevSession, FailAfterSimulatesOutOfMemoryMidSession) {
  const int64_t n = 8;
  std::vector<Value> in{Value(random_tensor({n, n}, 5))};
  const Tensor want = portable_result(mlp(n), in);
  SimProgram sp = build_simdev(mlp(n), {{"fail_after", "1"}});
  ASSERT_TRUE(sp.program);
  sp.instance->plugin().host()->sink = [](kiln_log_level_t, const std::string&, const std::string&) {};
  for (int i = 0; i < 3; ++i) {  // the first on the device, then portable
    auto r = sp.program->run(in, {}, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    expect_close(r.value()[0].tensor(), want);
  }
  EXPECT_EQ(sp.counter("executions"), 3);
  sp.instance->plugin().host()->sink = nullptr;
}

TEST(SimdevSession, CancellationStopsALongDevicePartition) {
  // Three ops at 20 s each: only cancellation ends this run in time.
  SimProgram sp = build_simdev(mlp(4), {{"latency_us", "20000000"}});
  ASSERT_TRUE(sp.program);
  std::atomic<bool> cancel{false};
  RunOptions options;
  options.cancel = &cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel = true;
  });
  std::vector<Value> in{Value(random_tensor({4, 4}, 1))};
  auto r = sp.program->run(in, {}, nullptr, nullptr, &options);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().to_string();
  EXPECT_NE(r.status().message().find("the run was cancelled"), std::string::npos) << r.status().to_string();
  // The program (and the device queue) stay usable.
  ASSERT_TRUE(sp.instance->set_property("latency_us", "0").is_ok());
  auto again = sp.program->run(in, {}, nullptr);
  EXPECT_TRUE(again.ok()) << again.status().to_string();
}

}  // namespace
}  // namespace kiln::abi_test
