#include "optimizer/graph_uses.h"

#include <algorithm>

namespace kiln::optimizer {

GraphUses::GraphUses(const ir::Graph& g, const std::vector<uint8_t>& removed)
    : producer_(g.values.size(), -1), readers_(g.values.size()), pinned_(g.values.size(), 0) {
  auto live = [&](size_t ni) { return removed.empty() || !removed[ni]; };
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!live(ni)) continue;
    const ir::Node& n = g.nodes[ni];
    for (ir::ValueId v : n.inputs)
      if (valid(v)) readers_[static_cast<size_t>(v)].push_back(static_cast<int32_t>(ni));
    for (ir::ValueId v : n.outputs)
      if (valid(v)) producer_[static_cast<size_t>(v)] = static_cast<int32_t>(ni);
    // Values a subgraph reads from this scope are found by name.
    for (const ir::Attribute& a : n.attributes) {
      std::vector<const ir::Graph*> subs;
      if (a.type == ir::AttrType::kGraph && a.g) subs.push_back(a.g.get());
      if (a.type == ir::AttrType::kGraphs)
        for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const ir::Graph* sg : subs)
        for (ir::ValueId ref : sg->outer_refs) {
          const ir::ValueId outer = g.find_value(sg->value_name(ref));
          if (valid(outer)) pinned_[static_cast<size_t>(outer)] = 1;
        }
    }
  }
  for (ir::ValueId v : g.outputs)
    if (valid(v)) pinned_[static_cast<size_t>(v)] = 1;
  // A subgraph's own outer refs leave it; treat them as read from outside.
  for (ir::ValueId v : g.outer_refs)
    if (valid(v)) pinned_[static_cast<size_t>(v)] = 1;
}

const std::vector<int32_t>& GraphUses::readers(ir::ValueId v) const {
  return valid(v) ? readers_[static_cast<size_t>(v)] : none_;
}

bool GraphUses::read_only_by(ir::ValueId v, const std::vector<int32_t>& nodes) const {
  if (pinned(v)) return false;
  for (int32_t r : readers(v))
    if (std::find(nodes.begin(), nodes.end(), r) == nodes.end()) return false;
  return true;
}

void replace_uses(ir::Graph& g, const std::vector<uint8_t>& removed, ir::ValueId from, ir::ValueId to) {
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!removed.empty() && removed[ni]) continue;
    for (ir::ValueId& v : g.nodes[ni].inputs)
      if (v == from) v = to;
  }
}

const Tensor* find_constant(const ConstantMap& constants, ir::ValueId v) {
  if (v == ir::kNoValue) return nullptr;
  auto it = constants.find(v);
  return it == constants.end() ? nullptr : &it->second;
}

bool constant_scalar(const ConstantMap& constants, ir::ValueId v, float* out) {
  const Tensor* t = find_constant(constants, v);
  if (!t || t->dtype() != DType::kFloat32 || t->numel() != 1) return false;
  *out = t->data<float>()[0];
  return true;
}

ir::ValueId add_constant(ir::Graph& g, ConstantMap& constants, const std::string& base, Tensor t) {
  std::string name = base;
  for (int i = 1; g.find_value(name) != ir::kNoValue; ++i) name = base + "_" + std::to_string(i);
  std::vector<ir::Dim> dims;
  for (int64_t d : t.shape()) dims.push_back(ir::Dim{d, {}});
  const ir::ValueId id = g.add_value(name, ir::ValueType::tensor(t.dtype(), std::move(dims)));
  constants[id] = std::move(t);
  return id;
}

}  // namespace kiln::optimizer
