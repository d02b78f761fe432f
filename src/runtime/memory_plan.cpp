#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace kiln::runtime {

MemoryPlan plan_memory(const std::vector<size_t>& sizes, const std::vector<Lifetime>& lifetimes,
                       size_t alignment) {
  MemoryPlan plan;
  const size_t n = sizes.size();
  plan.offsets.assign(n, -1);
  plan.sizes.assign(n, 0);
  std::vector<size_t> order;
  for (size_t v = 0; v < n; ++v)
    if (sizes[v] > 0 && lifetimes[v].first >= 0) order.push_back(v);
  // Largest first; ties by earlier start keep the plan deterministic.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
    return a < b;
  });
  struct Placed {
    size_t offset, size;
    Lifetime life;
  };
  std::vector<Placed> placed;
  std::vector<const Placed*> overlapping;
  for (size_t v : order) {
    const size_t size = (sizes[v] + alignment - 1) / alignment * alignment;
    const Lifetime life = lifetimes[v];
    overlapping.clear();
    for (const Placed& p : placed)
      if (p.life.first <= life.last && life.first <= p.life.last) overlapping.push_back(&p);
    std::sort(overlapping.begin(), overlapping.end(),
              [](const Placed* a, const Placed* b) { return a->offset < b->offset; });
    // Best fit: the smallest gap between live neighbours that holds `size`.
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const Placed* p : overlapping) {
      if (p->offset >= cursor) {
        size_t gap = p->offset - cursor;
        if (gap >= size && gap < best_gap) {
          best = cursor;
          best_gap = gap;
        }
      }
      cursor = std::max(cursor, p->offset + p->size);
    }
    if (best == SIZE_MAX) best = cursor;
    placed.push_back(Placed{best, size, life});
    plan.offsets[v] = static_cast<int64_t>(best);
    plan.sizes[v] = size;
    plan.arena_bytes = std::max(plan.arena_bytes, best + size);
  }
  return plan;
}

}  // namespace kiln::runtime
