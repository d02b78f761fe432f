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

namespace kiln::runtime {
namespace {

TEST(MemoryPlanTest, VerifyAcceptsWhatPlanMemoryMakes) {
  const std::vector<size_t> sizes = {1000, 200, 3000, 0, 64, 1000};
  const std::vector<Lifetime> life = {{0, 2}, {1, 1}, {1, 3}, {}, {2, 4}, {3, 5}};
  const MemoryPlan p = plan_memory(sizes, life);
  EXPECT_EQ(verify_plan(p, sizes, life), "");
}

TEST(MemoryPlanTest, VerifyRejectsBadPlans) {
  const std::vector<size_t> sizes = {1000, 1000, 1000};
  const std::vector<Lifetime> life = {{0, 1}, {1, 2}, {2, 3}};
  const MemoryPlan good = plan_memory(sizes, life);
  ASSERT_EQ(verify_plan(good, sizes, life), "");
  auto broken = [&](auto edit) {
    MemoryPlan p = good;
    edit(p);
    return verify_plan(p, sizes, life);
  };
  // Values 0 and 1 are live together at step 1: sharing bytes is refused.
  EXPECT_NE(broken([](MemoryPlan& p) { p.offsets[1] = p.offsets[0]; }).find("share bytes"), std::string::npos);
  EXPECT_NE(broken([](MemoryPlan& p) { p.offsets[1] = p.offsets[0] + 64; }).find("share bytes"), std::string::npos);
  // Values 0 and 2 are never live together: sharing is fine.
  EXPECT_EQ(broken([](MemoryPlan& p) { p.offsets[2] = p.offsets[0]; }), "");
  EXPECT_NE(broken([](MemoryPlan& p) { p.offsets[0] = 32; }).find("misaligned"), std::string::npos);
  EXPECT_NE(broken([](MemoryPlan& p) { p.offsets[0] = static_cast<int64_t>(p.arena_bytes); }).find("outside"),
            std::string::npos);
  EXPECT_NE(broken([](MemoryPlan& p) { p.offsets[0] = INT64_MAX - 63; }).find("outside"), std::string::npos);
  EXPECT_NE(broken([](MemoryPlan& p) { p.sizes[0] = SIZE_MAX; }).find("outside"), std::string::npos);
  EXPECT_NE(broken([](MemoryPlan& p) { p.sizes[0] = 512; }).find("needs 1000"), std::string::npos);
  EXPECT_NE(broken([](MemoryPlan& p) { p.offsets[0] = -1; }).find("no place"), std::string::npos);
  EXPECT_NE(broken([](MemoryPlan& p) { p.offsets.pop_back(); }).find("offsets for"), std::string::npos);
  // A place for a value the runtime does not plan (size unknown at load).
  const std::vector<size_t> unknown = {1000, 0, 1000};
  MemoryPlan extra = plan_memory(unknown, life);
  ASSERT_EQ(verify_plan(extra, unknown, life), "");
  extra.offsets[1] = 0;
  extra.sizes[1] = 64;
  EXPECT_NE(verify_plan(extra, unknown, life).find("not planned here"), std::string::npos);
  EXPECT_NE(broken([](MemoryPlan& p) { p.arena_bytes = size_t{1} << 40; }).find("need at most"), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime
