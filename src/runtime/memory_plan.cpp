#include "runtime/memory_plan.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <numeric>
#include <string>

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

namespace kiln::runtime {

std::string verify_plan(const MemoryPlan& plan, const std::vector<size_t>& sizes,
                        const std::vector<Lifetime>& lifetimes, size_t alignment) {
  const size_t n = sizes.size();
  if (plan.offsets.size() != n || plan.sizes.size() != n || lifetimes.size() != n)
    return "the plan has " + std::to_string(plan.offsets.size()) + " offsets for " + std::to_string(n) + " values";
  std::vector<size_t> placed;  // values in the arena, by first step
  uint64_t total = 0;          // what stacking every value would take
  for (size_t v = 0; v < n; ++v) {
    const bool wanted = sizes[v] > 0 && lifetimes[v].first >= 0;
    const int64_t off = plan.offsets[v];
    if (off < 0) {
      if (wanted) return "value " + std::to_string(v) + " has no place in the plan";
      continue;
    }
    const auto uoff = static_cast<uint64_t>(off);
    if (uoff % alignment != 0 || plan.sizes[v] > plan.arena_bytes || uoff > plan.arena_bytes - plan.sizes[v])
      return "value " + std::to_string(v) + " at offset " + std::to_string(off) + " (" +
             std::to_string(plan.sizes[v]) + " bytes) is misaligned or outside the arena of " +
             std::to_string(plan.arena_bytes) + " bytes";
    // plan_memory places nothing else; a place for a value of unknown size
    // would be handed out at run time unchecked against the others.
    if (!wanted) return "value " + std::to_string(v) + " is not planned here but has a place";
    if (plan.sizes[v] < sizes[v])
      return "value " + std::to_string(v) + " needs " + std::to_string(sizes[v]) + " bytes, the plan reserves " +
             std::to_string(plan.sizes[v]);
    placed.push_back(v);
    total += (sizes[v] + alignment - 1) / alignment * alignment;
  }
  // plan_memory's arena never exceeds the stacked sizes; a larger one is
  // not a plan of these values (and could ask for any amount of memory).
  if (plan.arena_bytes > total)
    return "arena of " + std::to_string(plan.arena_bytes) + " bytes for values that need at most " +
           std::to_string(total);
  // Sweep the steps: values live at once (inclusive intervals) must not
  // share bytes. `live` maps offset -> (end, value).
  std::sort(placed.begin(), placed.end(),
            [&](size_t a, size_t b) { return lifetimes[a].first < lifetimes[b].first; });
  std::vector<size_t> by_last = placed;
  std::sort(by_last.begin(), by_last.end(),
            [&](size_t a, size_t b) { return lifetimes[a].last < lifetimes[b].last; });
  std::map<uint64_t, std::pair<uint64_t, size_t>> live;
  size_t next_out = 0;
  for (size_t v : placed) {
    const int32_t first = lifetimes[v].first;
    for (; next_out < by_last.size() && lifetimes[by_last[next_out]].last < first; ++next_out) {
      const size_t d = by_last[next_out];
      auto it = live.find(static_cast<uint64_t>(plan.offsets[d]));
      if (it != live.end() && it->second.second == d) live.erase(it);
    }
    const auto begin = static_cast<uint64_t>(plan.offsets[v]);
    const uint64_t end = begin + plan.sizes[v];
    auto it = live.lower_bound(begin);
    const bool clash_next = it != live.end() && it->first < end;  // includes the same offset
    const bool clash_prev = it != live.begin() && std::prev(it)->second.first > begin;
    if (clash_next || clash_prev)
      return "values " + std::to_string(v) + " and " +
             std::to_string((clash_next ? it : std::prev(it))->second.second) + " are live at once and share bytes";
    live.emplace(begin, std::make_pair(end, v));
  }
  return {};
}

}  // namespace kiln::runtime
