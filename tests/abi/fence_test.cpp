// Host-owned timeline fences (kiln_fence_t, ABI 1.1) through the host table:
// values only grow, waiters wake, errors reach the failed value and those
// above it, timeouts report DEADLINE_EXCEEDED, and many threads may signal
// and wait at once. Also the other 1.1 host entries that need no plugin:
// exec_workspace, exec_trace_enabled / exec_trace_event, trace_now_ns.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backends/fence.h"
#include "runtime/backends/host.h"

namespace kiln::runtime {
namespace {

const kiln_host_api_t& api() { return *host_api(); }

TEST(FenceTest, ValuesOnlyGrow) {
  kiln_fence f;
  EXPECT_EQ(api().fence_value(&f), 0u);
  EXPECT_EQ(api().fence_value(nullptr), 0u);
  api().fence_signal(&f, 3, nullptr);
  EXPECT_EQ(api().fence_value(&f), 3u);
  api().fence_signal(&f, 2, nullptr);  // below the current value: ignored
  EXPECT_EQ(api().fence_value(&f), 3u);
  EXPECT_EQ(api().fence_wait(&f, 1, 0), nullptr);
  EXPECT_EQ(api().fence_wait(&f, 3, 0), nullptr);
}

TEST(FenceTest, WaitTimesOutWithDeadlineExceeded) {
  kiln_fence f;
  api().fence_signal(&f, 1, nullptr);
  Status st = take_status(api().fence_wait(&f, 2, 1000000));  // 1 ms
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("waiting for value 2 (the fence is at 1)"), std::string::npos) << st.message();
  Status null_fence = take_status(api().fence_wait(nullptr, 1, 0));
  EXPECT_EQ(null_fence.code(), StatusCode::kInvalidArgument);
}

TEST(FenceTest, ErrorsReachTheFailedValueAndAbove) {
  kiln_fence f;
  api().fence_signal(&f, 1, nullptr);
  api().fence_signal(&f, 2, api().status_create(KILN_STATUS_RESOURCE_EXHAUSTED, "device full"));
  api().fence_signal(&f, 3, nullptr);
  EXPECT_EQ(api().fence_value(&f), 3u);
  EXPECT_EQ(api().fence_wait(&f, 1, UINT64_MAX), nullptr);
  for (uint64_t v : {2u, 3u}) {
    Status st = take_status(api().fence_wait(&f, v, UINT64_MAX));
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << v;
    EXPECT_EQ(st.message(), "device full");
  }
  // A second error keeps the first.
  api().fence_signal(&f, 4, api().status_create(KILN_STATUS_INTERNAL, "later"));
  EXPECT_EQ(take_status(api().fence_wait(&f, 4, 0)).message(), "device full");
  EXPECT_TRUE(f.failed());
  // A status signalled on a NULL fence is still taken (no leak under ASan).
  api().fence_signal(nullptr, 1, api().status_create(KILN_STATUS_INTERNAL, "nowhere"));
}

TEST(FenceTest, WaitersOnManyThreadsWakeInOrder) {
  kiln_fence f;
  constexpr int kWaiters = 8;
  constexpr uint64_t kSteps = 200;
  std::atomic<int> bad{0};
  std::vector<std::thread> waiters;
  for (int w = 0; w < kWaiters; ++w) {
    waiters.emplace_back([&, w] {
      for (uint64_t v = 1 + static_cast<uint64_t>(w) % 3; v <= kSteps; v += 3) {
        kiln_status_t* st = api().fence_wait(&f, v, UINT64_MAX);
        if (st || api().fence_value(&f) < v) bad.fetch_add(1);
        api().status_release(st);
      }
    });
  }
  // Two signalling threads race over the same timeline; the value stays monotonic.
  std::thread even([&] {
    for (uint64_t v = 2; v <= kSteps; v += 2) api().fence_signal(&f, v, nullptr);
  });
  std::thread odd([&] {
    for (uint64_t v = 1; v <= kSteps; v += 2) api().fence_signal(&f, v, nullptr);
  });
  even.join();
  odd.join();
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(api().fence_value(&f), kSteps);
}

TEST(FenceTest, SignalFromAnotherThreadAfterTheCallReturned) {
  kiln_fence f;
  const uint64_t v = f.next_value();
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(f.last_issued(), 1u);
  std::thread worker([&] { api().fence_signal(&f, v, api().status_create(KILN_STATUS_CANCELLED, "stopped")); });
  Status st = f.wait(v);
  worker.join();
  EXPECT_EQ(st.code(), StatusCode::kCancelled);
}

struct RecordingTrace final : TraceSink {
  std::vector<std::string> names;
  std::vector<int32_t> tracks;
  void event(const char* name, int32_t track, uint64_t begin_ns, uint64_t end_ns) override {
    names.push_back(name);
    tracks.push_back(track);
    EXPECT_LE(begin_ns, end_ns);
  }
};

TEST(ExecContextTest, WorkspaceAndTraceEntries) {
  kiln_exec_context ctx;
  size_t size = 7;
  EXPECT_EQ(api().exec_workspace(&ctx, KILN_MEMORY_HOST, &size), nullptr);
  EXPECT_EQ(size, 0u);
  alignas(64) static uint8_t scratch[256];
  ctx.workspace[KILN_MEMORY_DEVICE] = scratch;
  ctx.workspace_bytes[KILN_MEMORY_DEVICE] = sizeof(scratch);
  EXPECT_EQ(api().exec_workspace(&ctx, KILN_MEMORY_DEVICE, &size), scratch);
  EXPECT_EQ(size, sizeof(scratch));
  EXPECT_EQ(api().exec_workspace(&ctx, KILN_MEMORY_KIND_COUNT, &size), nullptr);
  EXPECT_EQ(api().exec_workspace(&ctx, -1, nullptr), nullptr);
  EXPECT_EQ(api().exec_workspace(nullptr, KILN_MEMORY_DEVICE, &size), nullptr);

  EXPECT_FALSE(api().exec_trace_enabled(&ctx));
  EXPECT_FALSE(api().exec_trace_enabled(nullptr));
  api().exec_trace_event(&ctx, "ignored", 0, 1, 2);  // not traced: nothing to do
  RecordingTrace trace;
  ctx.trace = &trace;
  EXPECT_TRUE(api().exec_trace_enabled(&ctx));
  const uint64_t t0 = api().trace_now_ns();
  const uint64_t t1 = api().trace_now_ns();
  EXPECT_LE(t0, t1);
  api().exec_trace_event(&ctx, "copy", 1, t0, t1);
  api().exec_trace_event(&ctx, nullptr, 0, t1, t0);  // end before begin: clamped
  ASSERT_EQ(trace.names.size(), 2u);
  EXPECT_EQ(trace.names[0], "copy");
  EXPECT_EQ(trace.tracks[0], 1);
  EXPECT_EQ(trace.names[1], "");
}

}  // namespace
}  // namespace kiln::runtime
