// Tests of the SGEMM engine against a double-precision reference, for every
// microkernel this CPU supports, over shapes that hit the register-tile,
// cache-block and thread-split edges.
#include "kernels/portable/util/gemm.h"
#include "kiln/tensor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kiln::kernels {
namespace {

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
};

std::vector<float> random_vec(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// C = alpha * op(A) op(B) + beta * C + biases, clamped; in double.
std::vector<float> reference(const Case& c, const std::vector<float>& a, int64_t lda, const std::vector<float>& b,
                             int64_t ldb, const std::vector<float>& c0, int64_t ldc, const GemmEpilogue& ep) {
  std::vector<float> out = c0;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double av = c.ta ? a[p * lda + i] : a[i * lda + p];
        const double bv = c.tb ? b[j * ldb + p] : b[p * ldb + j];
        s += av * bv;
      }
      double v = c.alpha * s;
      if (c.beta != 0.f) v += c.beta * static_cast<double>(c0[i * ldc + j]);
      if (ep.row_bias) v += ep.row_bias[i];
      if (ep.col_bias) v += ep.col_bias[j];
      v = std::min<double>(std::max<double>(v, ep.clamp_min), ep.clamp_max);
      out[i * ldc + j] = static_cast<float>(v);
    }
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, int64_t k, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  const float tol = 1e-5f * static_cast<float>(k + 4);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol) << what << " at " << i;
  }
}

std::vector<std::string> available_kernels() {
  std::vector<std::string> names;
  const std::string original = sgemm_kernel_name();
  for (const char* n : {"avx512f", "avx2+fma", "portable"})
    if (sgemm_force_kernel(n)) names.push_back(n);
  EXPECT_TRUE(sgemm_force_kernel(original.c_str()));
  return names;
}

// Runs one case with every operand form (raw, packed A, packed B) and checks it.
void check_case(const Case& c, ThreadPool* pool, const GemmEpilogue& ep_in, std::mt19937& rng, const std::string& tag) {
  const int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 1, ldc = c.n + 2;
  const std::vector<float> a = random_vec(static_cast<size_t>((c.ta ? c.k : c.m) * lda + 1), rng);
  const std::vector<float> b = random_vec(static_cast<size_t>((c.tb ? c.n : c.k) * ldb + 1), rng);
  const std::vector<float> c0 = random_vec(static_cast<size_t>(c.m * ldc), rng);
  const std::vector<float> row_bias = random_vec(static_cast<size_t>(c.m), rng);
  const std::vector<float> col_bias = random_vec(static_cast<size_t>(c.n), rng);
  GemmEpilogue ep = ep_in;
  if (ep.row_bias) ep.row_bias = row_bias.data();
  if (ep.col_bias) ep.col_bias = col_bias.data();
  const std::vector<float> want = reference(c, a, lda, b, ldb, c0, ldc, ep);
  const std::string what = tag + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                           " k=" + std::to_string(c.k) + " ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb);

  std::vector<float> got = c0;
  sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, got.data(), ldc, pool, ep);
  expect_close(got, want, c.k, what + " raw");

  PackedMatrix pa = PackedMatrix::pack_a(c.ta, c.m, c.k, a.data(), lda);
  got = c0;
  sgemm_ex(c.m, c.n, c.k, c.alpha, GemmOperand::prepacked(pa), GemmOperand::raw(b.data(), ldb, c.tb), c.beta,
           got.data(), ldc, pool, ep);
  expect_close(got, want, c.k, what + " packed A");

  PackedMatrix pb = PackedMatrix::pack_b(c.tb, c.k, c.n, b.data(), ldb);
  got = c0;
  sgemm_ex(c.m, c.n, c.k, c.alpha, GemmOperand::raw(a.data(), lda, c.ta), GemmOperand::prepacked(pb), c.beta,
           got.data(), ldc, pool, ep);
  expect_close(got, want, c.k, what + " packed B");
}

TEST(GemmTest, MatchesReferenceForEveryKernel) {
  std::mt19937 rng(42);
  const std::string original = sgemm_kernel_name();
  const int64_t sizes[] = {1, 2, 5, 6, 7, 12, 13, 16, 17, 31, 33, 47};
  const std::vector<std::string> kernels = available_kernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.back(), "portable");  // always available
  int cases = 0;
  for (const std::string& kernel : kernels) {
    ASSERT_TRUE(sgemm_force_kernel(kernel.c_str()));
    std::uniform_int_distribution<int> pick(0, static_cast<int>(std::size(sizes)) - 1);
    for (int t = 0; t < 60; ++t) {
      Case c{(t & 1) != 0, (t & 2) != 0, sizes[pick(rng)], sizes[pick(rng)], sizes[pick(rng)], 1.f, 0.f};
      if (t % 5 == 3) c.alpha = -0.5f;
      if (t % 3 == 1) c.beta = 0.75f;
      check_case(c, nullptr, {}, rng, kernel);
      ++cases;
    }
  }
  EXPECT_EQ(cases, 60 * static_cast<int>(kernels.size()));
  ASSERT_TRUE(sgemm_force_kernel(original.c_str()));
}

TEST(GemmTest, CrossesCacheBlocksAndThreadSplits) {
  std::mt19937 rng(7);
  ThreadPool pool(3);
  const std::string original = sgemm_kernel_name();
  for (const std::string& kernel : available_kernels()) {
    ASSERT_TRUE(sgemm_force_kernel(kernel.c_str()));
    // k > KC (256) and m > MC (144) and n > NC (2048) with ragged remainders.
    for (const Case& c : {Case{false, false, 150, 70, 600, 1.f, 0.f}, Case{true, true, 301, 45, 257, 2.f, 1.f},
                          Case{false, true, 20, 2100, 30, 1.f, 0.5f}, Case{true, false, 97, 333, 513, 1.f, 0.f}}) {
      check_case(c, &pool, {}, rng, kernel + " pool");
      check_case(c, nullptr, {}, rng, kernel);
    }
  }
  ASSERT_TRUE(sgemm_force_kernel(original.c_str()));
}

TEST(GemmTest, EdgeTilesOfEveryRowAndColumnCount) {
  // Every row count of a register tile (the SIMD kernels compile a variant
  // per count) against one and two vectors of columns, full and partial,
  // with beta, both biases and a clamp in the masked stores; and K blocks
  // (first / last) crossed.
  std::mt19937 rng(21);
  const std::string original = sgemm_kernel_name();
  const float dummy = 0.f;
  GemmEpilogue ep;
  ep.row_bias = &dummy;  // replaced by random biases in check_case
  ep.col_bias = &dummy;
  ep.clamp_min = -1.5f;
  ep.clamp_max = 1.25f;
  ThreadPool pool(3);
  for (const std::string& kernel : available_kernels()) {
    ASSERT_TRUE(sgemm_force_kernel(kernel.c_str()));
    for (int64_t m = 1; m <= 13; ++m) {
      for (int64_t n : {1, 3, 8, 15, 16, 17, 24, 31, 32, 33, 49}) {
        const int64_t k = (m + n) % 3 == 0 ? 260 : 5 + m;
        check_case(Case{m % 2 == 1, n % 2 == 0, m, n, k, 1.f, m % 3 == 0 ? 0.5f : 0.f}, nullptr,
                   m % 4 == 0 ? GemmEpilogue{} : ep, rng, kernel);
      }
    }
    check_case(Case{false, false, 25, 49, 40, 1.f, 0.f}, &pool, ep, rng, kernel + " pool");
    check_case(Case{true, false, 49, 1280 / 8, 33, 1.f, 0.f}, &pool, ep, rng, kernel + " pool");
  }
  ASSERT_TRUE(sgemm_force_kernel(original.c_str()));
}

TEST(GemmTest, SmallMReadsBInPlace) {
  // Up to 8 register tiles of rows, a raw untransposed B is read in place
  // (its full panels; the ragged last one packed): around that bound, over
  // K blocks, the N block (2048) and thread splits, with the epilogue.
  std::mt19937 rng(23);
  ThreadPool pool(2);
  const float dummy = 0.f;
  GemmEpilogue ep;
  ep.row_bias = &dummy;  // replaced by random biases in check_case
  ep.clamp_min = -2.f;
  const std::string original = sgemm_kernel_name();
  for (const std::string& kernel : available_kernels()) {
    ASSERT_TRUE(sgemm_force_kernel(kernel.c_str()));
    for (const Case& c : {Case{false, false, 96, 100, 300, 1.f, 0.f}, Case{true, false, 97, 70, 20, 1.f, 0.5f},
                          Case{false, false, 48, 2085, 17, 1.f, 0.f}, Case{false, false, 3, 32, 513, -1.f, 0.f}}) {
      check_case(c, nullptr, ep, rng, kernel);
      check_case(c, &pool, ep, rng, kernel + " pool");
    }
  }
  ASSERT_TRUE(sgemm_force_kernel(original.c_str()));
}

TEST(GemmTest, FewRowsSplitColumnsIntoPanels) {
  // Too few rows for a tile per thread: columns split down to single panels
  // at the panel edges nearest equal shares (ragged last panels, more
  // threads than panels, B raw / packed / transposed / in place), each split
  // checked on 2 and 3 threads.
  std::mt19937 rng(29);
  ThreadPool two(2), three(3);
  const float dummy = 0.f;
  GemmEpilogue ep;
  ep.row_bias = &dummy;  // replaced by random biases in check_case
  ep.clamp_min = -0.5f;
  const std::string original = sgemm_kernel_name();
  for (const std::string& kernel : available_kernels()) {
    ASSERT_TRUE(sgemm_force_kernel(kernel.c_str()));
    for (const Case& c : {Case{false, false, 32, 196, 1152, 1.f, 0.f}, Case{false, false, 32, 49, 600, 1.f, 0.f},
                          Case{true, true, 20, 70, 300, 1.f, 0.5f}, Case{false, false, 8, 40, 700, 1.f, 0.f},
                          Case{false, true, 13, 222, 90, -1.f, 0.f}, Case{false, false, 150, 33, 400, 1.f, 0.f}}) {
      check_case(c, &two, ep, rng, kernel + " 2 threads");
      check_case(c, &three, ep, rng, kernel + " 3 threads");
    }
  }
  ASSERT_TRUE(sgemm_force_kernel(original.c_str()));
}

TEST(GemmTest, OneRowTimesPackedBAndPackedATimesOneColumn) {
  // m == 1 with packed B and n == 1 with packed A take the GEMV path: every
  // panel width, K across cache blocks, transposes, thread splits, epilogue.
  std::mt19937 rng(9);
  ThreadPool pool(3);
  const std::string original = sgemm_kernel_name();
  GemmEpilogue ep;
  const float dummy = 0.f;
  ep.row_bias = &dummy;  // replaced by random biases in check_case
  ep.col_bias = &dummy;
  ep.clamp_min = -3.f;
  ep.clamp_max = 2.5f;
  for (const std::string& kernel : available_kernels()) {
    ASSERT_TRUE(sgemm_force_kernel(kernel.c_str()));
    for (const Case& c : {Case{false, true, 1, 1000, 600, 1.f, 0.f}, Case{true, false, 1, 37, 513, -0.5f, 0.75f},
                          Case{false, false, 1, 5, 3, 1.f, 0.f}, Case{false, false, 700, 1, 300, 2.f, 0.f},
                          Case{true, true, 45, 1, 1, 1.f, 1.f}, Case{false, true, 13, 1, 257, 1.f, 0.f}}) {
      check_case(c, &pool, ep, rng, kernel + " pool");
      check_case(c, nullptr, {}, rng, kernel);
    }
  }
  ASSERT_TRUE(sgemm_force_kernel(original.c_str()));
}

TEST(GemmTest, EpilogueAddsBiasesAndClamps) {
  std::mt19937 rng(3);
  const float dummy = 0.f;
  GemmEpilogue ep;
  ep.row_bias = &dummy;  // replaced by random biases in check_case
  ep.col_bias = &dummy;
  ep.clamp_min = -0.25f;
  ep.clamp_max = 0.5f;
  ThreadPool pool(2);
  for (const Case& c : {Case{false, false, 13, 37, 300, 1.f, 0.f}, Case{false, false, 64, 200, 9, 0.5f, 1.f},
                        Case{true, false, 6, 16, 8, 1.f, 0.f}}) {
    check_case(c, nullptr, ep, rng, "epilogue");
    check_case(c, &pool, ep, rng, "epilogue pool");
  }
}

TEST(GemmTest, ApplyRunsOnceOnEveryElementAfterTheClamp) {
  // apply (v -> 3v + 1) is not idempotent, so running twice on a block, or
  // before the last K block, or before the clamp, changes the result. Over
  // K blocks, M/N blocks, thread splits, the GEMV paths and k == 0.
  std::mt19937 rng(31);
  ThreadPool pool(3);
  auto apply = [](const void* ctx, float* c, int64_t ldc, int64_t rows, int64_t cols) {
    ++*static_cast<std::atomic<int64_t>*>(const_cast<void*>(ctx));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = 3.f * c[i * ldc + j] + 1.f;
  };
  struct Shape3 {
    int64_t m, n, k;
    bool pack_a, pack_b;
  };
  for (const Shape3& sh : {Shape3{150, 70, 600, true, false}, Shape3{13, 2100, 30, false, false},
                           Shape3{1, 77, 300, false, true}, Shape3{90, 1, 300, true, false},
                           Shape3{20, 33, 0, false, false}, Shape3{49, 160, 40, false, true}}) {
    for (ThreadPool* tp : {static_cast<ThreadPool*>(nullptr), &pool}) {
      const std::vector<float> a = random_vec(static_cast<size_t>(sh.m * sh.k + 1), rng);
      const std::vector<float> b = random_vec(static_cast<size_t>(sh.k * sh.n + 1), rng);
      const std::vector<float> bias = random_vec(static_cast<size_t>(sh.m), rng);
      GemmEpilogue ep;
      ep.row_bias = bias.data();
      ep.clamp_max = 0.5f;
      std::vector<float> want(static_cast<size_t>(sh.m * sh.n)), got(want.size());
      sgemm(false, false, sh.m, sh.n, sh.k, 1.f, a.data(), sh.k, b.data(), sh.n, 0.f, want.data(), sh.n, nullptr, ep);
      for (float& v : want) v = 3.f * v + 1.f;
      std::atomic<int64_t> calls{0};
      ep.apply = apply;
      ep.apply_ctx = &calls;
      const PackedMatrix pa = PackedMatrix::pack_a(false, sh.m, sh.k, a.data(), sh.k);
      const PackedMatrix pb = PackedMatrix::pack_b(false, sh.k, sh.n, b.data(), sh.n);
      const GemmOperand ao = sh.pack_a && sh.k > 0 ? GemmOperand::prepacked(pa) : GemmOperand::raw(a.data(), sh.k);
      const GemmOperand bo = sh.pack_b && sh.k > 0 ? GemmOperand::prepacked(pb) : GemmOperand::raw(b.data(), sh.n);
      sgemm_ex(sh.m, sh.n, sh.k, 1.f, ao, bo, 0.f, got.data(), sh.n, tp, ep);
      EXPECT_GT(calls.load(), 0);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4f * static_cast<float>(sh.k + 4)) << sh.m << "x" << sh.n << "x" << sh.k << " at " << i;
    }
  }
}

TEST(GemmTest, BetaZeroIgnoresNaNInOutput) {
  const std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  std::vector<float> c(4, std::nanf(""));
  sgemm(false, false, 2, 2, 2, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2, nullptr);
  EXPECT_EQ(c, (std::vector<float>{19, 22, 43, 50}));
}

TEST(GemmTest, EmptyKLeavesBetaCPlusBias) {
  std::vector<float> c{1, 2, 3, 4};
  const std::vector<float> col{10, 20};
  GemmEpilogue ep;
  ep.col_bias = col.data();
  sgemm(false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 1, 2.f, c.data(), 2, nullptr, ep);
  EXPECT_EQ(c, (std::vector<float>{12, 24, 16, 28}));
}

class ShiftedIdentitySource final : public BPanelSource {
 public:
  // B(p, j) = p * 100 + j
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const override {
    for (int64_t j = 0; j < (nc + nr - 1) / nr * nr; ++j)
      for (int64_t p = 0; p < kc; ++p)
        out[(j / nr) * kc * nr + p * nr + j % nr] = j < nc ? static_cast<float>((p0 + p) * 100 + j0 + j) : 0.f;
  }
};

TEST(GemmTest, PanelSourceFeedsB) {
  const int64_t m = 7, n = 45, k = 300;
  std::vector<float> a(m * k);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 5) - 2.f;
  std::vector<float> b(k * n);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) b[p * n + j] = static_cast<float>(p * 100 + j);
  std::vector<float> want(m * n), got(m * n);
  sgemm(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, want.data(), n, nullptr);
  ShiftedIdentitySource src;
  sgemm_ex(m, n, k, 1.f, GemmOperand::raw(a.data(), k), GemmOperand::from_source(src), 0.f, got.data(), n, nullptr);
  EXPECT_EQ(got, want);
}

TEST(GemmTest, PanelSourceSharedAcrossRowSplitTasks) {
  // Many rows, few columns: the pool splits rows only, and B is packed once
  // from the source and shared by the tasks.
  const int64_t m = 200, n = 45, k = 300;
  std::vector<float> a(m * k);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.f;
  std::vector<float> b(k * n);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) b[p * n + j] = static_cast<float>(p * 100 + j);
  std::vector<float> want(m * n), got(m * n);
  sgemm(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, want.data(), n, nullptr);
  ShiftedIdentitySource src;
  ThreadPool pool(2);
  sgemm_ex(m, n, k, 1.f, GemmOperand::raw(a.data(), k), GemmOperand::from_source(src), 0.f, got.data(), n, &pool);
  EXPECT_EQ(got, want);
}

// The thread split (gemm_plan.h) changes which tile computes an element of C,
// never how: every split on 2 and 3 threads gives the one-thread result bit
// for bit, over shapes with edge rows and columns, column tiles that start in
// the middle of a packed B panel, shared packed operands (A when only columns
// split, B when only rows do, from a panel source too) and B read in place.
TEST(GemmTest, ThreadSplitsMatchOneThreadBitForBit) {
  std::mt19937 rng(31);
  ThreadPool two(2), three(3);
  const std::string original = sgemm_kernel_name();
  const int64_t ms[] = {1, 5, 12, 13, 25, 49, 64, 97, 150};
  const int64_t ns[] = {16, 17, 33, 48, 49, 96, 100, 196, 230};
  const int64_t ks[] = {7, 64, 300};
  const ShiftedIdentitySource src;
  for (const std::string& kernel : available_kernels()) {
    ASSERT_TRUE(sgemm_force_kernel(kernel.c_str()));
    std::uniform_int_distribution<size_t> pm(0, std::size(ms) - 1), pn(0, std::size(ns) - 1), pk(0, std::size(ks) - 1);
    for (int t = 0; t < 48; ++t) {
      const int64_t m = ms[pm(rng)], n = ns[pn(rng)], k = ks[pk(rng)];
      const bool ta = t % 3 == 1, tb = t % 5 == 2;
      const int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
      const std::vector<float> a = random_vec(static_cast<size_t>((ta ? k : m) * lda), rng);
      const std::vector<float> b = random_vec(static_cast<size_t>((tb ? n : k) * ldb), rng);
      const std::vector<float> c0 = random_vec(static_cast<size_t>(m * ldc), rng);
      const std::vector<float> row_bias = random_vec(static_cast<size_t>(m), rng);
      GemmEpilogue ep;
      ep.row_bias = row_bias.data();
      ep.clamp_min = -1.f;
      ep.apply = [](const void*, float* c, int64_t ldc, int64_t rows, int64_t cols) {
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j) c[i * ldc + j] = 2.f * c[i * ldc + j] - 0.5f;
      };
      const float beta = t % 4 == 3 ? 0.5f : 0.f;
      const PackedMatrix pa = PackedMatrix::pack_a(ta, m, k, a.data(), lda);
      const PackedMatrix pb = PackedMatrix::pack_b(tb, k, n, b.data(), ldb);
      const GemmOperand forms[][2] = {
          {GemmOperand::raw(a.data(), lda, ta), GemmOperand::raw(b.data(), ldb, tb)},
          {GemmOperand::prepacked(pa), GemmOperand::raw(b.data(), ldb, tb)},
          {GemmOperand::raw(a.data(), lda, ta), GemmOperand::prepacked(pb)},
          {GemmOperand::prepacked(pa), GemmOperand::from_source(src)},
      };
      for (const auto& form : forms) {
        std::vector<float> want = c0;
        sgemm_ex(m, n, k, 1.f, form[0], form[1], beta, want.data(), ldc, nullptr, ep);
        for (ThreadPool* pool : {&two, &three}) {
          std::vector<float> got = c0;
          sgemm_ex(m, n, k, 1.f, form[0], form[1], beta, got.data(), ldc, pool, ep);
          ASSERT_EQ(got, want) << kernel << " " << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb
                               << " form " << (&form - forms) << " threads " << pool->num_threads();
        }
      }
    }
  }
  ASSERT_TRUE(sgemm_force_kernel(original.c_str()));
}

TEST(GemmTest, GenericGemmMatchesIntegerProduct) {
  const std::vector<int64_t> a{1, 2, 3, 4, 5, 6};  // 2x3
  const std::vector<int64_t> b{7, 8, 9, 10, 11, 12};  // 3x2
  std::vector<int64_t> c(4);
  gemm_generic<int64_t>(false, false, 2, 2, 3, a.data(), 3, b.data(), 2, c.data(), 2, false);
  EXPECT_EQ(c, (std::vector<int64_t>{58, 64, 139, 154}));
  // op(A) = A^T (3x2), op(B) = B^T (2x3): C[i][j] = sum_p a[p*3+i] * b[j*2+p].
  std::vector<int64_t> ct(9);
  gemm_generic<int64_t>(true, true, 3, 3, 2, a.data(), 3, b.data(), 2, ct.data(), 3, false);
  EXPECT_EQ(ct[0], 1 * 7 + 4 * 8);
  EXPECT_EQ(ct[5], 2 * 11 + 5 * 12);
}

TEST(GemmTest, ForceKernelRejectsUnknownNames) {
  const std::string original = sgemm_kernel_name();
  EXPECT_FALSE(sgemm_force_kernel("no-such-kernel"));
  EXPECT_EQ(original, sgemm_kernel_name());
}

}  // namespace
}  // namespace kiln::kernels

namespace kiln::kernels {
namespace {

// Packed bytes kept elsewhere (a program file) are used as they are, and
// only when their size matches this process's layout and they are aligned.
TEST(GemmTest, PackedBytesRoundTripAndAreChecked) {
  std::mt19937 rng(7);
  const int64_t m = 37, n = 29, k = 300;
  const std::vector<float> a = random_vec(static_cast<size_t>(m * k), rng);
  const std::vector<float> b = random_vec(static_cast<size_t>(k * n), rng);
  const PackedMatrix pa = PackedMatrix::pack_a(false, m, k, a.data(), k);
  const PackedMatrix pb = PackedMatrix::pack_b(false, k, n, b.data(), n);
  ASSERT_EQ(pa.bytes().size(), PackedMatrix::packed_bytes(true, m, k));
  ASSERT_EQ(pb.bytes().size(), PackedMatrix::packed_bytes(false, k, n));
  EXPECT_NE(PackedMatrix::layout_key(true), PackedMatrix::layout_key(false));
  // Copies, as a file's bytes would be.
  auto copy = [](std::span<const uint8_t> s) {
    std::shared_ptr<uint8_t> buf(static_cast<uint8_t*>(aligned_alloc_bytes(s.size() + 64)),
                                 [](uint8_t* p) { aligned_free_bytes(p); });
    std::memcpy(buf.get(), s.data(), s.size());
    return buf;
  };
  auto abuf = copy(pa.bytes()), bbuf = copy(pb.bytes());
  const PackedMatrix va = PackedMatrix::from_bytes(true, m, k, {abuf.get(), pa.bytes().size()}, abuf);
  const PackedMatrix vb = PackedMatrix::from_bytes(false, k, n, {bbuf.get(), pb.bytes().size()}, bbuf);
  ASSERT_FALSE(va.empty());
  ASSERT_FALSE(vb.empty());
  std::vector<float> c1(static_cast<size_t>(m * n)), c2(c1.size());
  sgemm(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c1.data(), n, nullptr);
  sgemm_ex(m, n, k, 1.f, GemmOperand::prepacked(va), GemmOperand::prepacked(vb), 0.f, c2.data(), n, nullptr);
  EXPECT_EQ(c1, c2);
  // A byte short, a byte long, misaligned, or another shape: a miss.
  EXPECT_TRUE(PackedMatrix::from_bytes(true, m, k, {abuf.get(), pa.bytes().size() - 1}, abuf).empty());
  EXPECT_TRUE(PackedMatrix::from_bytes(true, m, k, {abuf.get(), pa.bytes().size() + 1}, abuf).empty());
  EXPECT_TRUE(PackedMatrix::from_bytes(true, m, k, {abuf.get() + 4, pa.bytes().size()}, abuf).empty());
  EXPECT_TRUE(PackedMatrix::from_bytes(true, m, k + 1, {abuf.get(), pa.bytes().size()}, abuf).empty());
}

}  // namespace
}  // namespace kiln::kernels
