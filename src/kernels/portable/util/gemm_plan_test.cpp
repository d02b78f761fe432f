// Tests of the SGEMM engine's thread split (gemm_plan.h): the grid covers C
// on register-tile and vector edges, and two or three threads get balanced
// shares of the products of small feature maps.
#include "kernels/portable/util/gemm_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::kernels::gemm {
namespace {

constexpr TileGeometry kAvx512{12, 32, 16};
constexpr TileGeometry kAvx2{6, 16, 8};
constexpr TileGeometry kPortable{4, 8, 8};

std::string describe(const GemmShape& s, int64_t threads) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " on " +
         std::to_string(threads) + " threads";
}

// Every tile non-empty, on the edges the engine needs, and C covered.
void expect_covers(const TilePlan& p, const GemmShape& s, const TileGeometry& g, const std::string& what) {
  ASSERT_GE(p.tm, 1) << what;
  ASSERT_GE(p.tn, 1) << what;
  EXPECT_EQ(p.row_begin(0), 0) << what;
  EXPECT_EQ(p.row_begin(p.tm), s.m) << what;
  EXPECT_EQ(p.col_begin(0), 0) << what;
  EXPECT_EQ(p.col_begin(p.tn), s.n) << what;
  for (int64_t r = 0; r < p.tm; ++r) {
    EXPECT_LT(p.row_begin(r), p.row_begin(r + 1)) << what << " row tile " << r;
    EXPECT_EQ(p.row_begin(r) % g.mr, 0) << what << " row tile " << r;
  }
  for (int64_t c = 0; c < p.tn; ++c) {
    EXPECT_LT(p.col_begin(c), p.col_begin(c + 1)) << what << " column tile " << c;
    EXPECT_EQ(p.col_begin(c) % g.lane, 0) << what << " column tile " << c;
  }
  EXPECT_FALSE(p.share_a && p.tm != 1) << what;
  EXPECT_FALSE(p.share_b && p.tn != 1) << what;
}

// The microkernel work of the busiest thread (tiles dealt in equal runs, as
// parallel_for does) over the work of an even share, in register rows times
// vectors: 1 is a perfect split.
double imbalance(const TilePlan& p, const TileGeometry& g, int64_t threads) {
  std::vector<double> tile;
  double total = 0;
  for (int64_t r = 0; r < p.tm; ++r) {
    for (int64_t c = 0; c < p.tn; ++c) {
      const int64_t rows = p.row_begin(r + 1) - p.row_begin(r);
      const int64_t vecs = (p.col_begin(c + 1) - p.col_begin(c) + g.lane - 1) / g.lane;
      tile.push_back(static_cast<double>((rows + (rows + g.mr - 1) / g.mr) * vecs));
      total += tile.back();
    }
  }
  const int64_t n = p.tiles(), per = (n + threads - 1) / threads, chunks = (n + per - 1) / per;
  double worst = 0;
  for (int64_t ch = 0; ch < chunks; ++ch) {
    double sum = 0;
    for (int64_t t = ch * n / chunks; t < (ch + 1) * n / chunks; ++t) sum += tile[static_cast<size_t>(t)];
    worst = std::max(worst, sum);
  }
  return worst / (total / static_cast<double>(threads));
}

TEST(GemmPlanTest, OneThreadOrATinyProductIsOneTile) {
  EXPECT_EQ(plan_tiles({490, 960, 160, true, false, false, false}, kAvx512, 1).tiles(), 1);
  EXPECT_EQ(plan_tiles({8, 16, 4, true, false, true, false}, kAvx512, 2).tiles(), 1);
  EXPECT_EQ(plan_tiles({3, 5, 2, false, false, false, false}, kAvx2, 3).tiles(), 1);
}

TEST(GemmPlanTest, TilesCoverCOnRegisterAndVectorEdges) {
  for (const TileGeometry& g : {kAvx512, kAvx2, kPortable}) {
    for (int64_t threads : {2, 3, 4}) {
      for (int64_t m : {1, 7, 12, 13, 49, 64, 97, 160, 576}) {
        for (int64_t n : {1, 16, 17, 49, 96, 196, 785, 3136}) {
          for (int64_t k : {9, 160, 600}) {
            for (int flags = 0; flags < 4; ++flags) {
              const GemmShape s{m, n, k, (flags & 1) != 0, (flags & 2) != 0, false, (flags & 2) == 0};
              expect_covers(plan_tiles(s, g, threads), s, g, describe(s, threads));
            }
          }
        }
      }
    }
  }
}

// The products of mobile nets' pointwise convs on 14x14 and 7x7 maps (W X,
// or X^T W^T where 49 positions fill vectors badly), with enough work for
// two threads: the busiest thread has at most 1/8 more than an even share
// (panel-sized tiles left 4 + 3 panels of 32 columns, or worse), on three
// at most 1/4 more (160 columns are 10 vectors: 4 + 3 + 3 at best).
TEST(GemmPlanTest, SmallMapProductsSplitEvenlyOverTwoAndThreeThreads) {
  const GemmShape shapes[] = {
      {49, 960, 160, false, true, false, false},   // 7x7, 160 -> 960, transposed
      {49, 160, 960, false, true, false, false},   // 7x7, 960 -> 160
      {49, 96, 576, false, true, false, false},    // 7x7, 576 -> 96
      {49, 1280, 320, false, true, false, false},  // 7x7, 320 -> 1280
      {64, 196, 384, true, false, true, false},    // 14x14, 384 -> 64, B read in place
      {96, 196, 576, true, false, true, false},    // 14x14, 576 -> 96
      {672, 196, 112, true, false, false, false},  // 14x14, 112 -> 672
      {240, 196, 40, true, false, false, false},   // 14x14, 40 -> 240
      {144, 784, 24, true, false, false, false},   // 28x28, 24 -> 144
      {32, 3136, 144, true, false, true, false},   // 56x56, 144 -> 32
  };
  for (const TileGeometry& g : {kAvx512, kAvx2}) {
    for (int64_t threads : {2, 3}) {
      for (const GemmShape& s : shapes) {
        const TilePlan p = plan_tiles(s, g, threads);
        const std::string what = describe(s, threads) + " mr " + std::to_string(g.mr);
        ASSERT_GE(p.tiles(), threads) << what;
        EXPECT_LE(imbalance(p, g, threads), threads == 2 ? 1.125 : 1.25) << what << ": " << p.tm << " x " << p.tn << " tiles";
      }
    }
  }
}

TEST(GemmPlanTest, SharesTheOperandEveryTileWouldPack) {
  // Few rows: columns split, and A (not pre-packed) is packed once for all.
  const TilePlan cols = plan_tiles({49, 960, 160, false, true, false, false}, kAvx512, 2);
  EXPECT_EQ(cols.tm, 1);
  EXPECT_TRUE(cols.share_a);
  EXPECT_FALSE(cols.share_b);
  // Many rows, few columns: rows split, and B (an im2col source) is packed once.
  const TilePlan rows = plan_tiles({512, 40, 576, true, false, false, true}, kAvx512, 2);
  EXPECT_EQ(rows.tn, 1);
  EXPECT_TRUE(rows.share_b);
  EXPECT_FALSE(rows.share_a);
}

}  // namespace
}  // namespace kiln::kernels::gemm
