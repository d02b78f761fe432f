#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

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

// A grain larger than a thread's share: as many chunks as grain-sized ones
// would make, but of equal sizes (12 items, grain 9: 6 + 6, not 9 + 3; 22
// items, grain 5 on 3 threads: 7 + 7 + 8, not 8 + 8 + 6).
TEST(ThreadPoolTest, ChunksOfAGrainAreEqualized) {
  for (auto [threads, n, grain] : {std::tuple<int, int64_t, int64_t>{2, 12, 9}, {3, 22, 5}, {2, 7, 1}, {3, 100, 1}}) {
    ThreadPool pool(threads);
    std::mutex mu;
    std::vector<int64_t> sizes;
    int64_t covered = 0;
    pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(mu);
      sizes.push_back(e - b);
      covered += e - b;
    });
    EXPECT_EQ(covered, n);
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    EXPECT_LE(*hi - *lo, 1) << threads << " threads, " << n << " items, grain " << grain;
  }
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

// run_tasks: every task once; a parallel_for inside a task covers its range
// exactly once and gets the same chunks as outside (results do not depend on
// which thread ran what), on pools of 1 to 4 threads.
class RunTasksTest : public ::testing::TestWithParam<int> {};

TEST_P(RunTasksTest, NestedRangesCoveredOnceWithTheSameChunks) {
  ThreadPool pool(GetParam());
  const ThreadPool::RunScope run(&pool);
  for (int rep = 0; rep < 50; ++rep) {
    const int64_t sizes[3] = {1000, 37, 4096};
    std::vector<std::vector<std::atomic<int>>> hits;
    for (int64_t n : sizes) hits.emplace_back(static_cast<size_t>(n));
    std::mutex mu;
    std::vector<std::vector<std::pair<int64_t, int64_t>>> chunks(3);
    pool.run_tasks(3, [&](int64_t t0, int64_t t1) {
      ASSERT_EQ(t1, t0 + 1);
      const auto t = static_cast<size_t>(t0);
      pool.parallel_for(sizes[t], 8, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[t][static_cast<size_t>(i)]++;
        std::lock_guard<std::mutex> lock(mu);
        chunks[t].emplace_back(b, e);
      });
    });
    for (size_t t = 0; t < 3; ++t) {
      for (auto& h : hits[t]) ASSERT_EQ(h.load(), 1);
      std::vector<std::pair<int64_t, int64_t>> alone;
      pool.parallel_for(sizes[t], 8, [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(mu);
        alone.emplace_back(b, e);
      });
      std::sort(alone.begin(), alone.end());
      std::sort(chunks[t].begin(), chunks[t].end());
      ASSERT_EQ(chunks[t], alone);
    }
  }
}

// Tasks that block until their sibling has started prove they run at once.
TEST(RunTasksConcurrency, TasksRunOnDifferentThreadsAtOnce) {
  ThreadPool pool(2);
  const ThreadPool::RunScope run(&pool);
  std::atomic<int> started{0};
  std::atomic<bool> both{false};
  pool.run_tasks(2, [&](int64_t, int64_t) {
    ++started;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (started.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (started.load() == 2) both = true;
  });
  EXPECT_TRUE(both.load());
}

TEST(RunTasksConcurrency, InsideAPoolTaskRunsInOrder) {
  ThreadPool pool(2);
  std::atomic<int> bad{0};
  pool.parallel_for(4, 1, [&](int64_t, int64_t) {
    std::vector<int64_t> order;
    pool.run_tasks(5, [&](int64_t b, int64_t) { order.push_back(b); });
    if (order != std::vector<int64_t>{0, 1, 2, 3, 4}) ++bad;
  });
  EXPECT_EQ(bad.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Threads, RunTasksTest, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace kiln
