// RunState: everything one in-flight run of a Program owns: the value slots,
// the arena and the per-step input/output pointer tables. Kept in a pool by
// the Program and reused, so a run allocates nothing on the hot path once
// its plan is known.
#pragma once

#include <memory>
#include <vector>

#include "runtime/device_edges.h"
#include "runtime/program.h"
#include "runtime/static_steps.h"

namespace kiln::runtime {

class RunState {
 public:
  explicit RunState(const Program& program);
  ~RunState();
  RunState(const RunState&) = delete;
  RunState& operator=(const RunState&) = delete;

  /// Makes the arena at least `bytes` large.
  void reserve_arena(size_t bytes);

  std::vector<Value> slots;
  std::vector<const Value*> in_ptrs;  // per step, flattened
  std::vector<Value*> out_ptrs;
  std::vector<uint32_t> in_begin, out_begin;  // per step + 1

  uint8_t* arena = nullptr;
  size_t arena_bytes = 0;
  std::shared_ptr<const MemoryPlan> plan;
  std::vector<size_t> observed;        // bytes of values that missed the plan
  std::vector<ir::ValueId> missed;     // which ones
  // Device buffers, fences and in-flight calls of device plugins' partitions
  // (runtime/device_edges.h); null when the program has none.
  std::unique_ptr<DeviceRun> device;
  // Operand addresses of the program's static steps for this arena.
  StaticRun statics;
};

}  // namespace kiln::runtime
