// simdev's stream: one in-order queue per instance, served by three engines
// the way a discrete accelerator serves its queue: a compute engine
// (executions), a copy engine (transfers) and a waiter (stream waits on
// fences). A job starts when every earlier unfinished job leaves its memory
// alone (no read/write or write/write overlap) and no earlier stream wait is
// pending, so the results are those of running the queue in order while a
// copy can overlap an execution that does not touch its bytes. Jobs that
// signal one fence say they are done in queue order (a timeline fence's
// value v tells the host that every lower value is done too), whatever
// order the engines finish them in.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/c/backend.h"

namespace simdev {

enum class Engine { kCompute = 0, kCopy = 1, kWait = 2 };

/// [begin, end) of bytes a job reads or writes.
struct Range {
  uintptr_t begin = 0;
  uintptr_t end = 0;
};
inline Range range_of(const void* p, size_t bytes) {
  auto b = reinterpret_cast<uintptr_t>(p);
  return {b, b + bytes};
}

/// One entry of the timeline the plugin keeps (for tests and `kiln
/// check-backend`): what ran on which engine, when (CLOCK_MONOTONIC ns).
struct TimelineEntry {
  Engine engine;
  std::string name;
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
};

struct Job {
  Engine engine = Engine::kCompute;
  std::string name;
  std::vector<Range> reads, writes;
  /// The work; returns NULL or an error status (owned by whoever gets it).
  std::function<kiln_status_t*()> work;
  /// Called once after `work`, off the stream's lock, with its status;
  /// after the `done` of every earlier job of the same `fence`.
  std::function<void(kiln_status_t*)> done;
  /// The fence `done` signals (null: none); orders the `done` calls.
  const void* fence = nullptr;
  bool started = false;
  bool finished = false;           // `work` returned (under the stream's lock)
  kiln_status_t* status = nullptr;  // what it returned, for `done`
};

class Stream {
 public:
  Stream();
  /// Waits for every queued job, then stops the engines.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void submit(std::shared_ptr<Job> job);
  /// True once the destructor runs: stream waits give up instead of
  /// waiting on a fence nobody will signal.
  bool closing() const { return closing_.load(); }
  /// Submits and blocks until the job is done (its `done` is replaced);
  /// returns its status.
  kiln_status_t* run(std::shared_ptr<Job> job);
  /// Blocks until every job queued so far is done.
  void drain();
  /// The last jobs that ran (at most 4096), oldest first.
  std::vector<TimelineEntry> timeline() const;

 private:
  void engine_loop(Engine engine);
  std::shared_ptr<Job> next_for(Engine engine) const;  // under mu_
  void deliver(std::unique_lock<std::mutex>& lock);      // under mu_ (released while `done` runs)

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> pending_;  // queued or running, in queue order
  std::deque<TimelineEntry> timeline_;
  bool stop_ = false;
  bool delivering_ = false;  // a thread is calling `done`s (deliver)
  std::atomic<bool> closing_{false};
  std::vector<std::thread> engines_;
};

/// CLOCK_MONOTONIC in nanoseconds (the host's trace clock).
uint64_t now_ns();

}  // namespace simdev
