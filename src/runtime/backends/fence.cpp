#include "runtime/backends/fence.h"

#include <algorithm>
#include <chrono>

#include "runtime/backends/host.h"

void kiln_fence::signal(uint64_t value, kiln::Status error) {
  // Notified under the lock: a waiter that sees the value may destroy the
  // fence as soon as it returns (the host drops a run's fences after its
  // last wait), so the signaller must be done with it by then.
  std::lock_guard<std::mutex> lock(mu_);
  if (!error.is_ok() && error_value_ == 0) {
    error_value_ = value == 0 ? 1 : value;
    error_ = std::move(error);
  }
  if (value > value_.load(std::memory_order_relaxed)) value_.store(value, std::memory_order_release);
  cv_.notify_all();
}

kiln::Status kiln_fence::wait(uint64_t value, uint64_t timeout_ns) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto reached = [&] { return value_.load(std::memory_order_relaxed) >= value; };
  if (timeout_ns == UINT64_MAX) {
    cv_.wait(lock, reached);
  } else {
    // Bounded so the deadline arithmetic cannot overflow (about 292 years).
    const auto limit = std::chrono::nanoseconds(static_cast<int64_t>(std::min<uint64_t>(timeout_ns, INT64_MAX / 2)));
    if (!cv_.wait_for(lock, limit, reached)) {
      return kiln::make_status(kiln::StatusCode::kDeadlineExceeded, "fence_wait: timed out after ", timeout_ns,
                               " ns waiting for value ", value, " (the fence is at ",
                               value_.load(std::memory_order_relaxed), ")");
    }
  }
  if (error_value_ != 0 && value >= error_value_) return error_.clone();
  return kiln::Status::ok();
}

bool kiln_fence::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_value_ != 0;
}

namespace kiln::runtime {

void fence_signal_c(kiln_fence_t* fence, uint64_t value, kiln_status_t* error) noexcept {
  try {
    Status st = take_status(error);
    if (!fence) return;  // the status is still taken: its ownership passed to the host
    fence->signal(value, std::move(st));
  } catch (...) {
    // Out of memory while copying a message: still complete the fence, as failed.
    if (fence) fence->signal(value, Status(StatusCode::kInternal, "fence_signal: out of memory"));
  }
}

kiln_status_t* fence_wait_c(kiln_fence_t* fence, uint64_t value, uint64_t timeout_ns) noexcept {
  try {
    if (!fence) return make_c_status(invalid_argument("fence_wait: fence is NULL"));
    return make_c_status(fence->wait(value, timeout_ns));
  } catch (...) {
    return make_c_status(Status(StatusCode::kInternal, "fence_wait: unexpected exception"));
  }
}

uint64_t fence_value_c(const kiln_fence_t* fence) noexcept { return fence ? fence->value() : 0; }

}  // namespace kiln::runtime
