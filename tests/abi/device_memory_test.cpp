// The host side of ABI 1.1 device plugins over tests/abi/fakes/fake_device.c:
// edges between partitions of one instance stay on the device (one copy in,
// one out), a portable node between them stages through pinned memory,
// workspace and in-place pairs are provided, buffers are allocated once and
// reused, async calls run behind fences whose errors become the run's, plugin
// trace slices reach the run profile, and a 1.0 plugin sees none of it.
// Also the checks of what a handle declares (read_compiled_device_info).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "abi_test_util.h"
#include "runtime/backends/partition_kernel.h"
#include "runtime/backends/plugin.h"
#include "runtime/device_edges.h"

namespace kiln::abi_test {
namespace {

std::string device_plugin() { return std::string(KILN_FAKES_DIR) + "/device/libkiln_fake_device.so"; }

// x -> Relu a -> [Sigmoid s] -> Relu b -> y
std::shared_ptr<ir::Graph> chain(bool portable_between) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 8});
  ir::ValueId a = b.node("Relu", {x}, "a", {4, 8});
  if (portable_between) a = b.node("Sigmoid", {a}, "s", {4, 8});
  b.output(b.node("Relu", {a}, "b", {4, 8}));
  return b.graph();
}

Tensor expected(const Tensor& x, bool portable_between) {
  Tensor y = Tensor::allocate(DType::kFloat32, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = std::max(x.data<float>()[i], 0.f);
    if (portable_between) v = 1.f / (1.f + std::exp(-v));
    y.data<float>()[i] = std::max(v, 0.f);
  }
  return y;
}

runtime::BackendInstance& device_instance(const runtime::Program& p) {
  for (const runtime::Step& s : p.steps())
    if (auto* k = dynamic_cast<const runtime::PartitionKernel*>(s.kernel.get())) return k->compiled().instance();
  ADD_FAILURE() << "no partition";
  std::abort();
}

int64_t counter(const runtime::Program& p, const std::string& key) {
  Result<std::string> v = device_instance(p).get_property(key);
  EXPECT_TRUE(v.ok()) << v.status().to_string();
  return v.ok() ? std::stoll(*v) : -1;
}

struct Built {
  std::shared_ptr<BackendRegistry> reg;
  std::unique_ptr<runtime::Program> program;
};

Built build_device(bool portable_between, bool async, bool fail = false) {
  Built b;
  b.reg = registry_of({device_plugin()});
  std::vector<BackendOption> options;
  if (async) options.push_back({"fake_device", "async", "true"});
  if (fail) options.push_back({"fake_device", "fail_async", "true"});
  auto p = build(chain(portable_between), b.reg.get(), {"fake_device"}, options);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  if (p.ok()) b.program = std::move(*p);
  return b;
}

Result<std::vector<Value>> run_once(const runtime::Program& p, const Tensor& x, RunProfile* profile = nullptr) {
  std::vector<Value> in{Value(x)};
  return p.run(in, {}, nullptr, profile);
}

void expect_chain_counts(bool async) {
  Built b = build_device(/*portable_between=*/false, async);
  ASSERT_TRUE(b.program);
  ASSERT_EQ(b.program->placement().partitions.size(), 2u);
  ASSERT_NE(b.program->device_plan(), nullptr);
  const Tensor x = random_tensor({4, 8}, 7);
  for (int run = 1; run <= 3; ++run) {
    auto out = run_once(*b.program, x);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    expect_close((*out)[0].tensor(), expected(x, false));
    // One copy in (x), none between the partitions, one out (y), per run.
    EXPECT_EQ(counter(*b.program, "copies_in"), run);
    EXPECT_EQ(counter(*b.program, "copies_out"), run);
    EXPECT_EQ(counter(*b.program, "executions"), 2 * run);
    EXPECT_EQ(counter(*b.program, "workspace_ok"), 2 * run);
    // x dies at a and a's output at b: both outputs reuse their input's buffer.
    EXPECT_EQ(counter(*b.program, "inplace"), 2 * run);
    EXPECT_EQ(counter(*b.program, "bad_uses"), 0);
  }
  // Buffers come from the first run: x's device copy (a's and b's outputs in
  // place), y's pinned copy, two device workspaces.
  EXPECT_EQ(counter(*b.program, "allocs"), 4);
  EXPECT_EQ(counter(*b.program, "live_blocks"), 4);
}

TEST(DeviceMemoryTest, AChainOfPartitionsKeepsDataOnTheDevice) { expect_chain_counts(/*async=*/false); }

TEST(DeviceMemoryTest, AnAsyncChainKeepsDataOnTheDevice) { expect_chain_counts(/*async=*/true); }

TEST(DeviceMemoryTest, APortableNodeBetweenPartitionsIsStagedThroughPinnedMemory) {
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    Built b = build_device(/*portable_between=*/true, async);
    ASSERT_TRUE(b.program);
    const Tensor x = random_tensor({4, 8}, 11);
    for (int run = 1; run <= 2; ++run) {
      auto out = run_once(*b.program, x);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      expect_close((*out)[0].tensor(), expected(x, true));
      // x in, a's output out to Sigmoid, Sigmoid's output in, y out.
      EXPECT_EQ(counter(*b.program, "copies_in"), 2 * run);
      EXPECT_EQ(counter(*b.program, "copies_out"), 2 * run);
      EXPECT_EQ(counter(*b.program, "bad_uses"), 0);
    }
    const int64_t allocs = counter(*b.program, "allocs");
    ASSERT_TRUE(run_once(*b.program, x).ok());
    EXPECT_EQ(counter(*b.program, "allocs"), allocs) << "a run after the first allocated device memory";
  }
}

TEST(DeviceMemoryTest, AsyncErrorsBecomeTheRunsErrorNamingThePlugin) {
  Built b = build_device(/*portable_between=*/false, /*async=*/true, /*fail=*/true);
  ASSERT_TRUE(b.program);
  const Tensor x = random_tensor({4, 8}, 3);
  for (int run = 0; run < 2; ++run) {  // the run state is clean again after a failure
    auto out = run_once(*b.program, x);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInternal);
    EXPECT_NE(out.status().message().find("backend 'fake_device'"), std::string::npos) << out.status().message();
    EXPECT_NE(out.status().message().find("the fake device failed"), std::string::npos) << out.status().message();
  }
}

TEST(DeviceMemoryTest, PluginTraceSlicesLandInTheProfileOnTheirOwnTrack) {
  Built b = build_device(/*portable_between=*/false, /*async=*/true);
  ASSERT_TRUE(b.program);
  const Tensor x = random_tensor({4, 8}, 5);
  RunProfile profile;
  ASSERT_TRUE(run_once(*b.program, x, &profile).ok());
  ASSERT_EQ(profile.plugin_events.size(), 2u);  // one per execution
  for (const NodeEvent& e : profile.plugin_events) {
    EXPECT_EQ(e.name, "relu");
    EXPECT_EQ(e.op_type, "fake_device / 0");
    EXPECT_GE(e.duration_ns, 0);
  }
  // Not traced: nothing recorded.
  RunProfile* none = nullptr;
  ASSERT_TRUE(run_once(*b.program, x, none).ok());
  ASSERT_TRUE(run_once(*b.program, x, &profile).ok());
  EXPECT_EQ(profile.plugin_events.size(), 2u);
}

TEST(DeviceMemoryTest, APluginWithoutDeviceDeclarationsRunsAsBefore) {
  auto reg = registry_of({fake("minimal"), template_plugin()});
  for (const char* name : {"minimal"}) {
    auto p = build(chain(true), reg.get(), {name});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ((*p)->device_plan(), nullptr);
    const Tensor x = random_tensor({4, 8}, 9);
    auto out = run_once(**p, x);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    expect_close((*out)[0].tensor(), expected(x, true));
  }
}

TEST(DeviceMemoryTest, CancellingStopsAnAsyncPartitionOnThePluginsThread) {
  auto reg = registry_of({device_plugin()});
  auto p = build(chain(false), reg.get(), {"fake_device"},
                 {{"fake_device", "async", "true"}, {"fake_device", "slow_ms", "60000"}});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::atomic<bool> cancel{false};
  RunOptions options;
  options.cancel = &cancel;
  const Tensor x = random_tensor({4, 8}, 1);
  std::optional<Result<std::vector<Value>>> result;
  std::thread runner([&] {
    std::vector<Value> in{Value(x)};
    result.emplace((*p)->run(in, {}, nullptr, nullptr, &options));
  });
  // Both executions are queued (the worker polls for a minute); then cancel.
  while (counter(**p, "executions") < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  cancel = true;
  runner.join();
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(result->ok());
  EXPECT_EQ(result->status().code(), StatusCode::kCancelled);
  EXPECT_NE(result->status().message().find("backend 'fake_device'"), std::string::npos) << result->status().message();
  EXPECT_NE(result->status().message().find("the run was cancelled"), std::string::npos) << result->status().message();
}

// A 1.0 plugin binary (the frozen template) next to the device plugin: its
// partition sees host memory only, the device plugin's edges to it go through
// one copy each way, and the results match portable kernels.
TEST(DeviceMemoryTest, AOneZeroPluginBesideADevicePluginGetsHostMemory) {
  auto reg = registry_of({device_plugin(), KILN_TEMPLATE_V1_0_PLUGIN});
  ASSERT_TRUE(reg->errors().empty()) << reg->errors().at(0).message;
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    // x -> Relu (device) -> MatMul + Add (1.0 template) -> Relu (device) -> y
    GraphBuilder b;
    ir::ValueId x = b.input("x", {3, 4});
    ir::ValueId w = b.constant("w", random_tensor({4, 5}, 7));
    ir::ValueId c = b.constant("c", random_tensor({5}, 8));
    ir::ValueId r0 = b.node("Relu", {x}, "r0", {3, 4});
    ir::ValueId m = b.node("MatMul", {r0, w}, "m", {3, 5});
    ir::ValueId a = b.node("Add", {m, c}, "a", {3, 5});
    b.output(b.node("Relu", {a}, "r1", {3, 5}));
    std::vector<BackendOption> options;
    if (async) options.push_back({"fake_device", "async", "true"});
    auto mixed = build(b.graph(), reg.get(), {"fake_device", "template"}, options, FallbackPolicy::kRequire);
    ASSERT_TRUE(mixed.ok()) << mixed.status().to_string();
    ASSERT_EQ((*mixed)->placement().partitions.size(), 3u);
    ASSERT_NE((*mixed)->device_plan(), nullptr);
    for (const runtime::Step& s : (*mixed)->steps()) {
      auto* k = dynamic_cast<const runtime::PartitionKernel*>(s.kernel.get());
      ASSERT_NE(k, nullptr);
      if (k->compiled().instance().name() == "template") {
        EXPECT_FALSE(k->compiled().device().uses_device_memory());
      }
    }
    auto portable = build(b.graph(), nullptr, {});
    ASSERT_TRUE(portable.ok());
    std::vector<Value> in{Value(random_tensor({3, 4}, 9))};
    for (int run = 1; run <= 2; ++run) {
      auto got = (*mixed)->run(in, {}, nullptr);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      auto want = (*portable)->run(in, {}, nullptr);
      ASSERT_TRUE(want.ok());
      expect_close(got.value()[0].tensor(), want.value()[0].tensor());
      // x in and r0 out to the template; a in and y out.
      EXPECT_EQ(counter(**mixed, "copies_in"), 2 * run);
      EXPECT_EQ(counter(**mixed, "copies_out"), 2 * run);
      EXPECT_EQ(counter(**mixed, "bad_uses"), 0);
    }
  }
}

// Two device plugins: an edge between them leaves A through pinned memory and
// enters B with one copy each; B's async work waits for A's copy on B's own
// queue (instance_stream_wait), a synchronous B on the host.
TEST(DeviceMemoryTest, AnEdgeBetweenTwoDevicesIsStagedOnceEachWay) {
  auto reg = registry_of({device_plugin(), std::string(KILN_FAKES_DIR) + "/device/libkiln_fake_device_b.so"});
  ASSERT_TRUE(reg->errors().empty()) << reg->errors().at(0).message;
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    GraphBuilder b;
    ir::ValueId x = b.input("x", {4, 8});
    ir::ValueId a = b.node("Relu", {x}, "a0", {4, 8});
    b.output(b.node("Relu", {a}, "b0", {4, 8}));
    std::vector<BackendOption> options{{"fake_device", "claim", "a"}, {"fake_device_b", "claim", "b"}};
    if (async) {
      options.push_back({"fake_device", "async", "true"});
      options.push_back({"fake_device_b", "async", "true"});
    }
    auto p = build(b.graph(), reg.get(), {"fake_device", "fake_device_b"}, options, FallbackPolicy::kRequire);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_EQ((*p)->placement().partitions.size(), 2u);
    runtime::BackendInstance* inst[2] = {nullptr, nullptr};
    for (const runtime::Step& s : (*p)->steps())
      if (auto* k = dynamic_cast<const runtime::PartitionKernel*>(s.kernel.get()))
        inst[k->compiled().instance().name() == "fake_device" ? 0 : 1] = &k->compiled().instance();
    ASSERT_TRUE(inst[0] && inst[1]);
    auto count = [&](int i, const char* key) { return std::stoll(inst[i]->get_property(key).value()); };
    const Tensor xv = random_tensor({4, 8}, 21);
    for (int run = 1; run <= 2; ++run) {
      auto out = run_once(**p, xv);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      expect_close((*out)[0].tensor(), expected(xv, false));
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(count(i, "copies_in"), run) << i;
        EXPECT_EQ(count(i, "copies_out"), run) << i;
        EXPECT_EQ(count(i, "bad_uses"), 0) << i;
      }
      EXPECT_EQ(count(0, "stream_waits"), 0);
      EXPECT_EQ(count(1, "stream_waits"), async ? run : 0);
    }
  }
}

// --- what a handle declares ------------------------------------------------------

kiln_backend_api_t full_api() {
  kiln_backend_api_t a{};
  a.header.struct_size = sizeof(a);
  a.instance_alloc = [](kiln_instance_t*, int32_t, uint32_t, size_t, size_t, void**) -> kiln_status_t* { return nullptr; };
  a.instance_free = [](kiln_instance_t*, int32_t, void*) {};
  a.instance_copy = [](kiln_instance_t*, const kiln_copy_t*, size_t, kiln_fence_t*, uint64_t) -> kiln_status_t* {
    return nullptr;
  };
  a.compiled_execute_async = [](kiln_compiled_t*, kiln_exec_context_t*, const kiln_tensor_t* const*, size_t,
                                kiln_fence_t*, uint64_t) -> kiln_status_t* { return nullptr; };
  return a;
}

kiln_compiled_info_t info_of(size_t nin, size_t nout) {
  kiln_compiled_info_t ci{};
  ci.struct_size = sizeof(ci);
  ci.num_inputs = nin;
  ci.num_outputs = nout;
  return ci;
}

std::string error_of(const kiln_compiled_info_t& ci, const kiln_backend_api_t& api) {
  auto r = runtime::read_compiled_device_info(ci, api, "backend 'x'");
  return r.ok() ? "" : r.status().message();
}

TEST(CompiledDeviceInfoTest, ZeroIsTheOneZeroBehaviour) {
  const kiln_backend_api_t api{};  // no 1.1 entries at all
  auto r = runtime::read_compiled_device_info(info_of(2, 1), api, "backend 'x'");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->uses_device_memory());
  EXPECT_FALSE(r->async());
  EXPECT_FALSE(r->has_workspace());
  EXPECT_EQ(r->input_kind(1), KILN_MEMORY_HOST);
  // A 1.0-sized struct: the members past it are not read, whatever they hold.
  kiln_compiled_info_t ci = info_of(1, 1);
  ci.struct_size = offsetof(kiln_compiled_info_t, flags);
  ci.flags = KILN_COMPILED_ASYNC;
  EXPECT_EQ(error_of(ci, api), "");
}

TEST(CompiledDeviceInfoTest, DeclarationsAreCheckedWithOneLineErrors) {
  const kiln_backend_api_t api = full_api();
  const int32_t bad_kinds[2] = {KILN_MEMORY_DEVICE, 9};
  kiln_compiled_info_t ci = info_of(2, 1);
  ci.input_memory_kinds = bad_kinds;
  EXPECT_EQ(error_of(ci, api), "backend 'x': compiled_get_info: input_memory_kinds[1] is 9, not a kiln_memory_kind_t (0..3)");

  const int32_t dev[2] = {KILN_MEMORY_DEVICE, KILN_MEMORY_HOST};
  const size_t out_of_range[2] = {0, 1};
  ci = info_of(2, 1);
  ci.input_memory_kinds = dev;
  ci.output_memory_kinds = dev;
  ci.num_inplace = 1;
  ci.inplace_pairs = out_of_range;
  EXPECT_EQ(error_of(ci, api),
            "backend 'x': compiled_get_info: in-place pair 0 (input 0, output 1) is out of range (2 inputs, 1 outputs)");
  const size_t mixed[2] = {1, 0};  // a host input with a device output
  ci.inplace_pairs = mixed;
  EXPECT_NE(error_of(ci, api).find("they must be of one kind"), std::string::npos);
  ci.inplace_pairs = nullptr;
  EXPECT_EQ(error_of(ci, api), "backend 'x': compiled_get_info: num_inplace is 1 but inplace_pairs is NULL");

  ci = info_of(1, 1);
  ci.num_owned_constants = 2;
  EXPECT_EQ(error_of(ci, api), "backend 'x': compiled_get_info: num_owned_constants is 2 but owned_constants is NULL");

  // Device kinds and async need their entries.
  const kiln_backend_api_t bare{};
  ci = info_of(2, 1);
  ci.input_memory_kinds = dev;
  EXPECT_NE(error_of(ci, bare).find("declares non-host memory but the plugin has no instance_alloc"), std::string::npos);
  ci = info_of(1, 1);
  ci.workspace_bytes[KILN_MEMORY_DEVICE] = 64;
  EXPECT_NE(error_of(ci, bare).find("declares non-host memory"), std::string::npos);
  ci = info_of(1, 1);
  ci.flags = KILN_COMPILED_ASYNC;
  EXPECT_EQ(error_of(ci, bare),
            "backend 'x': compiled_get_info declares KILN_COMPILED_ASYNC but the plugin has no compiled_execute_async");
  EXPECT_EQ(error_of(ci, api), "");
}

}  // namespace
}  // namespace kiln::abi_test
