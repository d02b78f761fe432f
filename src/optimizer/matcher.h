// Matcher: what phase-B pattern matchers (optimizer.h) share: the graph, its
// constants, which nodes may be fused, who reads what, and which nodes a
// proposal already took.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "optimizer/graph_uses.h"
#include "optimizer/optimizer.h"

namespace kiln::optimizer {

struct Matcher {
  const ir::Graph& g;
  const ConstantMap& constants;
  const std::vector<uint8_t>& eligible;
  const GraphUses uses;
  std::vector<uint8_t> used;  // nodes already in a proposal

  // The free, eligible node producing `v` when it is the ONNX op `op` (any op
  // when null) and, with `once`, nothing else reads `v`; else null.
  const ir::Node* producer(ir::ValueId v, const char* op, bool once = true, int32_t* index = nullptr) const {
    const int32_t pi = uses.producer(v);
    if (pi < 0 || !eligible[static_cast<size_t>(pi)] || used[static_cast<size_t>(pi)]) return nullptr;
    const ir::Node& p = g.nodes[static_cast<size_t>(pi)];
    if (!p.domain.empty() || (op && p.op_type != op) || (once && !uses.only_read_once(v))) return nullptr;
    if (index) *index = pi;
    return &p;
  }
  bool scalar_near(ir::ValueId v, float want, float tol) const {
    float f = 0.f;
    return constant_scalar(constants, v, &f) && std::fabs(f - want) <= tol;
  }
  bool is_float32(ir::ValueId v) const {
    if (v < 0 || static_cast<size_t>(v) >= g.values.size()) return false;
    const ir::ValueType& t = g.value(v).type;
    return t.is_tensor() && t.dtype == DType::kFloat32;
  }
};

inline ir::Attribute string_attr(const char* name, std::string value) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kString;
  a.s = std::move(value);
  return a;
}

inline ir::Attribute float_attr(const char* name, float value) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kFloat;
  a.f = value;
  return a;
}

}  // namespace kiln::optimizer
