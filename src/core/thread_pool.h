// ThreadPool: intra-op parallelism. The calling thread takes part in every
// parallel_for, so a pool of N threads has N-1 workers. Idle workers sleep on
// a condition variable: a pool between runs costs no CPU.
//
// parallel_for may be called from several threads at once (concurrent
// Session::run calls share one pool) and from inside a task (it then runs
// inline, never deadlocks).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

/// A non-owning reference to a callable `void(int64_t begin, int64_t end)`.
class RangeFn {
 public:
  template <class F>
  RangeFn(const F& f)  // NOLINT: implicit by design
      : obj_(&f), call_([](const void* o, int64_t b, int64_t e) { (*static_cast<const F*>(o))(b, e); }) {}
  void operator()(int64_t b, int64_t e) const { call_(obj_, b, e); }

 private:
  const void* obj_;
  void (*call_)(const void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  /// `num_threads` counts the caller; 0 means the number of hardware threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(begin, end) over disjoint chunks covering [0, n). A chunk holds
  /// at least `grain` items (the last may hold fewer). Returns when all are done.
  void parallel_for(int64_t n, int64_t grain, RangeFn fn);

 private:
  struct Job {
    RangeFn fn;
    int64_t n;
    int64_t chunk;
    int64_t num_chunks;
    std::atomic<int64_t> next{0};
    int active = 0;  // workers inside run_chunks; guarded by mu_
  };
  static void run_chunks(Job& job);
  void worker_loop();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;       // workers wait for jobs
  std::condition_variable done_cv_;  // callers wait for workers to leave their job
  std::deque<Job*> queue_;
  bool stop_ = false;
};

/// Runs fn over [0, n) on `pool` if given and worth it, else inline.
inline void parallel_for(ThreadPool* pool, int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  if (!pool || pool->num_threads() <= 1 || n <= grain) {
    fn(0, n);
    return;
  }
  pool->parallel_for(n, grain, fn);
}

}  // namespace kiln
