// The scenarios over simdev through the runtime (Program with
// --backends simdev and the host's device edges): a chain of partitions
// keeps its data on the device (one copy in, one out per run), a portable
// node between partitions is staged once each way, a copy overlaps a long
// execution (the run's trace shows it), a simulated out-of-memory falls
// back to portable kernels under fallback allow (and fails under require),
// and cancellation stops a long run inside a device partition.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "../abi_test_util.h"
#include "kiln/profile.h"
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
  // 52 KiB of device memory: the weights (16 KiB + 256 B) and the host's
  // device buffers for x and y (16 KiB each) fit; the 16 KiB intermediates a
  // run needs do not. simdev reserves them when the run is queued, so the
  // call itself says RESOURCE_EXHAUSTED, for async handles too.
  const int64_t n = 64;
  std::vector<Value> in{Value(random_tensor({n, n}, 9))};
  const Tensor want = portable_result(mlp(n), in);
  for (const char* async : {"true", "false"}) {
    SCOPED_TRACE(std::string("async=") + async);
    // own_constants=false: the host keeps its copies of W and B, so the
    // partition keeps its portable fallback (see OwnedConstants... below).
    SimProgram sp = build_simdev(mlp(n), {{"memory_bytes", "53248"}, {"async", async}, {"own_constants", "false"}});
    ASSERT_TRUE(sp.program);
    std::vector<std::string> warnings;
    sp.instance->plugin().host()->sink = [&](kiln_log_level_t level, const std::string&, const std::string& m) {
      if (level >= KILN_LOG_WARNING) warnings.push_back(m);
    };
    for (int run = 1; run <= 2; ++run) {
      auto r = sp.program->run(in, {}, nullptr);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      expect_close(r.value()[0].tensor(), want);
    }
    ASSERT_EQ(warnings.size(), 2u);
    EXPECT_NE(warnings[0].find("out of device memory for an intermediate"), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("running it on portable kernels"), std::string::npos) << warnings[0];
    EXPECT_EQ(sp.counter("device_used_bytes"), 16640 + 2 * 16384);  // nothing of the refused runs is left
    sp.instance->plugin().host()->sink = nullptr;

    SimProgram strict = build_simdev(mlp(n), {{"memory_bytes", "53248"}, {"async", async}, {"own_constants", "false"}},
                                     FallbackPolicy::kRequire);
    ASSERT_TRUE(strict.program);
    auto no = strict.program->run(in, {}, nullptr);
    ASSERT_FALSE(no.ok());
    EXPECT_EQ(no.status().code(), StatusCode::kResourceExhausted) << no.status().to_string();
  }
}

// fail_after refuses runs through the fence (async handles): the host can
// fall back only on a status execute returns, so this one is synchronous.
TEST(SimdevSession, FailAfterSimulatesOutOfMemoryMidSession) {
  const int64_t n = 8;
  std::vector<Value> in{Value(random_tensor({n, n}, 5))};
  const Tensor want = portable_result(mlp(n), in);
  SimProgram sp = build_simdev(mlp(n), {{"fail_after", "1"}, {"async", "false"}, {"own_constants", "false"}});
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
  for (const char* async : {"false", "true"}) {
    SCOPED_TRACE(std::string("async=") + async);
    // Three ops at 20 s each: only cancellation ends this run in time.
    SimProgram sp = build_simdev(mlp(4), {{"latency_us", "20000000"}, {"async", async}});
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
    // The host reports its own reason, whatever the plugin said.
    EXPECT_NE(r.status().message().find("the run was cancelled"), std::string::npos) << r.status().to_string();
    // The program (and the device queue) stay usable.
    ASSERT_TRUE(sp.instance->set_property("latency_us", "0").is_ok());
    auto again = sp.program->run(in, {}, nullptr);
    EXPECT_TRUE(again.ok()) << again.status().to_string();
  }
}

// x -> MatMul -> Add -> Relu -> y, one partition per node (fuse=false).
TEST(SimdevSession, AChainOfPartitionsKeepsDataOnTheDevice) {
  for (const char* async : {"true", "false"}) {
    SCOPED_TRACE(std::string("async=") + async);
    const int64_t n = 16;
    std::vector<Value> in{Value(random_tensor({n, n}, 2))};
    const Tensor want = portable_result(mlp(n), in);
    SimProgram sp = build_simdev(mlp(n), {{"fuse", "false"}, {"async", async}});
    ASSERT_TRUE(sp.program);
    ASSERT_EQ(sp.program->placement().partitions.size(), 3u);
    for (int run = 1; run <= 3; ++run) {
      auto r = sp.program->run(in, {}, nullptr);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      expect_close(r.value()[0].tensor(), want);
      EXPECT_EQ(sp.counter("copies_to_device"), run);    // x
      EXPECT_EQ(sp.counter("copies_from_device"), run);  // y
      EXPECT_EQ(sp.counter("copies_on_device"), 0);
      EXPECT_EQ(sp.counter("executions"), 3 * run);
      EXPECT_EQ(sp.counter("host_operands"), 0);  // every operand was device memory
    }
  }
}

// x -> MatMul -> Sigmoid (portable) -> Add -> Relu -> y.
TEST(SimdevSession, APortableNodeBetweenPartitionsIsStagedOnceEachWay) {
  GraphBuilder b;
  const int64_t n = 8;
  ir::ValueId x = b.input("x", {n, n});
  ir::ValueId m = b.node("MatMul", {x, b.constant("W", random_tensor({n, n}, 3))}, "mm", {n, n});
  ir::ValueId s = b.node("Sigmoid", {m}, "sig", {n, n});
  ir::ValueId a = b.node("Add", {s, b.constant("B", random_tensor({n}, 4))}, "add", {n, n});
  b.output(b.node("Relu", {a}, "relu", {n, n}));
  std::vector<Value> in{Value(random_tensor({n, n}, 6))};
  const Tensor want = portable_result(b.graph(), in);
  SimProgram sp = build_simdev(b.graph(), {});
  ASSERT_TRUE(sp.program);
  for (int run = 1; run <= 2; ++run) {
    auto r = sp.program->run(in, {}, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    expect_close(r.value()[0].tensor(), want);
    EXPECT_EQ(sp.counter("copies_to_device"), 2 * run);    // x, Sigmoid's output
    EXPECT_EQ(sp.counter("copies_from_device"), 2 * run);  // MatMul's output, y
    EXPECT_EQ(sp.counter("host_operands"), 0);
  }
}

// x -> MatMul (slow) ---------------> Add -> Relu -> y
// z -> Sigmoid (portable) -> copy in -^
// While the device runs MatMul, the host runs Sigmoid and queues its
// output's copy, which the copy engine performs during the MatMul.
TEST(SimdevSession, ACopyOverlapsComputeInTheRunsTrace) {
  GraphBuilder b;
  const int64_t n = 8;
  ir::ValueId x = b.input("x", {n, n});
  ir::ValueId z = b.input("z", {n, n});
  ir::ValueId m = b.node("MatMul", {x, b.constant("W", random_tensor({n, n}, 3))}, "mm", {n, n});
  ir::ValueId s = b.node("Sigmoid", {z}, "sig", {n, n});
  ir::ValueId a = b.node("Add", {m, s}, "add", {n, n});
  b.output(b.node("Relu", {a}, "relu", {n, n}));
  std::vector<Value> in{Value(random_tensor({n, n}, 6)), Value(random_tensor({n, n}, 8))};
  const Tensor want = portable_result(b.graph(), in);
  SimProgram sp = build_simdev(b.graph(), {{"fuse", "false"}, {"latency_us", "200000"}, {"copy_latency_us", "50000"}});
  ASSERT_TRUE(sp.program);
  RunProfile profile;
  auto r = sp.program->run(in, {}, nullptr, &profile);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_close(r.value()[0].tensor(), want);
  const NodeEvent* matmul = nullptr;
  std::vector<const NodeEvent*> copies;
  for (const NodeEvent& e : profile.plugin_events) {
    if (e.op_type == "simdev / 0" && e.name == "MatMul 'mm'") matmul = &e;
    if (e.op_type == "simdev / 1") copies.push_back(&e);
  }
  ASSERT_NE(matmul, nullptr);
  // x's copy (which MatMul reads, so it ends before MatMul starts) and
  // Sigmoid's output's copy, which MatMul leaves alone: that one intersects it.
  ASSERT_GE(copies.size(), 1u);
  int overlapping = 0;
  for (const NodeEvent* c : copies)
    overlapping += c->start_ns < matmul->start_ns + matmul->duration_ns && matmul->start_ns < c->start_ns + c->duration_ns;
  EXPECT_EQ(overlapping, 1);
  for (const NodeEvent& e : profile.plugin_events)
    std::printf("trace: %-12s %-28s start %9.3f ms  dur %8.3f ms\n", e.op_type.c_str(), e.name.c_str(),
                static_cast<double>(e.start_ns) / 1e6, static_cast<double>(e.duration_ns) / 1e6);
}


// The shared-weights scenario: two sessions of one registry get the
// same simdev instance (KILN_PLUGIN_SHARED_INSTANCES) and their compiled
// handles share one device copy of each weight (by content hash).
TEST(SimdevSession, TwoSessionsShareOneDeviceCopyOfTheWeights) {
  auto shared = registry_of({KILN_SIMDEV_PLUGIN});
  const int64_t n = 32;
  std::vector<Value> in{Value(random_tensor({n, n}, 12))};
  const Tensor want = portable_result(mlp(n), in);
  std::vector<std::shared_ptr<runtime::BackendInstance>> instances;
  std::vector<std::unique_ptr<runtime::Program>> programs;
  for (int session = 0; session < 2; ++session) {
    auto req = runtime::select_backends(*shared, {"simdev"}, {}, FallbackPolicy::kAllow);
    ASSERT_TRUE(req.ok()) << req.status().to_string();
    instances.push_back(req->backends.at(0).instance);
    runtime::ProgramOptions po;
    po.registry = &kernels::portable_registry();
    po.partition = &*req;
    auto p = runtime::Program::build(mlp(n), po);  // each session imports the model itself
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    programs.push_back(std::move(*p));
  }
  ASSERT_EQ(instances[0], instances[1]);  // one instance for the registry's sessions
  SimProgram sp{instances[0], nullptr};
  EXPECT_EQ(sp.counter("device_constants"), 2);  // W and B, once
  EXPECT_EQ(sp.counter("constant_uploads"), 2);
  EXPECT_EQ(sp.counter("constant_reuses"), 2);  // the second session's compile found them
  for (auto& p : programs) {
    auto r = p->run(in, {}, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    expect_close(r.value()[0].tensor(), want);
    EXPECT_EQ(p->num_dropped_constants(), 2u);  // simdev owns them: the host dropped its copies
  }
  programs.clear();
  EXPECT_EQ(sp.counter("device_constants"), 0);  // released with the last compiled handle
}

// Owning constants costs the fallback: once the host has dropped W and B,
// a partition that runs out of device memory cannot run on portable
// kernels, and says so at load.
TEST(SimdevSession, OwnedConstantsLeaveTheHostAndTakeTheFallbackWithThem) {
  const int64_t n = 64;
  SimProgram sp = build_simdev(mlp(n), {{"memory_bytes", "53248"}});
  ASSERT_TRUE(sp.program);
  EXPECT_EQ(sp.program->placement().num_dropped_constants, 2u);
  EXPECT_EQ(sp.program->placement().dropped_constant_bytes, uint64_t{n * n * 4 + n * 4});
  bool noted = false;
  for (const std::string& note : sp.program->placement().notes) noted |= note.find("cannot fall back") != std::string::npos;
  EXPECT_TRUE(noted);
  std::vector<Value> in{Value(random_tensor({n, n}, 9))};
  auto r = sp.program->run(in, {}, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().to_string();
}

// Conv's im2col scratch is declared (workspace_bytes[DEVICE]) and the host
// provides it from its plan: the plugin allocates none per run.
TEST(SimdevSession, TheHostProvidesTheDeclaredConvWorkspace) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 3, 10, 10});
  ir::Attribute pads;
  pads.name = "pads";
  pads.type = ir::AttrType::kInts;
  pads.ints = {1, 1, 1, 1};
  ir::ValueId c = b.node("Conv", {x, b.constant("W", random_tensor({4, 3, 3, 3}, 2)), b.constant("Bc", random_tensor({4}, 3))},
                         "conv", {1, 4, 10, 10}, DType::kFloat32, "", {pads});
  b.output(b.node("Relu", {c}, "relu", {1, 4, 10, 10}));
  std::vector<Value> in{Value(random_tensor({1, 3, 10, 10}, 4))};
  const Tensor want = portable_result(b.graph(), in);
  SimProgram sp = build_simdev(b.graph(), {});
  ASSERT_TRUE(sp.program);
  for (int run = 1; run <= 2; ++run) {
    auto r = sp.program->run(in, {}, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    expect_close(r.value()[0].tensor(), want);
  }
  EXPECT_EQ(sp.counter("host_workspaces"), 2);
  EXPECT_EQ(sp.counter("own_workspaces"), 0);
}

}  // namespace
}  // namespace kiln::abi_test
