// The simdev plugin through its C ABI (a test host, no runtime planning):
// device info, alloc/copy/free with kinds checked, out of memory, the guard
// (a host read of device memory dies), fences, in-order asynchronous work,
// stream waits, cancellation, errors through fences, shared constants,
// in-place pairs, the workspace and trace events.
#include <csignal>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <tuple>

#include "simdev_harness.h"

namespace kiln::simdev_test {
namespace {

using abi_test::GraphBuilder;

// y = Relu(x @ W + B) with x [2, 3], W [3, 4], B [4].
struct Mlp {
  std::vector<float> w = {1, -2, 3, 0.5f, -1, 2, 0, 1, 0.25f, -0.5f, 1, -3};
  std::vector<float> b = {0.5f, -1, 0, 2};
  std::shared_ptr<ir::Graph> graph() const {
    GraphBuilder g;
    ir::ValueId x = g.input("x", {2, 3});
    ir::ValueId W = g.constant("W", Tensor::from_vector(w, Shape({3, 4})));
    ir::ValueId B = g.constant("B", Tensor::from_vector(b, Shape({4})));
    ir::ValueId m = g.node("MatMul", {x, W}, "mm", {2, 4});
    ir::ValueId a = g.node("Add", {m, B}, "add", {2, 4});
    g.output(g.node("Relu", {a}, "relu", {2, 4}));
    return g.graph();
  }
  std::vector<float> expect(const std::vector<float>& x) const {
    std::vector<float> y(8);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j) {
        float s = b[static_cast<size_t>(j)];
        for (int k = 0; k < 3; ++k) s += x[static_cast<size_t>(i * 3 + k)] * w[static_cast<size_t>(k * 4 + j)];
        y[static_cast<size_t>(i * 4 + j)] = s > 0 ? s : 0;
      }
    return y;
  }
};

const std::vector<float> kX = {1, 2, 3, -1, 0.5f, 4};
const std::vector<int64_t> kXDims = {2, 3};

TEST(SimdevPlugin, DeclaresADeviceWithMetadataAndSharedInstances) {
  Harness h;
  kiln_plugin_info_t info;
  std::memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  ASSERT_EQ(take(h.api().plugin_get_info(h.plugin(), &info)), "");
  EXPECT_STREQ(info.name, "simdev");
  EXPECT_EQ(info.priority, 0);  // used only when named
  EXPECT_TRUE(info.flags & KILN_PLUGIN_SHARED_INSTANCES);
  kiln_device_info_t d;
  std::memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  ASSERT_EQ(take(h.api().plugin_get_device_info(h.plugin(), 0, &d)), "");
  EXPECT_EQ(d.kind, KILN_DEVICE_GPU);
  EXPECT_NE(d.vendor_id, 0u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d.uuid), 16), "kiln-simdev-0000");
  EXPECT_EQ(d.memory_bytes, 256ull << 20);
  EXPECT_STREQ(d.driver_version, "simdev 1.1.0");
  for (auto* fn : {reinterpret_cast<void*>(h.api().instance_alloc), reinterpret_cast<void*>(h.api().instance_copy),
                   reinterpret_cast<void*>(h.api().instance_stream_wait),
                   reinterpret_cast<void*>(h.api().compiled_execute_async)})
    EXPECT_NE(fn, nullptr);
}

TEST(SimdevPlugin, CopiesMoveBytesBetweenHostPinnedAndDeviceAndAreCounted) {
  Harness h;
  kiln_instance_t* inst = h.instance();
  std::vector<float> src = {1, 2, 3, 4, 5, 6, 7, 8};
  void* d1 = h.upload(inst, src);
  void* d2 = h.alloc(inst, KILN_MEMORY_DEVICE, 32);
  void* pinned = h.alloc(inst, KILN_MEMORY_HOST_PINNED, 32);
  kiln_copy_t batch[2] = {{sizeof(kiln_copy_t), d1, KILN_MEMORY_DEVICE, 0, d2, KILN_MEMORY_DEVICE, 0, 32},
                          {sizeof(kiln_copy_t), d2, KILN_MEMORY_DEVICE, 0, pinned, KILN_MEMORY_HOST_PINNED, 0, 32}};
  ASSERT_EQ(take(h.api().instance_copy(inst, batch, 2, nullptr, 0)), "");  // in order within the batch
  EXPECT_EQ(std::vector<float>(static_cast<float*>(pinned), static_cast<float*>(pinned) + 8), src);
  EXPECT_EQ(h.download(inst, d2, 8), src);
  EXPECT_EQ(h.counter(inst, "copies_to_device"), 1);
  EXPECT_EQ(h.counter(inst, "copies_on_device"), 1);
  EXPECT_EQ(h.counter(inst, "copies_from_device"), 2);
  EXPECT_EQ(h.counter(inst, "copies"), 4);
  EXPECT_EQ(h.counter(inst, "copy_bytes"), 4 * 32);
  EXPECT_GT(h.counter(inst, "pinned_used_bytes"), 0);
  h.api().instance_free(inst, KILN_MEMORY_HOST_PINNED, pinned);
  EXPECT_EQ(h.counter(inst, "pinned_used_bytes"), 0);
}

TEST(SimdevPlugin, PointersOfTheWrongKindAreRefused) {
  Harness h;
  kiln_instance_t* inst = h.instance();
  void* dev = h.alloc(inst, KILN_MEMORY_DEVICE, 64);
  std::vector<float> host(16);
  int32_t code = 0;
  kiln_copy_t lie{sizeof(kiln_copy_t), host.data(), KILN_MEMORY_DEVICE, 0, dev, KILN_MEMORY_DEVICE, 0, 64};
  EXPECT_NE(take(h.api().instance_copy(inst, &lie, 1, nullptr, 0), &code), "");
  EXPECT_EQ(code, KILN_STATUS_INVALID_ARGUMENT);
  kiln_copy_t as_host{sizeof(kiln_copy_t), dev, KILN_MEMORY_HOST, 0, host.data(), KILN_MEMORY_HOST, 0, 64};
  EXPECT_NE(take(h.api().instance_copy(inst, &as_host, 1, nullptr, 0), &code), "");
  EXPECT_EQ(code, KILN_STATUS_INVALID_ARGUMENT);
  kiln_copy_t past_end{sizeof(kiln_copy_t), host.data(), KILN_MEMORY_HOST, 0, dev, KILN_MEMORY_DEVICE, 0, 65};
  EXPECT_NE(take(h.api().instance_copy(inst, &past_end, 1, nullptr, 0), &code), "");
  void* p = nullptr;
  take(h.api().instance_alloc(inst, KILN_MEMORY_HOST, 0, 64, 0, &p), &code);
  EXPECT_EQ(code, KILN_STATUS_INVALID_ARGUMENT);
  take(h.api().instance_alloc(inst, KILN_MEMORY_DEVICE_HOST_VISIBLE, 0, 64, 0, &p), &code);
  EXPECT_EQ(code, KILN_STATUS_UNIMPLEMENTED);
  take(h.api().instance_alloc(inst, KILN_MEMORY_DEVICE, 1, 64, 0, &p), &code);
  EXPECT_EQ(code, KILN_STATUS_OUT_OF_RANGE);
  EXPECT_EQ(h.counter(inst, "copies"), 0);  // nothing was queued
}

TEST(SimdevPlugin, AllocationsBeyondTheCapacityAreResourceExhausted) {
  Harness h;
  kiln_instance_t* inst = h.instance({{"memory_bytes", "65536"}});
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(take(h.api().instance_alloc(inst, KILN_MEMORY_DEVICE, 0, 40000, 0, &a)), "");
  int32_t code = 0;
  std::string why = take(h.api().instance_alloc(inst, KILN_MEMORY_DEVICE, 0, 40000, 0, &b), &code);
  EXPECT_EQ(code, KILN_STATUS_RESOURCE_EXHAUSTED) << why;
  EXPECT_NE(why.find("out of device memory"), std::string::npos) << why;
  h.api().instance_free(inst, KILN_MEMORY_DEVICE, a);
  ASSERT_EQ(take(h.api().instance_alloc(inst, KILN_MEMORY_DEVICE, 0, 40000, 0, &b)), "");  // freed room is reused
  h.api().instance_free(inst, KILN_MEMORY_DEVICE, b);
  EXPECT_EQ(h.counter(inst, "device_used_bytes"), 0);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMDEV_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SIMDEV_TEST_ASAN 1
#endif

TEST(SimdevPluginDeathTest, AHostReadOfDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
#ifdef SIMDEV_TEST_ASAN
  // ASan reports the fault (SEGV on unknown address) and exits.
  auto faulted = [](int status) { return WIFEXITED(status) && WEXITSTATUS(status) != 0; };
  const char* report = "SEGV";
#else
  auto faulted = testing::KilledBySignal(SIGSEGV);
  const char* report = "";
#endif
  EXPECT_EXIT(
      {
        Harness h;
        kiln_instance_t* inst = h.instance();
        const volatile float* dev = static_cast<const float*>(h.upload(inst, {1, 2, 3, 4}));
        std::fprintf(stderr, "read %f\n", static_cast<double>(dev[0]));  // the host must never do this
        std::exit(0);
      },
      faulted, report);
}

TEST(SimdevPlugin, WithoutTheGuardDeviceMemoryIsPlainMemory) {
  // The control for the death test: the same read succeeds with guard=false,
  // so it is the guard (PROT_NONE) that makes the read fault.
  Harness h;
  kiln_instance_t* inst = h.instance({{"guard", "false"}});
  const float* dev = static_cast<const float*>(h.upload(inst, {1, 2, 3, 4}));
  EXPECT_EQ(dev[2], 3.f);
}

TEST(SimdevPlugin, DeclaresDeviceKindsAsyncOwnedConstantsAndInPlace) {
  Harness h;
  kiln_instance_t* inst = h.instance();
  kiln_compiled_info_t info = h.info(h.compile(inst, *Mlp().graph()));
  EXPECT_EQ(info.num_inputs, 1u);
  EXPECT_EQ(info.num_outputs, 1u);
  EXPECT_EQ(info.flags & KILN_COMPILED_ASYNC, uint32_t{KILN_COMPILED_ASYNC});
  ASSERT_NE(info.input_memory_kinds, nullptr);
  ASSERT_NE(info.output_memory_kinds, nullptr);
  EXPECT_EQ(info.input_memory_kinds[0], KILN_MEMORY_DEVICE);
  EXPECT_EQ(info.output_memory_kinds[0], KILN_MEMORY_DEVICE);
  ASSERT_EQ(info.num_owned_constants, 2u);
  EXPECT_STREQ(info.owned_constants[0], "W");
  EXPECT_STREQ(info.owned_constants[1], "B");
  EXPECT_EQ(info.num_inplace, 0u);  // x feeds MatMul, whose output has another shape

  GraphBuilder g;  // a lone Relu: its output may take its input's buffer
  g.output(g.node("Relu", {g.input("x", {2, 3})}, "relu", {2, 3}));
  kiln_compiled_info_t relu = h.info(h.compile(inst, *g.graph()));
  ASSERT_EQ(relu.num_inplace, 1u);
  EXPECT_EQ(relu.inplace_pairs[0], 0u);
  EXPECT_EQ(relu.inplace_pairs[1], 0u);
  kiln_instance_t* sync = h.instance({{"async", "false"}});
  EXPECT_EQ(h.info(h.compile(sync, *Mlp().graph())).flags & KILN_COMPILED_ASYNC, 0u);
}

TEST(SimdevPlugin, AsyncExecuteOnDeviceMemorySignalsItsFence) {
  Harness h;
  kiln_instance_t* inst = h.instance();
  Mlp mlp;
  kiln_compiled_t* c = h.compile(inst, *mlp.graph());
  void* x = h.upload(inst, kX);
  kiln_tensor_t in = view(x, kXDims, KILN_MEMORY_DEVICE);
  const kiln_tensor_t* ins[] = {&in};
  TestCtx ctx;
  ctx.harness = &h;
  ctx.instance = inst;
  ctx.trace = true;
  TestFence fence;
  ASSERT_EQ(take(h.api().compiled_execute_async(c, ctx.c(), ins, 1, fence.c(), 3)), "");
  ASSERT_EQ(ctx.outputs.size(), 1u);  // obtained before the call returned
  EXPECT_EQ(Harness::wait(fence, 3), "");
  EXPECT_EQ(fence.signals, 1);
  EXPECT_EQ(h.download(inst, ctx.outputs[0], 8), mlp.expect(kX));
  ASSERT_EQ(ctx.events.size(), 3u);  // one compute slice per op, on track 0
  EXPECT_EQ(ctx.events[0].name, "MatMul 'mm'");
  EXPECT_EQ(ctx.events[2].name, "Relu 'relu'");
  for (const TraceEvent& e : ctx.events) {
    EXPECT_EQ(e.track, 0);
    EXPECT_LE(e.begin_ns, e.end_ns);
  }
  EXPECT_EQ(h.counter(inst, "host_operands"), 0);  // everything stayed on the device
}

TEST(SimdevPlugin, SyncExecuteReadsAndWritesHostMemoryToo) {
  Harness h;
  kiln_instance_t* inst = h.instance();
  Mlp mlp;
  kiln_compiled_t* c = h.compile(inst, *mlp.graph());
  std::vector<float> x = kX;
  kiln_tensor_t in = view(x.data(), kXDims, KILN_MEMORY_HOST);
  const kiln_tensor_t* ins[] = {&in};
  TestCtx ctx;
  ctx.harness = &h;
  ctx.instance = inst;
  ctx.output_kind = KILN_MEMORY_HOST;
  ASSERT_EQ(take(h.api().compiled_execute(c, ctx.c(), ins, 1)), "");
  EXPECT_EQ(ctx.host_outputs[0], mlp.expect(kX));
  EXPECT_EQ(h.counter(inst, "host_operands"), 2);
}

TEST(SimdevPlugin, QueuedWorkRunsInOrderBehindTheFences) {
  // copy in -> execute (slow) -> copy out, waiting only on the last fence.
  Harness h;
  kiln_instance_t* inst = h.instance({{"latency_us", "20000"}});
  Mlp mlp;
  kiln_compiled_t* c = h.compile(inst, *mlp.graph());
  void* x = h.alloc(inst, KILN_MEMORY_DEVICE, kX.size() * 4);
  TestFence fence;
  kiln_copy_t in_copy{sizeof(kiln_copy_t), kX.data(), KILN_MEMORY_HOST, 0, x, KILN_MEMORY_DEVICE, 0, kX.size() * 4};
  ASSERT_EQ(take(h.api().instance_copy(inst, &in_copy, 1, fence.c(), 1)), "");
  kiln_tensor_t in = view(x, kXDims, KILN_MEMORY_DEVICE);
  const kiln_tensor_t* ins[] = {&in};
  TestCtx ctx;
  ctx.harness = &h;
  ctx.instance = inst;
  ASSERT_EQ(take(h.api().compiled_execute_async(c, ctx.c(), ins, 1, fence.c(), 2)), "");
  std::vector<float> y(8, -1.f);
  kiln_copy_t out_copy{sizeof(kiln_copy_t), ctx.outputs[0], KILN_MEMORY_DEVICE, 0, y.data(), KILN_MEMORY_HOST, 0, 32};
  ASSERT_EQ(take(h.api().instance_copy(inst, &out_copy, 1, fence.c(), 3)), "");
  EXPECT_EQ(Harness::wait(fence, 3), "");
  EXPECT_EQ(y, mlp.expect(kX));
  EXPECT_EQ(fence.signals, 3);
}

TEST(SimdevPlugin, StreamWaitHoldsLaterWorkUntilTheFence) {
  Harness h;
  kiln_instance_t* inst = h.instance();
  void* d = h.alloc(inst, KILN_MEMORY_DEVICE, 16);
  std::vector<float> src = {1, 2, 3, 4};
  TestFence gate, done;
  ASSERT_EQ(take(h.api().instance_stream_wait(inst, gate.c(), 1)), "");
  kiln_copy_t cp{sizeof(kiln_copy_t), src.data(), KILN_MEMORY_HOST, 0, d, KILN_MEMORY_DEVICE, 0, 16};
  ASSERT_EQ(take(h.api().instance_copy(inst, &cp, 1, done.c(), 1)), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(Harness::fence_value(done), 0u);  // held back by the gate
  EXPECT_EQ(h.counter(inst, "copies"), 0);
  {  // the gate is the test's own fence: signal it as another device would
    std::lock_guard<std::mutex> lock(gate.mu);
    gate.value = 1;
    gate.cv.notify_all();
  }
  EXPECT_EQ(Harness::wait(done, 1), "");
  EXPECT_EQ(h.download(inst, d, 4), src);
}

TEST(SimdevPlugin, CancellationStopsALongRunBetweenOps) {
  Harness h;
  kiln_instance_t* inst = h.instance({{"latency_us", "300000"}});  // 0.3 s per op, three ops
  kiln_compiled_t* c = h.compile(inst, *Mlp().graph());
  void* x = h.upload(inst, kX);
  kiln_tensor_t in = view(x, kXDims, KILN_MEMORY_DEVICE);
  const kiln_tensor_t* ins[] = {&in};
  TestCtx ctx;
  ctx.harness = &h;
  ctx.instance = inst;
  ctx.trace = true;
  TestFence fence;
  ASSERT_EQ(take(h.api().compiled_execute_async(c, ctx.c(), ins, 1, fence.c(), 1)), "");
  ctx.cancel = true;
  int32_t code = 0;
  std::string why = Harness::wait(fence, 1, &code);
  EXPECT_EQ(code, KILN_STATUS_CANCELLED) << why;
  EXPECT_EQ(fence.signals, 1);
  std::lock_guard<std::mutex> lock(ctx.trace_mu);
  EXPECT_LT(ctx.events.size(), 3u);  // it stopped before the last op
}

TEST(SimdevPlugin, RunErrorsArriveThroughTheFence) {
  Harness h;
  kiln_instance_t* inst = h.instance({{"fail_after", "1"}});
  kiln_compiled_t* c = h.compile(inst, *Mlp().graph());
  void* x = h.upload(inst, kX);
  kiln_tensor_t in = view(x, kXDims, KILN_MEMORY_DEVICE);
  const kiln_tensor_t* ins[] = {&in};
  TestCtx ok_ctx, bad_ctx;
  ok_ctx.harness = bad_ctx.harness = &h;
  ok_ctx.instance = bad_ctx.instance = inst;
  TestFence ok, bad;
  ASSERT_EQ(take(h.api().compiled_execute_async(c, ok_ctx.c(), ins, 1, ok.c(), 1)), "");
  ASSERT_EQ(take(h.api().compiled_execute_async(c, bad_ctx.c(), ins, 1, bad.c(), 1)), "");
  EXPECT_EQ(Harness::wait(ok, 1), "");
  int32_t code = 0;
  std::string why = Harness::wait(bad, 1, &code);
  EXPECT_EQ(code, KILN_STATUS_RESOURCE_EXHAUSTED) << why;
  EXPECT_EQ(bad.signals, 1);
  // Bad inputs fail the call itself: nothing queued, the fence untouched.
  const std::vector<int64_t> wrong_dims = {3, 2, 1};  // the view borrows them
  kiln_tensor_t wrong = view(x, wrong_dims, KILN_MEMORY_DEVICE);
  const kiln_tensor_t* wrongs[] = {&wrong};
  TestFence never;
  EXPECT_NE(take(h.api().compiled_execute_async(c, ok_ctx.c(), wrongs, 1, never.c(), 1), &code), "");
  EXPECT_EQ(code, KILN_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(never.signals, 0);
}

TEST(SimdevPlugin, CompiledHandlesOfOneInstanceShareDeviceConstants) {
  Harness h;
  kiln_instance_t* inst = h.instance();
  kiln_compiled_t* a = h.compile(inst, *Mlp().graph());
  EXPECT_EQ(h.counter(inst, "device_constants"), 2);
  const int64_t used = h.counter(inst, "device_used_bytes");
  kiln_compiled_t* b = h.compile(inst, *Mlp().graph());  // a second session's copy of the model
  EXPECT_EQ(h.counter(inst, "device_constants"), 2);
  EXPECT_EQ(h.counter(inst, "constant_uploads"), 2);
  EXPECT_EQ(h.counter(inst, "constant_reuses"), 2);
  EXPECT_EQ(h.counter(inst, "device_used_bytes"), used);
  h.release(a);
  EXPECT_EQ(h.counter(inst, "device_constants"), 2);  // b still holds them
  h.release(b);
  EXPECT_EQ(h.counter(inst, "device_constants"), 0);
  EXPECT_EQ(h.counter(inst, "device_used_bytes"), 0);
}

// An Mlp compiled on a simdev instance whose executions take `latency_us`
// and copies `copy_latency_us`, its input uploaded, 64 more device bytes.
struct ExecSetup {
  Harness h;
  kiln_instance_t* inst;
  Mlp mlp;
  kiln_compiled_t* c;
  void* other;
  kiln_tensor_t in;
  TestCtx ctx;
  ExecSetup(const char* latency_us, const char* copy_latency_us)
      : inst(h.instance({{"latency_us", latency_us}, {"copy_latency_us", copy_latency_us}})),
        c(h.compile(inst, *mlp.graph())),
        other(h.alloc(inst, KILN_MEMORY_DEVICE, 64)),
        in(view(h.upload(inst, kX), kXDims, KILN_MEMORY_DEVICE)) {
    ctx.harness = &h;
    ctx.instance = inst;
  }
  // Queues the execution behind `fence` at `value`.
  std::string execute(TestFence& fence, uint64_t value) {
    const kiln_tensor_t* ins[] = {&in};
    return take(h.api().compiled_execute_async(c, ctx.c(), ins, 1, fence.c(), value));
  }
};

// Work on one fence completes its values in order even when the engines
// finish it out of order: a copy queued after a long execution and
// independent of it ends first, yet signalling its value would tell the host
// that the execution (a lower value) is done too, and the host would free
// the execution's context under it (ASan caught exec_should_cancel reading a
// freed context that way).
TEST(SimdevPlugin, OneFenceIsSignalledInQueueOrder) {
  ExecSetup e("50000", "1000");
  TestFence timeline;
  ASSERT_EQ(e.execute(timeline, 1), "");
  std::vector<float> src(16, 1.f);
  kiln_copy_t cp{sizeof(kiln_copy_t), src.data(), KILN_MEMORY_HOST, 0, e.other, KILN_MEMORY_DEVICE, 0, 64};
  ASSERT_EQ(take(e.h.api().instance_copy(e.inst, &cp, 1, timeline.c(), 2)), "");
  EXPECT_EQ(Harness::wait(timeline, 2), "");
  std::lock_guard<std::mutex> lock(timeline.mu);
  EXPECT_EQ(timeline.order, (std::vector<uint64_t>{1, 2}));
}

TEST(SimdevPlugin, ACopyOverlapsAnExecutionThatLeavesItsBytesAlone) {
  ExecSetup setup("100000", "50000");
  Harness& h = setup.h;
  kiln_instance_t* inst = setup.inst;
  Mlp& mlp = setup.mlp;
  void* other = setup.other;
  TestCtx& ctx = setup.ctx;
  ctx.trace = true;
  TestFence exec, independent, dependent;
  ASSERT_EQ(setup.execute(exec, 1), "");
  std::vector<float> src(16, 1.f), y(8, -1.f);
  kiln_copy_t cp{sizeof(kiln_copy_t), src.data(), KILN_MEMORY_HOST, 0, other, KILN_MEMORY_DEVICE, 0, 64};
  ASSERT_EQ(take(h.api().instance_copy(inst, &cp, 1, independent.c(), 1)), "");
  kiln_copy_t out{sizeof(kiln_copy_t), ctx.outputs[0], KILN_MEMORY_DEVICE, 0, y.data(), KILN_MEMORY_HOST, 0, 32};
  ASSERT_EQ(take(h.api().instance_copy(inst, &out, 1, dependent.c(), 1)), "");
  EXPECT_EQ(Harness::wait(independent, 1), "");
  EXPECT_EQ(Harness::wait(dependent, 1), "");
  EXPECT_EQ(y, mlp.expect(kX));  // the dependent copy waited for the execution
  // The plugin's timeline: the independent copy ran during the execution.
  std::istringstream lines(h.property(inst, "timeline"));
  std::string engine, name;
  uint64_t b = 0, e = 0;
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> jobs;
  while (lines >> engine >> b >> e && std::getline(lines, name)) jobs.emplace_back(engine, b, e);
  ASSERT_EQ(jobs.size(), 4u);  // upload, execute, two copies
  uint64_t exec_begin = 0, exec_end = 0;
  for (auto& [eng, jb, je] : jobs)
    if (eng == "compute") exec_begin = jb, exec_end = je;
  int overlapping = 0, after = 0;  // (the engines start on their own: the copy may begin first)
  for (auto& [eng, jb, je] : jobs) {
    if (eng != "copy") continue;
    if (jb >= exec_end) ++after;
    else if (jb < exec_end && exec_begin < je) ++overlapping;
  }
  EXPECT_EQ(overlapping, 1);
  EXPECT_EQ(after, 1);
  // The run's trace: three compute slices on track 0 and, on track 1, the
  // copy that ran while they did (the dependent one ran after the run).
  EXPECT_EQ(Harness::wait(exec, 1), "");
  std::vector<TraceEvent> compute, copies;
  for (const TraceEvent& ev : ctx.events) (ev.track == 0 ? compute : copies).push_back(ev);
  ASSERT_EQ(compute.size(), 3u);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].name.rfind("copy x1 (1 in", 0), 0u) << copies[0].name;
  EXPECT_LT(copies[0].begin_ns, compute.back().end_ns);  // the slices intersect
  EXPECT_LT(compute.front().begin_ns, copies[0].end_ns);
}

}  // namespace
}  // namespace kiln::simdev_test
