#include "runtime/static_steps.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/tensor_access.h"
#include "ir/subgraphs.h"

namespace kiln::runtime {

namespace {

// The bound signature of one step, or false when a value has no static
// dtype and shape or an output has no place in the arena.
bool signature_of(const Program& program, const MemoryPlan& plan, const ir::Node& node,
                  std::vector<kernels::TensorSig>* ins, std::vector<kernels::TensorSig>* outs) {
  const ir::Graph& g = program.graph();
  ins->assign(node.inputs.size(), {});
  outs->assign(node.outputs.size(), {});
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ir::ValueId id = node.inputs[i];
    if (id == ir::kNoValue) continue;
    if (auto c = program.constants().find(id); c != program.constants().end()) {
      (*ins)[i] = {c->second.dtype(), c->second.shape()};
      continue;
    }
    const ir::ValueType& t = g.value(id).type;
    if (!t.is_static() || t.dtype == DType::kString) return false;
    (*ins)[i] = {t.dtype, t.static_shape()};
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const ir::ValueId id = node.outputs[i];
    if (id == ir::kNoValue) return false;  // kernels write every output of a static call
    const ir::ValueType& t = g.value(id).type;
    if (!t.is_static() || t.dtype == DType::kString) return false;
    const auto v = static_cast<size_t>(id);
    const size_t bytes = static_cast<size_t>(t.static_shape().numel()) * dtype_size(t.dtype);
    if (v >= plan.offsets.size() || plan.offsets[v] < 0 || plan.sizes[v] < bytes || bytes == 0) return false;
    (*outs)[i] = {t.dtype, t.static_shape()};
  }
  return true;
}

// Per step, whether it belongs to a group of two or more steps.
std::vector<char> grouped_steps(const Program& program) {
  std::vector<char> grouped(program.num_steps(), 0);
  const std::vector<uint32_t>& groups = program.groups();
  for (size_t i = 0; i + 1 < groups.size(); ++i)
    if (groups[i + 1] - groups[i] > 1) std::fill(grouped.begin() + groups[i], grouped.begin() + groups[i + 1], 1);
  return grouped;
}

}  // namespace

std::unique_ptr<const StaticSteps> StaticSteps::build(const Program& program, std::shared_ptr<const MemoryPlan> plan) {
  if (!plan) return nullptr;
  const ir::Graph& g = program.graph();
  const std::vector<Step>& steps = program.steps();
  const size_t n = steps.size();
  std::unique_ptr<StaticSteps> ss(new StaticSteps());
  ss->plan_ = plan;
  ss->index_.assign(n, -1);
  const std::vector<char> grouped = grouped_steps(program);
  bool subgraphs = false;  // values read by subgraphs are not listed as inputs: keep every output in its slot
  std::vector<std::vector<kernels::TensorSig>> sigs(n);
  std::vector<int32_t> producer(g.values.size(), -1);  // the static step making each value
  for (size_t s = 0; s < n; ++s) {
    const Step& step = steps[s];
    subgraphs = subgraphs || ir::has_subgraph(*step.node);
    const auto* callable = dynamic_cast<const kernels::StaticCallable*>(step.kernel.get());
    if (!callable || grouped[s]) continue;
    std::vector<kernels::TensorSig> ins, outs;
    if (!signature_of(program, *plan, *step.node, &ins, &outs)) continue;
    StaticStep st;
    if (!callable->bind_static(kernels::StaticSignature{ins, outs}, &st.call) || !st.call.fn) continue;
    ss->index_[s] = static_cast<int32_t>(ss->steps_.size());
    ss->steps_.push_back(std::move(st));
    for (ir::ValueId id : step.node->outputs) producer[static_cast<size_t>(id)] = static_cast<int32_t>(s);
    ins.insert(ins.end(), outs.begin(), outs.end());
    sigs[s] = std::move(ins);
  }
  if (ss->steps_.empty()) return nullptr;

  // Who reads each value after it is made: the last reader, and whether a
  // non-static step is one.
  std::vector<int32_t> last_read(g.values.size(), -1);
  std::vector<char> read_by_other(g.values.size(), 0);
  for (size_t s = 0; s < n; ++s)
    for (ir::ValueId id : steps[s].node->inputs) {
      if (id == ir::kNoValue) continue;
      last_read[static_cast<size_t>(id)] = static_cast<int32_t>(s);
      if (ss->index_[s] < 0) read_by_other[static_cast<size_t>(id)] = 1;
    }

  for (size_t s = 0; s < n; ++s) {
    if (ss->index_[s] < 0) continue;
    StaticStep& st = ss->steps_[static_cast<size_t>(ss->index_[s])];
    const ir::Node& node = *steps[s].node;
    st.in_begin = static_cast<uint32_t>(ss->inputs_.size());
    st.out_begin = static_cast<uint32_t>(ss->outputs_.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ir::ValueId id = node.inputs[i];
      StaticOperand op;
      if (id == ir::kNoValue) {
        op.kind = OperandKind::kAbsent;
      } else if (auto c = program.constants().find(id); c != program.constants().end()) {
        op = {OperandKind::kConstant, c->second.raw_data(), -1};
      } else if (producer[static_cast<size_t>(id)] >= 0) {
        op = {OperandKind::kArena, nullptr, plan->offsets[static_cast<size_t>(id)]};
      } else {
        op.kind = OperandKind::kSlot;
        st.slot_input_pos.push_back(static_cast<uint32_t>(ss->inputs_.size()));
        st.slot_inputs.push_back(BoundValue{id, sigs[s][i].dtype, sigs[s][i].shape, -1});
      }
      ss->inputs_.push_back(op);
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      const ir::ValueId id = node.outputs[i];
      const auto v = static_cast<size_t>(id);
      const kernels::TensorSig& sig = sigs[s][node.inputs.size() + i];
      const BoundValue bound{id, sig.dtype, sig.shape, plan->offsets[v]};
      ss->outputs_.push_back({OperandKind::kArena, nullptr, plan->offsets[v]});
      if (subgraphs || read_by_other[v]) st.views.push_back(bound);
      ss->produced_.push_back({bound, static_cast<int32_t>(s), subgraphs ? static_cast<int32_t>(n) : last_read[v]});
    }
  }
  std::vector<char> slot_free(g.values.size(), 0);  // static outputs never put in a slot
  for (const Produced& p : ss->produced_) slot_free[static_cast<size_t>(p.value.id)] = 1;
  for (const StaticStep& st : ss->steps_)
    for (const BoundValue& v : st.views) slot_free[static_cast<size_t>(v.id)] = 0;
  ss->release_.resize(n);
  for (size_t s = 0; s < n; ++s)
    for (ir::ValueId id : steps[s].release)
      if (!slot_free[static_cast<size_t>(id)]) ss->release_[s].push_back(id);
  return ss;
}

void StaticRun::resolve(const StaticSteps& s, uint8_t* arena_base) {
  if (steps == &s && arena == arena_base) return;
  auto address = [&](const StaticOperand& op) -> uint8_t* {
    switch (op.kind) {
      case OperandKind::kConstant: return static_cast<uint8_t*>(const_cast<void*>(op.constant));
      case OperandKind::kArena: return arena_base + op.offset;
      default: return nullptr;
    }
  };
  in.resize(s.inputs().size());
  out.resize(s.outputs().size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = address(s.inputs()[i]);
  for (size_t i = 0; i < out.size(); ++i) out[i] = address(s.outputs()[i]);
  steps = &s;
  arena = arena_base;
}

bool static_calls_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("KILN_STATIC_CALLS");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return on;
}

void put_view(Value& slot, const BoundValue& bound, uint8_t* data) {
  if (!slot.is_tensor()) slot = Value(Tensor());
  core::TensorAccess::reset_view(slot.tensor(), bound.dtype, bound.shape, data);
}

}  // namespace kiln::runtime
