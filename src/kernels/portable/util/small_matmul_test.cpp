// small_matmul_f32 against a double-precision product, over the shapes that
// exercise its tiles: rows past each row group (m % 6, m % 4, m % 2), columns
// past each 16/32-column block, k from 1 to kSmallMatMulMaxK, and operands
// read plain, transposed and through a padded row stride.
#include "kernels/portable/util/small_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace kiln::kernels {
namespace {

struct Layout {
  bool trans;  // stored as its transpose (column-major)
  int64_t pad;  // extra elements between stored rows
};

// A rows x cols matrix with random values stored in `layout`.
struct Stored {
  std::vector<float> data;
  StridedMatrix view;
};

Stored make(int64_t rows, int64_t cols, Layout layout, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t outer = layout.trans ? cols : rows, inner = layout.trans ? rows : cols;
  const int64_t ld = inner + layout.pad;
  Stored s;
  s.data.resize(static_cast<size_t>(outer * ld));
  for (float& v : s.data) v = u(rng);
  s.view = layout.trans ? StridedMatrix{s.data.data(), 1, ld} : StridedMatrix{s.data.data(), ld, 1};
  return s;
}

float at(const StridedMatrix& x, int64_t r, int64_t c) { return x.p[r * x.rs + c * x.cs]; }

void check_variant(int variant, int64_t m, int64_t n, int64_t k, const Stored& a, const Stored& b, float alpha) {
  const int64_t ldc = n + 3;
  std::vector<float> c(static_cast<size_t>(m * ldc), 7.f);
  if (!small_matmul_f32_variant(variant, m, n, k, alpha, a.view, b.view, c.data(), ldc)) return;

  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        want += static_cast<double>(at(a.view, i, p)) * at(b.view, p, j);
        mag += std::fabs(static_cast<double>(at(a.view, i, p)) * at(b.view, p, j));
      }
      want *= alpha;
      ASSERT_NEAR(c[static_cast<size_t>(i * ldc + j)], want, 1e-6 * (1 + mag))
          << m << "x" << n << "x" << k << " strides " << a.view.rs << "," << a.view.cs << " " << b.view.rs << ","
          << b.view.cs << " at " << i << "," << j;
    }
    for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], 7.f) << "wrote past column n";
  }
}

// Every variant this CPU runs (AVX-512, AVX2, baseline), each on its own C.
void check(int64_t m, int64_t n, int64_t k, Layout la, Layout lb, float alpha, std::mt19937& rng) {
  const Stored a = make(m, k, la, rng), b = make(k, n, lb, rng);
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(::testing::Message() << "variant " << variant);
    check_variant(variant, m, n, k, a, b, alpha);
  }
}

TEST(SmallMatMulTest, MatchesDoubleProductOverTilesAndLayouts) {
  std::mt19937 rng(11);
  const Layout layouts[] = {{false, 0}, {true, 0}, {false, 5}, {true, 3}};
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 13, 48})
    for (int64_t n : {1, 15, 16, 17, 32, 33, 48, 70})
      for (int64_t k : {1, 7, 32, 33})
        for (const Layout& la : layouts)
          for (const Layout& lb : layouts) check(m, n, k, la, lb, k % 2 ? 0.125f : 1.f, rng);
}

TEST(SmallMatMulTest, LongInnerDimensionUpToTheLimit) {
  std::mt19937 rng(12);
  for (int64_t k : {int64_t{200}, int64_t{384}, kSmallMatMulMaxK}) {
    check(9, 37, k, {false, 0}, {false, 0}, 1.f, rng);
    check(9, 37, k, {false, 0}, {true, 0}, 1.f, rng);
  }
}

}  // namespace
}  // namespace kiln::kernels
