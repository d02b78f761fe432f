#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

namespace kiln::runtime {
namespace {

bool overlaps(const MemoryPlan& p, size_t a, size_t b) {
  auto oa = static_cast<size_t>(p.offsets[a]), ob = static_cast<size_t>(p.offsets[b]);
  return oa < ob + p.sizes[b] && ob < oa + p.sizes[a];
}

TEST(MemoryPlanTest, ChainReusesMemory) {
  // v0 -> v1 -> v2 -> v3: only neighbours are live together.
  std::vector<size_t> sizes = {1000, 1000, 1000, 1000};
  std::vector<Lifetime> life = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
  MemoryPlan p = plan_memory(sizes, life);
  EXPECT_LE(p.arena_bytes, 2 * 1024u);
  EXPECT_FALSE(overlaps(p, 0, 1));
  EXPECT_FALSE(overlaps(p, 1, 2));
  EXPECT_FALSE(overlaps(p, 2, 3));
}

TEST(MemoryPlanTest, LiveTogetherNeverShare) {
  std::vector<size_t> sizes = {64, 128, 4096, 10, 777};
  std::vector<Lifetime> life = {{0, 5}, {1, 3}, {2, 4}, {3, 3}, {0, 0}};
  MemoryPlan p = plan_memory(sizes, life);
  for (size_t a = 0; a < sizes.size(); ++a)
    for (size_t b = a + 1; b < sizes.size(); ++b)
      if (life[a].first <= life[b].last && life[b].first <= life[a].last) {
        EXPECT_FALSE(overlaps(p, a, b)) << a << "," << b;
      }
  for (int64_t o : p.offsets) EXPECT_EQ(o % 64, 0);
}

TEST(MemoryPlanTest, UnplannedValuesGetNoOffset) {
  MemoryPlan p = plan_memory({0, 100}, {{0, 1}, {-1, -1}});
  EXPECT_EQ(p.offsets[0], -1);
  EXPECT_EQ(p.offsets[1], -1);
  EXPECT_EQ(p.arena_bytes, 0u);
}

}  // namespace
}  // namespace kiln::runtime
