// Static steps: the steps of a program that run as their kernels' static
// calls (kernels/static_call.h) when a run uses the program's static memory
// plan.
//
// With a static plan every planned value has a fixed dtype, shape and arena
// offset, so a step whose kernel binds to those shapes is a function pointer,
// a parameter block and a table of addresses fixed per run state: no Value,
// Tensor or KernelContext is built, nothing is allocated or looked up. The
// rest of the program is unchanged, and values cross between the two kinds
// of steps through the value slots:
// - a static step's output that a non-static step (or a subgraph) reads is
//   put in its slot as a view of the arena after the step (a "view");
// - an input a static step reads from a value it does not know (a graph
//   input, or the output of a non-static step) is a "slot operand": before
//   the call the executor checks that the slot holds a tensor of the bound
//   dtype and shape and takes its address.
// Shapes come from load-time shape inference. Static steps produce exactly
// their bound shapes (bind_static refuses outputs compute() would not
// produce), so only slot operands can disagree with inference at run time;
// when one does, the run leaves static calls for good (every live static
// output is put in its slot) and the remaining steps run through compute(),
// as before. Runs with another plan (other input shapes, a re-plan after a
// miss) or with device partitions never use static calls.
//
// Steps of concurrent groups (schedule.h) are not static: they are large by
// construction, and keeping them out leaves the group runner as it was.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "kernels/static_call.h"
#include "runtime/memory_plan.h"
#include "runtime/program.h"

namespace kiln::runtime {

/// A value with a bound dtype, shape and (for arena values) offset.
struct BoundValue {
  ir::ValueId id = ir::kNoValue;
  DType dtype = DType::kUndefined;
  Shape shape;
  int64_t offset = -1;  // arena offset; -1 for slot operands
};

/// Where a static step's operand comes from.
enum class OperandKind : uint8_t { kAbsent, kConstant, kArena, kSlot };

struct StaticOperand {
  OperandKind kind = OperandKind::kAbsent;
  const void* constant = nullptr;  // kConstant
  int64_t offset = -1;             // kArena
};

/// One static step: its call and where its operands' addresses are in the
/// run state's tables (StaticRun).
struct StaticStep {
  kernels::StaticCall call;
  uint32_t in_begin = 0, out_begin = 0;  // into StaticRun::in / out
  std::vector<BoundValue> slot_inputs;   // checked and read from slots before the call
  std::vector<uint32_t> slot_input_pos;  // their positions in StaticRun::in
  std::vector<BoundValue> views;         // outputs put in their slots after the call
};

class StaticSteps {
 public:
  /// Binds every step of `program` that can be bound under `plan` (the
  /// program's static plan). Null when no step can.
  static std::unique_ptr<const StaticSteps> build(const Program& program, std::shared_ptr<const MemoryPlan> plan);

  /// The plan the steps were bound under: runs with another use none.
  const MemoryPlan* plan() const { return plan_.get(); }
  size_t num_static() const { return steps_.size(); }
  /// The static step of program step s, or null.
  const StaticStep* step(size_t s) const { return index_[s] < 0 ? nullptr : &steps_[static_cast<size_t>(index_[s])]; }
  /// Operands of all static steps (inputs then outputs per step, flattened).
  const std::vector<StaticOperand>& inputs() const { return inputs_; }
  const std::vector<StaticOperand>& outputs() const { return outputs_; }
  /// Every static step's outputs, with the step that makes them and the
  /// last step that reads them (what leaving static calls puts in slots).
  struct Produced {
    BoundValue value;
    int32_t producer = -1;
    int32_t last_read = -1;
  };
  const std::vector<Produced>& produced() const { return produced_; }
  /// Per program step, the values it releases that can be in a slot while
  /// the run uses static calls (Step::release without the static outputs no
  /// step or subgraph reads from a slot): the slots of the others were never
  /// touched, so a run skips them (leaving static calls switches back to
  /// Step::release).
  const std::vector<ir::ValueId>& release(size_t s) const { return release_[s]; }

 private:
  std::shared_ptr<const MemoryPlan> plan_;
  std::vector<int32_t> index_;  // per program step: into steps_, or -1
  std::vector<StaticStep> steps_;
  std::vector<StaticOperand> inputs_, outputs_;
  std::vector<Produced> produced_;
  std::vector<std::vector<ir::ValueId>> release_;
};

/// A run state's addresses of the static steps' operands, resolved for its
/// arena (slot operands are filled before each call).
struct StaticRun {
  std::vector<const void*> in;
  std::vector<void*> out;
  const StaticSteps* steps = nullptr;  // what they were resolved for
  const uint8_t* arena = nullptr;

  /// Resolves the tables for `steps` and `arena` unless already done.
  void resolve(const StaticSteps& s, uint8_t* arena_base);
};

/// Whether programs bind static steps at all: false when the environment
/// sets KILN_STATIC_CALLS=0 (for comparisons), read once.
bool static_calls_enabled();

/// Makes `slot` a view of `data` with `bound`'s dtype and shape.
void put_view(Value& slot, const BoundValue& bound, uint8_t* data);

/// Whether `slot` holds a tensor of `bound`'s dtype and shape.
inline bool slot_matches(const Value& slot, const BoundValue& bound) {
  return slot.is_tensor() && slot.tensor().dtype() == bound.dtype && slot.tensor().shape() == bound.shape;
}

}  // namespace kiln::runtime
