// Standalone benchmark of the portable depthwise convolution on the layer
// shapes of mobilenet_v2, mobilenet_v3_large, mnasnet1_0 and efficientnet_b0
// ("same" padding, Relu6 epilogue), plus three few-channel probes.
//
// Build (from the repo root, after `ninja -C build kiln_kernels`), one line:
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/depthwise_bench.cpp build/lib/libkiln_kernels.a
//       build/lib/libkiln_kernel_api.a build/lib/libkiln_ir.a build/lib/libkiln_core.a -lpthread
//       -o build/depthwise_bench
// Run: build/depthwise_bench [threads] [filter] [isa]   (filter: a substring of the shape's name;
//      isa: 1 AVX-512, 2 AVX2 for the wide-map row kernels, 0 by the CPU)
// Prints, per shape, best-of-N GMAC/s by wall time and (one thread) by thread
// CPU time, which on a shared machine does not count time other processes ran.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/portable/conv_depthwise.h"
#include "kernels/portable/conv_depthwise_rows.h"

using namespace kiln;
using namespace kiln::kernels;

static double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Shape {
  int64_t c, in, k, s;
};

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const std::string filter = argc > 2 ? argv[2] : "";
  if (argc > 3 && !depthwise_rows_force_isa(std::atoi(argv[3]))) {
    std::fprintf(stderr, "ISA %s not available\n", argv[3]);
    return 1;
  }
  std::unique_ptr<ThreadPool> pool;
  if (threads > 1) pool = std::make_unique<ThreadPool>(threads);
  const Shape shapes[] = {
      {32, 112, 3, 1}, {48, 112, 3, 2}, {96, 112, 3, 2}, {144, 56, 3, 1}, {144, 56, 3, 2}, {72, 56, 5, 2},
      {144, 56, 5, 2}, {192, 28, 3, 1}, {120, 28, 5, 1}, {240, 28, 5, 1}, {240, 28, 3, 2}, {240, 28, 5, 2},
      {480, 14, 3, 1}, {480, 14, 5, 1}, {672, 14, 5, 2}, {960, 7, 3, 1}, {1152, 7, 5, 1},
      {24, 28, 3, 2}, {8, 112, 3, 2}, {4, 112, 3, 1},
  };
  std::printf("%d thread(s); best-of-N GMAC/s by wall time [by thread CPU time], microseconds\n", threads);
  double total_us = 0;
  for (const Shape& s : shapes) {
    char name[96];
    std::snprintf(name, sizeof name, "c%lld %lldx%lld k%lld s%lld", static_cast<long long>(s.c),
                  static_cast<long long>(s.in), static_cast<long long>(s.in), static_cast<long long>(s.k),
                  static_cast<long long>(s.s));
    if (!filter.empty() && std::string(name).find(filter) == std::string::npos) continue;
    DepthwiseConv p;
    p.c = s.c;
    p.in_h = p.in_w = s.in;
    p.k_h = p.k_w = s.k;
    p.s_h = p.s_w = s.s;
    p.p_h = p.p_w = s.k / 2;
    p.out_h = p.out_w = (s.in + 2 * p.p_h - s.k) / s.s + 1;
    std::vector<float> x(static_cast<size_t>(s.c * s.in * s.in)), w(static_cast<size_t>(s.c * s.k * s.k)),
        b(static_cast<size_t>(s.c)), y(static_cast<size_t>(s.c * p.out_h * p.out_w));
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1, 1);
    for (auto* v : {&x, &w, &b})
      for (float& f : *v) f = d(rng);
    DepthwiseEpilogue ep;
    ep.lo = 0.f;
    ep.hi = 6.f;
    auto run = [&] { depthwise_conv_f32(p, x.data(), w.data(), b.data(), y.data(), pool.get(), ep); };
    run();
    const double macs = static_cast<double>(y.size()) * static_cast<double>(s.k * s.k);
    const int reps = std::max(20, static_cast<int>(2e9 / macs));
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < reps; ++r) {
      const double c0 = thread_cpu_seconds();
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const auto t1 = std::chrono::steady_clock::now();
      const double c1 = thread_cpu_seconds();
      best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
      best_cpu = std::min(best_cpu, c1 - c0);
    }
    total_us += 1e6 * best;
    std::printf("%-24s %7.1f [%6.1f]  %8.1f us\n", name, macs / best / 1e9, macs / best_cpu / 1e9, 1e6 * best);
  }
  std::printf("total %.1f us\n", total_us);
  return 0;
}
