// Static memory planning: given each value's byte size and the interval of
// steps during which it is live, choose offsets in one arena so that values
// whose lifetimes overlap never share bytes (greedy by size, as TFLite's
// GreedyMemoryPlanner; within a few percent of optimal on CNNs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::runtime {

struct Lifetime {
  int32_t first = -1;  // step that produces the value (-1: not planned)
  int32_t last = -1;   // last step that reads it (inclusive)
};

struct MemoryPlan {
  size_t arena_bytes = 0;
  std::vector<int64_t> offsets;  // per value; -1 = not in the arena
  std::vector<size_t> sizes;     // bytes reserved per value
};

/// Checks a plan made elsewhere (a program file's) against `sizes` and
/// `lifetimes` as plan_memory would take them: every value plan_memory would
/// place has an `alignment`-aligned offset and a reserved size of at least
/// its bytes, inside the arena (no overflow), no other value has a place,
/// and no two values whose lifetimes overlap share bytes. Empty string when it fits, else why not.
std::string verify_plan(const MemoryPlan& plan, const std::vector<size_t>& sizes,
                        const std::vector<Lifetime>& lifetimes, size_t alignment = 64);

/// Offsets are multiples of `alignment`. Values with size 0 or first < 0 get -1.
MemoryPlan plan_memory(const std::vector<size_t>& sizes, const std::vector<Lifetime>& lifetimes,
                       size_t alignment = 64);

}  // namespace kiln::runtime
