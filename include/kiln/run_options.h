// RunOptions: control over one run. Cancel it from another thread, or give it
// a deadline; the executor checks between nodes and plugins poll the same
// flag inside long partitions (kiln_host_api_t.exec_should_cancel).
#pragma once

#include <atomic>
#include <chrono>

#include "kiln/status.h"

namespace kiln {

struct RunOptions {
  /// When not null, setting it to true (from any thread) stops the run: it
  /// returns kCancelled at the next check.
  const std::atomic<bool>* cancel = nullptr;
  /// When set (not the clock's epoch), the run returns kDeadlineExceeded at
  /// the first check after this time.
  std::chrono::steady_clock::time_point deadline{};

  /// True when the run must stop now (cheap: an atomic load, a clock read
  /// only when there is a deadline).
  bool stop_requested() const noexcept {
    if (cancel && cancel->load(std::memory_order_relaxed)) return true;
    return deadline != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() >= deadline;
  }
  /// OK, or the status the run stops with.
  Status check() const {
    if (cancel && cancel->load(std::memory_order_relaxed)) return Status(StatusCode::kCancelled, "the run was cancelled");
    if (deadline != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() >= deadline)
      return Status(StatusCode::kDeadlineExceeded, "the run's deadline passed");
    return Status::ok();
  }
};

}  // namespace kiln
