// Standalone SGEMM / conv-shaped GEMM benchmark for the portable engine.
//
// Build (from the repo root, after `ninja -C build kiln_kernels`), one line:
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/gemm_bench.cpp build/lib/libkiln_kernels.a
//       build/lib/libkiln_ir.a build/lib/libkiln_core.a -lpthread -o build/gemm_bench
// Run: build/gemm_bench [avx512f|avx2+fma|portable] [threads]
// On a shared machine the thread-CPU-time figures (single thread) are the
// meaningful ones: wall time also counts the time other processes ran.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "kernels/portable/util/gemm.h"

using namespace kiln;
using namespace kiln::kernels;

// Seconds of CPU time this thread has used: unlike wall time it does not
// count the time the thread waits while other processes run (a shared box).
static double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best-of-N GFLOP/s by wall time, and (single thread only) by thread CPU time.
struct Rate {
  double wall, cpu;
};

static Rate bench(int64_t m, int64_t n, int64_t k, ThreadPool* pool, bool prepack_a) {
  std::vector<float> a(m * k), b(k * n), c(m * n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  for (auto& x : a) x = d(rng);
  for (auto& x : b) x = d(rng);
  PackedMatrix pa;
  if (prepack_a) pa = PackedMatrix::pack_a(false, m, k, a.data(), k);
  auto run = [&] {
    if (prepack_a)
      sgemm_ex(m, n, k, 1.f, GemmOperand::prepacked(pa), GemmOperand::raw(b.data(), n), 0.f, c.data(), n, pool);
    else
      sgemm(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n, pool);
  };
  run();
  double best = 1e30, best_cpu = 1e30;
  const double flops = 2.0 * m * n * k;
  int reps = std::max(10, static_cast<int>(4e10 / flops));
  for (int r = 0; r < reps; ++r) {
    const double c0 = thread_cpu_seconds();
    auto t0 = std::chrono::steady_clock::now();
    run();
    auto t1 = std::chrono::steady_clock::now();
    const double c1 = thread_cpu_seconds();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    best_cpu = std::min(best_cpu, c1 - c0);
  }
  return {flops / best / 1e9, flops / best_cpu / 1e9};
}

int main(int argc, char** argv) {
  if (argc > 1 && !sgemm_force_kernel(argv[1])) {
    std::fprintf(stderr, "kernel %s not available\n", argv[1]);
    return 1;
  }
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  std::unique_ptr<ThreadPool> pool;
  if (threads > 1) pool = std::make_unique<ThreadPool>(threads);
  std::printf("kernel %s, %d thread(s); best-of-N GFLOP/s by wall time [by thread CPU time]\n", sgemm_kernel_name(),
              threads);
  struct Shape3 { int64_t m, n, k; const char* what; };
  const Shape3 shapes[] = {
      {1024, 1024, 1024, "square 1024^3"},
      {64, 3136, 576, "conv 3x3 64->64 @56x56 (M=64,N=3136,K=576)"},
      {128, 784, 1152, "conv 3x3 128->128 @28x28"},
      {256, 196, 2304, "conv 3x3 256->256 @14x14"},
      {512, 49, 4608, "conv 3x3 512->512 @7x7"},
      {64, 12544, 147, "conv 7x7/2 3->64 @112x112"},
      {32, 12544, 27, "stem 3x3/2 3->32 @112x112 (mobilenet)"},
      {16, 12544, 32, "pointwise 32->16 @112x112 (M=16 edge tiles)"},
      {96, 12544, 16, "pointwise 16->96 @112x112 (K=16)"},
      {96, 196, 576, "pointwise 576->96 @14x14"},
      {1280, 49, 320, "pointwise 320->1280 @7x7 (as Y = W X)"},
      {49, 1280, 320, "pointwise 320->1280 @7x7 (as Y^T = X^T W^T)"},
      {128, 512, 256, "bert qkv-ish (M=128 seq,N=512,K=256)"},
  };
  for (const auto& s : shapes) {
    const Rate g = bench(s.m, s.n, s.k, pool.get(), false);
    const Rate gp = bench(s.m, s.n, s.k, pool.get(), true);
    if (threads > 1) {
      std::printf("%-48s %7.1f  (prepacked A %7.1f)\n", s.what, g.wall, gp.wall);
    } else {
      std::printf("%-48s %7.1f [%6.1f]  (prepacked A %7.1f [%6.1f])\n", s.what, g.wall, g.cpu, gp.wall, gp.cpu);
    }
  }
  return 0;
}
