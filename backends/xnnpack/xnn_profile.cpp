#include "xnn_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln_xnnpack {

namespace {

bool profile_requested() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_XNNPACK_PROFILE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

}  // namespace

StepTimer::StepTimer() : on_(profile_requested()) {}

size_t StepTimer::add(std::string label) {
  if (!on_) return 0;
  steps_.push_back(Step{std::move(label), 0, 0});
  return steps_.size() - 1;
}

StepTimer::~StepTimer() {
  if (!on_ || steps_.empty()) return;
  int64_t total = 0, least = 0;
  size_t runs = 0;
  for (const Step& s : steps_) {
    total += s.ns;
    least += s.min_ns;
    runs = std::max(runs, s.count);
  }
  if (runs == 0 || total <= 0) return;
  std::fprintf(stderr, "xnnpack partition profile: %zu runs, mean %.3f ms a run, sum of least step times %.3f ms\n",
               runs, static_cast<double>(total) / 1e6 / static_cast<double>(runs), static_cast<double>(least) / 1e6);
  std::fprintf(stderr, "  %9s %9s %7s  %s\n", "mean us", "least us", "share", "step");
  for (const Step& s : steps_) {
    const double mean = s.count ? static_cast<double>(s.ns) / 1e3 / static_cast<double>(s.count) : 0.0;
    std::fprintf(stderr, "  %9.1f %9.1f %6.1f%%  %s\n", mean, static_cast<double>(s.min_ns) / 1e3,
                 100.0 * static_cast<double>(s.ns) / static_cast<double>(total), s.label.c_str());
  }
}

}  // namespace kiln_xnnpack
