// Per-op timing inside a compiled XNNPACK partition, for tuning: `kiln bench
// --profile` shows a partition as one node, so with KILN_XNNPACK_PROFILE set
// (to anything but "0") each Runtime times its steps (the boundary
// transposes, each XNNPACK segment, each op the plugin runs itself, each
// fused block) on every run and prints a table of them to stderr when it is
// destroyed: mean and least time a run, share of the partition (the least
// time is the one to read on a machine shared with other work). Off
// (the default), a run pays one predictable branch per step.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln_xnnpack {

class StepTimer {
 public:
  /// Reads KILN_XNNPACK_PROFILE once per process.
  StepTimer();
  ~StepTimer();  // prints the table when on and something was timed
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  bool on() const { return on_; }
  /// Registers a step (when on: once, at build time) and returns its id.
  size_t add(std::string label);
  /// Marks the start of a run; each mark(id) then charges the time since
  /// the previous mark (or the start) to step `id`.
  void start() {
    if (on_) last_ = now();
  }
  void mark(size_t id) {
    if (!on_) return;
    const int64_t t = now();
    Step& s = steps_[id];
    s.ns += t - last_;
    s.min_ns = s.count == 0 || t - last_ < s.min_ns ? t - last_ : s.min_ns;
    ++s.count;
    last_ = t;
  }

 private:
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  struct Step {
    std::string label;
    int64_t ns = 0, min_ns = 0;
    size_t count = 0;
  };
  bool on_ = false;
  int64_t last_ = 0;
  std::vector<Step> steps_;
};

}  // namespace kiln_xnnpack
