#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln {

namespace {
thread_local bool t_in_pool_task = false;
thread_local ChunkRecorder* t_recorder = nullptr;

// How long an idle worker spins inside a run before it sleeps. Long enough
// to bridge the serial stretch between two parallel nodes, short enough that
// a long serial node does not keep a core busy for nothing. The spin yields
// the CPU now and then, so on a machine with more runnable threads than
// cores it gives way instead of taking the caller's core.
// KILN_POOL_SPIN_US overrides it (0: never spin; at most 10000), read once.
std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds spin = [] {
    const char* env = std::getenv("KILN_POOL_SPIN_US");
    if (!env || !*env) return std::chrono::microseconds(100);
    char* end = nullptr;
    const long us = std::strtol(env, &end, 10);
    if (*end != '\0' || us < 0) return std::chrono::microseconds(100);
    return std::chrono::microseconds(std::min(us, 10000L));
  }();
  return spin;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

ScopedChunkRecorder::ScopedChunkRecorder(ChunkRecorder* recorder) : previous_(t_recorder) { t_recorder = recorder; }
ScopedChunkRecorder::~ScopedChunkRecorder() { t_recorder = previous_; }

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

// Runs chunks of `job` until none is left. A leaf job's chunks run as pool
// tasks (a parallel_for inside runs inline); a run_tasks job's chunks may
// share a parallel_for of their own with the pool.
void ThreadPool::run_chunks(Job& job, bool worker) {
  ChunkRecorder* rec = worker ? job.recorder : nullptr;
  const bool was_in_task = t_in_pool_task;
  t_in_pool_task = job.leaf;
  for (;;) {
    int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.num_chunks) break;
    // Chunk c is [c * n / chunks, (c + 1) * n / chunks): sizes differ by one at most.
    const int64_t b = c * job.n / job.num_chunks, e = (c + 1) * job.n / job.num_chunks;
    const int64_t t0 = rec ? now_ns() : 0;
    job.fn(b, e);
    if (rec) rec->chunk(t0, now_ns());
  }
  t_in_pool_task = was_in_task;
}

// A queued job with chunks left (a leaf job when `leaf_only`), entered
// (active + 1); fully handed-out jobs are unlisted on the way (their callers
// wait for completion).
ThreadPool::Job* ThreadPool::take_job_locked(bool leaf_only) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    Job* job = *it;
    if (job->next.load(std::memory_order_relaxed) >= job->num_chunks) {
      it = queue_.erase(it);
      queued_.fetch_sub(1, std::memory_order_relaxed);
      continue;
    }
    if (leaf_only && !job->leaf) {
      ++it;
      continue;
    }
    job->active.fetch_add(1, std::memory_order_relaxed);
    return job;
  }
  return nullptr;
}

// A thread other than the job's caller is done with its chunks. The caller
// cannot leave before active drops to 0; after that the job may be gone, so
// only the pool's own members are touched.
void ThreadPool::leave_job(Job& job) {
  if (job.active.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard<std::mutex> lock(mu_);
    done_cv_.notify_all();
  }
}

void ThreadPool::spin_for_work() {
  const auto until = std::chrono::steady_clock::now() + spin_time();
  for (int i = 1;; ++i) {
    if (queued_.load(std::memory_order_acquire) > 0 || runs_.load(std::memory_order_relaxed) == 0) return;
    cpu_relax();
    if ((i & 63) == 0) {
      if (std::chrono::steady_clock::now() >= until) return;
      std::this_thread::yield();
    }
  }
}

// Wakes the workers sleeping on cv_ without giving them work: inside a run
// they then spin for the first job (worker_loop), between runs they go back
// to sleep.
void ThreadPool::wake_sleepers() {
  if (workers_.empty() || spin_time().count() == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sleepers_ == 0) return;
    ++wakes_;
  }
  cv_.notify_all();
}

void ThreadPool::worker_loop() {
  t_in_pool_task = true;
  std::unique_lock<std::mutex> lock(mu_);
  bool spun = false;
  for (;;) {
    if (stop_) return;
    Job* job = take_job_locked(false);
    if (!job) {
      // Inside a run: spin once (unlocked) before sleeping; between runs sleep.
      if (!spun && runs_.load(std::memory_order_relaxed) > 0 && spin_time().count() > 0) {
        spun = true;
        lock.unlock();
        spin_for_work();
        lock.lock();
        continue;
      }
      ++sleepers_;
      const uint64_t wakes = wakes_;
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || wakes_ != wakes; });
      --sleepers_;
      spun = false;
      continue;
    }
    lock.unlock();
    run_chunks(*job, true);
    leave_job(*job);
    lock.lock();
    spun = false;
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t threads = num_threads();
  if (t_in_pool_task || threads <= 1 || n <= grain) {
    fn(0, n);
    return;
  }
  // A few chunks per thread balances uneven work without much overhead; when
  // there are few items, chunks of equal size so every thread gets a share.
  int64_t chunk = std::max(grain, (n + threads * 4 - 1) / (threads * 4));
  if (n < threads * 4 * grain) chunk = std::max(grain, (n + threads - 1) / threads);
  // As many chunks as that makes, of equal sizes (run_chunks): 12 items of
  // grain 9 run as 6 + 6, not 9 + 3.
  Job job{fn, n, (n + chunk - 1) / chunk, t_recorder};
  dispatch(job);
}

void ThreadPool::run_tasks(int64_t n, RangeFn fn) {
  if (n <= 0) return;
  if (t_in_pool_task || num_threads() <= 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, i + 1);
    return;
  }
  Job job{fn, n, n, nullptr};
  job.leaf = false;
  dispatch(job);
}

// Queues `job`, runs its chunks on the calling thread too, and returns when
// every chunk is done.
void ThreadPool::dispatch(Job& job) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&job);
    queued_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) cv_.notify_all();
  run_chunks(job, false);
  wait_helping(job);
}

// Every chunk of `job` has been taken (the caller's loop ran dry). Unlists it
// so no new worker enters it, then waits for the workers still finishing a
// chunk: spinning first, since they are usually about to finish, and running
// chunks of other leaf jobs meanwhile (another task's parallel_for). Helped
// chunks never wait themselves, so helping cannot deadlock.
void ThreadPool::wait_helping(Job& job) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = std::find(queue_.begin(), queue_.end(), &job);
  if (it != queue_.end()) {
    queue_.erase(it);
    queued_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (job.active.load(std::memory_order_acquire) == 0) return;
  lock.unlock();
  auto until = std::chrono::steady_clock::now() + spin_time();
  for (int i = 1; job.active.load(std::memory_order_acquire) != 0; ++i) {
    if ((i & 7) == 0 && queued_.load(std::memory_order_acquire) > 0) {
      lock.lock();
      Job* other = take_job_locked(true);
      lock.unlock();
      if (other) {
        run_chunks(*other, true);
        leave_job(*other);
        until = std::chrono::steady_clock::now() + spin_time();
        continue;
      }
    }
    cpu_relax();
    if ((i & 63) == 0) {
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::yield();
    }
  }
  lock.lock();
  done_cv_.wait(lock, [&] { return job.active.load(std::memory_order_acquire) == 0; });
}

}  // namespace kiln
