#include "core/thread_pool.h"

#include <algorithm>

namespace kiln {

namespace {
thread_local bool t_in_pool_task = false;
}

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

void ThreadPool::run_chunks(Job& job) {
  for (;;) {
    int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.num_chunks) break;
    int64_t b = c * job.chunk;
    job.fn(b, std::min(job.n, b + job.chunk));
  }
}

void ThreadPool::worker_loop() {
  t_in_pool_task = true;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Job* job = queue_.front();
    if (job->next.load(std::memory_order_relaxed) >= job->num_chunks) {
      queue_.pop_front();  // fully handed out; its caller waits for completion
      continue;
    }
    ++job->active;
    lock.unlock();
    run_chunks(*job);
    lock.lock();
    // The caller waits for active == 0 under mu_, so the job is alive here.
    if (--job->active == 0) done_cv_.notify_all();
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
  // A few chunks per thread balances uneven work without much overhead.
  int64_t chunk = std::max(grain, (n + threads * 4 - 1) / (threads * 4));
  Job job{fn, n, chunk, (n + chunk - 1) / chunk};
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&job);
  }
  cv_.notify_all();
  t_in_pool_task = true;
  run_chunks(job);
  t_in_pool_task = false;
  std::unique_lock<std::mutex> lock(mu_);
  // Every chunk has been taken (our loop ran dry). Unlist the job so no new
  // worker enters it, then wait for the workers still finishing a chunk.
  auto it = std::find(queue_.begin(), queue_.end(), &job);
  if (it != queue_.end()) queue_.erase(it);
  done_cv_.wait(lock, [&] { return job.active == 0; });
}

}  // namespace kiln
