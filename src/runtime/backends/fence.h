// The host-owned timeline fence behind kiln_fence_t (ABI 1.1): a 64-bit
// value that only grows, waiters, and the first error signalled. Work that a
// plugin runs asynchronously says it is done by signalling a value; anyone
// waits for "at least value". Waiters of the failed value and of every value
// above it get the error; values below it completed.
//
// Thread safety: signal, wait and value may be called from any thread at
// once. The value is an atomic (fence_value reads it without the lock); the
// error and the wake-ups are under the mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "kiln/c/backend.h"
#include "kiln/status.h"

struct kiln_fence {
 public:
  kiln_fence() = default;
  kiln_fence(const kiln_fence&) = delete;
  kiln_fence& operator=(const kiln_fence&) = delete;

  /// Completes the fence up to `value` (lower values than the current one
  /// change nothing) and wakes its waiters. A non-OK `error` marks `value`
  /// and everything above it as failed (only the first error is kept).
  void signal(uint64_t value, kiln::Status error = kiln::Status::ok());
  /// Blocks until the fence reaches `value` or `timeout_ns` passes
  /// (UINT64_MAX: no limit). OK when reached; the work's error when `value`
  /// is at or above the failed one; kDeadlineExceeded on timeout.
  kiln::Status wait(uint64_t value, uint64_t timeout_ns = UINT64_MAX) const;
  /// The highest value reached. (Only wait() says the signaller is done with
  /// the fence: destroy a fence after a wait, never after reading value().)
  uint64_t value() const { return value_.load(std::memory_order_acquire); }
  /// The next value to hand out for work on this fence's timeline (1, 2, ...).
  uint64_t next_value() { return issued_.fetch_add(1, std::memory_order_relaxed) + 1; }
  /// The last value handed out by next_value (0: none).
  uint64_t last_issued() const { return issued_.load(std::memory_order_relaxed); }
  /// True once an error was signalled.
  bool failed() const;

 private:
  std::atomic<uint64_t> value_{0};
  std::atomic<uint64_t> issued_{0};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t error_value_ = 0;  // under mu_; 0: no error
  kiln::Status error_;        // under mu_
};

namespace kiln::runtime {

/// The host table's fence entries (host.cpp puts them in kiln_host_api_t).
void fence_signal_c(kiln_fence_t* fence, uint64_t value, kiln_status_t* error) noexcept;
kiln_status_t* fence_wait_c(kiln_fence_t* fence, uint64_t value, uint64_t timeout_ns) noexcept;
uint64_t fence_value_c(const kiln_fence_t* fence) noexcept;

}  // namespace kiln::runtime
