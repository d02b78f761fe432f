#include "sim_stream.h"

#include <time.h>

#include <algorithm>

namespace simdev {
namespace {

constexpr size_t kTimelineCap = 4096;

bool overlaps(const std::vector<Range>& a, const std::vector<Range>& b) {
  for (const Range& x : a)
    for (const Range& y : b)
      if (x.begin < y.end && y.begin < x.end) return true;
  return false;
}

// True when `later` may run while `earlier` has not finished.
bool independent(const Job& earlier, const Job& later) {
  if (earlier.engine == Engine::kWait) return false;  // a stream wait holds back everything after it
  return !overlaps(earlier.writes, later.reads) && !overlaps(earlier.reads, later.writes) &&
         !overlaps(earlier.writes, later.writes);
}

}  // namespace

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Stream::Stream() {
  for (Engine e : {Engine::kCompute, Engine::kCopy, Engine::kWait}) engines_.emplace_back([this, e] { engine_loop(e); });
}

Stream::~Stream() {
  closing_.store(true);
  drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : engines_) t.join();
}

void Stream::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(std::move(job));
  }
  cv_.notify_all();
}

kiln_status_t* Stream::run(std::shared_ptr<Job> job) {
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    kiln_status_t* status = nullptr;
  };
  auto w = std::make_shared<Wait>();
  job->done = [w](kiln_status_t* st) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->status = st;
    w->done = true;
    w->cv.notify_all();
  };
  submit(std::move(job));
  std::unique_lock<std::mutex> lock(w->mu);
  w->cv.wait(lock, [&] { return w->done; });
  return w->status;
}

void Stream::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return pending_.empty(); });
}

std::vector<TimelineEntry> Stream::timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {timeline_.begin(), timeline_.end()};
}

std::shared_ptr<Job> Stream::next_for(Engine engine) const {
  // Each engine serves its own jobs in queue order: only its first
  // unstarted job is a candidate.
  for (size_t k = 0; k < pending_.size(); ++k) {
    const Job& job = *pending_[k];
    if (job.engine != engine) continue;
    if (job.started) continue;
    for (size_t i = 0; i < k; ++i)
      if (!pending_[i]->finished && !independent(*pending_[i], job)) return nullptr;
    return pending_[k];
  }
  return nullptr;
}

void Stream::engine_loop(Engine engine) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::shared_ptr<Job> job;
    cv_.wait(lock, [&] { return stop_ || (job = next_for(engine)) != nullptr; });
    if (!job) return;  // stopping, nothing left for this engine
    job->started = true;
    lock.unlock();
    TimelineEntry entry{engine, job->name, now_ns(), 0};
    kiln_status_t* st = job->work ? job->work() : nullptr;
    job->work = nullptr;  // captured state dies here, not in whoever drops the last reference
    entry.end_ns = now_ns();
    lock.lock();  // on the timeline before anyone learns it is done
    timeline_.push_back(std::move(entry));
    if (timeline_.size() > kTimelineCap) timeline_.pop_front();
    job->finished = true;
    job->status = st;
    deliver(lock);
    cv_.notify_all();  // later jobs it held back may start
  }
}

// Calls the `done` of finished jobs and drops them from the queue: a job of
// a fence only after every earlier job of that fence (signalling a value of
// a timeline fence completes the values below it: an engine that finished
// the later job first must not complete the earlier one's value while it
// still runs). One thread delivers at a time, so the calls keep that order.
void Stream::deliver(std::unique_lock<std::mutex>& lock) {
  if (delivering_) return;  // that thread sees this job before it stops
  delivering_ = true;
  for (;;) {
    std::shared_ptr<Job> next;
    for (size_t k = 0; k < pending_.size() && !next; ++k) {
      if (!pending_[k]->finished) continue;
      bool held = false;
      for (size_t i = 0; i < k && !held && pending_[k]->fence; ++i) held = pending_[i]->fence == pending_[k]->fence;
      if (!held) next = pending_[k];
    }
    if (!next) break;
    lock.unlock();
    if (next->done) next->done(next->status);
    next->done = nullptr;
    lock.lock();
    pending_.erase(std::find(pending_.begin(), pending_.end(), next));  // drain() returns once it is done
  }
  delivering_ = false;
}

}  // namespace simdev
