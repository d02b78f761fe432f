// TestGraph: builds small graphs by hand for the optimizer's tests and the
// runtime's rewrite tests (test-only; header so no library links it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "optimizer/optimizer.h"

namespace kiln::optimizer::testing {

inline ir::Attribute attr_ints(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}
inline ir::Attribute attr_int(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  return a;
}
inline ir::Attribute attr_float(const std::string& name, float v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kFloat;
  a.f = v;
  return a;
}

inline ir::ValueType f32_type(const Shape& s) {
  std::vector<ir::Dim> dims;
  for (int64_t d : s) dims.push_back(ir::Dim{d, {}});
  return ir::ValueType::tensor(DType::kFloat32, std::move(dims));
}

struct TestGraph {
  ir::Graph g;
  ConstantMap constants;
  int opset = 13;

  ir::ValueId input(const std::string& name, const Shape& s) {
    const ir::ValueId id = g.add_value(name, f32_type(s));
    g.inputs.push_back(id);
    return id;
  }
  ir::ValueId constant(const std::string& name, Tensor t) {
    std::vector<ir::Dim> dims;
    for (int64_t d : t.shape()) dims.push_back(ir::Dim{d, {}});
    const ir::ValueId id = g.add_value(name, ir::ValueType::tensor(t.dtype(), std::move(dims)));
    g.initializers[id] = t;
    constants[id] = t;
    return id;
  }
  ir::ValueId scalar(const std::string& name, float v) { return constant(name, Tensor::scalar<float>(v)); }
  /// Adds a node with one output, typed float32 `out` when given.
  ir::ValueId node(const std::string& op, std::vector<ir::ValueId> in, std::vector<ir::Attribute> attrs = {},
                   std::optional<Shape> out = std::nullopt) {
    ir::Node n;
    n.op_type = op;
    n.name = op + std::to_string(g.nodes.size());
    n.opset = opset;
    n.inputs = std::move(in);
    n.attributes = std::move(attrs);
    const ir::ValueId y = g.add_value(n.name + "_out", out ? f32_type(*out) : ir::ValueType{});
    n.outputs = {y};
    g.nodes.push_back(std::move(n));
    return y;
  }
  void output(ir::ValueId v) { g.outputs.push_back(v); }
  std::vector<uint8_t> all_eligible() const { return std::vector<uint8_t>(g.nodes.size(), 1); }
  /// The live node producing `v` after a phase-A rewrite, or null.
  const ir::Node* producer(ir::ValueId v, const std::vector<uint8_t>& removed) const {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (!removed[i])
        for (ir::ValueId o : g.nodes[i].outputs)
          if (o == v) return &g.nodes[i];
    return nullptr;
  }
};

}  // namespace kiln::optimizer::testing
