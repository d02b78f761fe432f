#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/thread_pool.h"

namespace kiln {
namespace {

TEST(ThreadPoolTest, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(10007);
  pool.parallel_for(10007, 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPoolTest, ConcurrentCallersAndNestedCalls) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 100; ++r) {
        pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
          // Nested parallel_for runs inline instead of deadlocking.
          pool.parallel_for(e - b, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
        });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 100 * 64);
}

// Few items: one equal chunk per thread, not a 3:2 split of grain-sized ones.
TEST(ThreadPoolTest, FewItemsSplitEvenlyOverThreads) {
  ThreadPool pool(2);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  pool.parallel_for(10, 2, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  EXPECT_EQ(chunks, (std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {5, 10}}));
}

// The recorder hears of exactly the chunks workers ran, not the caller's.
class CountingRecorder final : public ChunkRecorder {
 public:
  void chunk(int64_t start_ns, int64_t end_ns) override {
    EXPECT_LE(start_ns, end_ns);
    ++count;
  }
  std::atomic<int> count{0};
};

TEST(ThreadPoolTest, RecorderSeesWorkerChunks) {
  ThreadPool pool(3);
  CountingRecorder rec;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> on_workers{0};
  {
    const ThreadPool::RunScope run(&pool);
    const ScopedChunkRecorder scope(&rec);
    for (int r = 0; r < 20; ++r) {
      pool.parallel_for(48, 1, [&](int64_t, int64_t) {
        if (std::this_thread::get_id() != caller) ++on_workers;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      });
    }
  }
  EXPECT_EQ(rec.count.load(), on_workers.load());
  // Without a recorder installed nothing is recorded.
  pool.parallel_for(48, 1, [&](int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(50)); });
  EXPECT_EQ(rec.count.load(), on_workers.load());
}

}  // namespace
}  // namespace kiln
