// ThreadPool: intra-op parallelism. The calling thread takes part in every
// parallel_for, so a pool of N threads has N-1 workers.
//
// Waking a sleeping thread costs more than many nodes take, so while a run
// is in progress (RunScope) a worker that runs out of work spins for a short
// while before it sleeps; between runs idle workers sleep on a condition
// variable at once, so a pool between runs costs no CPU. A run's start wakes
// them (they spin for its first job instead of paying the wake there).
//
// parallel_for may be called from several threads at once (concurrent
// Session::run calls share one pool) and from inside a task (it then runs
// inline, never deadlocks).
//
// run_tasks runs a few coarse tasks (independent graph nodes, the two
// directions of an RNN) on different threads at once. Inside a task a
// parallel_for is shared with the pool again (one level deep): a thread that
// finished its own task helps with the chunks of another's, so uneven tasks
// still keep every thread busy and the chunks are the same as when the tasks
// run one after the other (same results).
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

/// Told about every chunk a pool worker runs for a parallel_for called while
/// the recorder is installed on the calling thread (ScopedChunkRecorder);
/// the profiler uses it to show workers on their own trace tracks.
class ChunkRecorder {
 public:
  virtual ~ChunkRecorder() = default;
  /// Called on the worker thread after each chunk, from several workers at
  /// once; times are steady-clock nanoseconds.
  virtual void chunk(int64_t start_ns, int64_t end_ns) = 0;
};

/// Installs `recorder` (may be null) on this thread for its lifetime.
class ScopedChunkRecorder {
 public:
  explicit ScopedChunkRecorder(ChunkRecorder* recorder);
  ~ScopedChunkRecorder();
  ScopedChunkRecorder(const ScopedChunkRecorder&) = delete;
  ScopedChunkRecorder& operator=(const ScopedChunkRecorder&) = delete;

 private:
  ChunkRecorder* previous_;
};

class ThreadPool {
 public:
  /// `num_threads` counts the caller; 0 means the number of hardware threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(begin, end) over disjoint chunks covering [0, n): no more
  /// chunks than chunks of `grain` items would make (a few per thread at
  /// most), all of the same size give or take one item. Returns when all
  /// are done.
  void parallel_for(int64_t n, int64_t grain, RangeFn fn);

  /// Calls fn(i, i + 1) for every i in [0, n), each on whichever thread is
  /// free, the caller included; returns when all are done. A parallel_for
  /// inside a task is spread over the threads not busy with other tasks.
  /// From inside a pool task, or on a one-thread pool, runs them in order.
  void run_tasks(int64_t n, RangeFn fn);

  /// Marks a run in progress for its lifetime (runs may overlap and nest):
  /// idle workers spin briefly instead of sleeping at once.
  class RunScope {
   public:
    explicit RunScope(ThreadPool* pool) : pool_(pool) {
      // The first run wakes sleeping workers now, so they are up (spinning)
      // by the run's first parallel node instead of paying the wake there.
      if (pool_ && pool_->runs_.fetch_add(1, std::memory_order_relaxed) == 0) pool_->wake_sleepers();
    }
    ~RunScope() {
      if (pool_) pool_->runs_.fetch_sub(1, std::memory_order_relaxed);
    }
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;

   private:
    ThreadPool* pool_;
  };

 private:
  struct Job {
    RangeFn fn;
    int64_t n;
    int64_t num_chunks;  // chunk c is [c * n / num_chunks, (c + 1) * n / num_chunks)
    ChunkRecorder* recorder = nullptr;
    bool leaf = true;  // false for run_tasks' jobs: their chunks may wait on other jobs
    std::atomic<int64_t> next{0};
    std::atomic<int> active{0};  // workers inside run_chunks; entered under mu_
  };
  static void run_chunks(Job& job, bool worker);
  void dispatch(Job& job);
  void wait_helping(Job& job);
  Job* take_job_locked(bool leaf_only);
  void leave_job(Job& job);
  void spin_for_work();
  void wake_sleepers();
  void worker_loop();

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;       // workers wait for jobs
  std::condition_variable done_cv_;  // callers wait for workers to leave their job
  std::deque<Job*> queue_;
  std::atomic<int> queued_{0};  // queue_.size(), readable without mu_ (for spinning)
  std::atomic<int> runs_{0};    // runs in progress (RunScope)
  int sleepers_ = 0;            // workers waiting on cv_; guarded by mu_
  uint64_t wakes_ = 0;          // wake_sleepers calls; guarded by mu_
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
