// Phase A rewrites that only move data around: Identity/Dropout removal,
// Transpose pairs, Reshape-like chains.
#include <algorithm>
#include <numeric>

#include "optimizer/graph_uses.h"
#include "optimizer/passes.h"

namespace kiln::optimizer {

namespace {

bool is_onnx(const ir::Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

void set_ints_attr(ir::Node& n, const std::string& name, std::vector<int64_t> values) {
  for (ir::Attribute& a : n.attributes)
    if (a.name == name) {
      a.type = ir::AttrType::kInts;
      a.ints = std::move(values);
      return;
    }
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(values);
  n.attributes.push_back(std::move(a));
}

// A Dropout that is the identity: inference mode (training_mode absent or a
// constant false; opset < 7 only with is_test = 1) and no reader of its mask.
bool dropout_is_identity(const ir::Node& n, const GraphUses& uses, const ConstantMap& constants) {
  if (n.has_output(1) && (uses.pinned(n.outputs[1]) || !uses.readers(n.outputs[1]).empty())) return false;
  if (n.opset < 7) {
    auto is_test = n.attr_int("is_test", 0);
    if (!is_test.is_ok() || *is_test != 1) return false;
  }
  if (n.has_input(2)) {
    const Tensor* t = find_constant(constants, n.inputs[2]);
    if (!t || t->dtype() != DType::kBool || t->numel() != 1 || static_cast<const uint8_t*>(t->raw_data())[0] != 0)
      return false;
  }
  return true;
}

// The perm of a Transpose whose input has rank `rank` (absent: reversed).
bool transpose_perm(const ir::Node& n, int64_t rank, std::vector<int64_t>* perm) {
  auto p = n.attr_ints("perm");
  if (!p.is_ok()) return false;
  *perm = std::move(*p);
  if (perm->empty()) {
    if (rank < 0) return false;
    perm->resize(static_cast<size_t>(rank));
    std::iota(perm->rbegin(), perm->rend(), 0);
  }
  std::vector<int64_t> sorted = *perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int64_t>(i)) return false;
  return rank < 0 || static_cast<int64_t>(perm->size()) == rank;
}

int64_t rank_of(const ir::Graph& g, ir::ValueId v) {
  const ir::ValueType& t = g.value(v).type;
  return t.is_tensor() && t.has_shape ? static_cast<int64_t>(t.dims.size()) : -1;
}

bool is_reshape_like(const ir::Node& n) {
  return n.domain.empty() &&
         (n.op_type == "Reshape" || n.op_type == "Squeeze" || n.op_type == "Unsqueeze" || n.op_type == "Flatten");
}

}  // namespace

int remove_identities(GraphRewrite& rw) {
  ir::Graph& g = rw.g;
  const GraphUses uses(g, rw.removed);
  int count = 0;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!rw.eligible[ni] || rw.removed[ni]) continue;
    const ir::Node& n = g.nodes[ni];
    if (!is_onnx(n, "Identity") && !is_onnx(n, "Dropout")) continue;
    if (!n.has_input(0) || !n.has_output(0) || uses.pinned(n.outputs[0])) continue;
    if (n.op_type == "Dropout" && !dropout_is_identity(n, uses, rw.constants)) continue;
    const ir::ValueId in = n.inputs[0], out = n.outputs[0];
    rw.removed[ni] = 1;
    replace_uses(g, rw.removed, out, in);
    ++count;
  }
  return count;
}

int merge_transposes(GraphRewrite& rw) {
  ir::Graph& g = rw.g;
  const GraphUses uses(g, rw.removed);
  int count = 0;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!rw.eligible[ni] || rw.removed[ni] || !is_onnx(g.nodes[ni], "Transpose")) continue;
    ir::Node& t2 = g.nodes[ni];
    if (!t2.has_input(0) || !t2.has_output(0)) continue;
    const int32_t pi = uses.producer(t2.inputs[0]);
    if (pi < 0 || rw.removed[static_cast<size_t>(pi)] || !rw.eligible[static_cast<size_t>(pi)]) continue;
    const ir::Node& t1 = g.nodes[static_cast<size_t>(pi)];
    if (!is_onnx(t1, "Transpose") || !t1.has_input(0) || !uses.only_read_once(t2.inputs[0])) continue;
    const int64_t rank = rank_of(g, t1.inputs[0]);
    std::vector<int64_t> p1, p2;
    if (!transpose_perm(t1, rank, &p1) || !transpose_perm(t2, static_cast<int64_t>(p1.size()), &p2)) continue;
    if (p1.size() != p2.size()) continue;
    // t2's output dim j is t1's output dim p2[j], which is the input's dim p1[p2[j]].
    std::vector<int64_t> perm(p1.size());
    bool identity = true;
    for (size_t j = 0; j < perm.size(); ++j) {
      perm[j] = p1[static_cast<size_t>(p2[j])];
      identity = identity && perm[j] == static_cast<int64_t>(j);
    }
    const ir::ValueId src = t1.inputs[0];
    rw.removed[static_cast<size_t>(pi)] = 1;
    if (identity && !uses.pinned(t2.outputs[0])) {
      rw.removed[ni] = 1;
      replace_uses(g, rw.removed, t2.outputs[0], src);
    } else {
      t2.inputs[0] = src;
      set_ints_attr(t2, "perm", std::move(perm));
    }
    ++count;
  }
  return count;
}

int merge_reshapes(GraphRewrite& rw) {
  ir::Graph& g = rw.g;
  const GraphUses uses(g, rw.removed);
  int count = 0;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!rw.eligible[ni] || rw.removed[ni] || !is_reshape_like(g.nodes[ni])) continue;
    ir::Node& n = g.nodes[ni];
    if (!n.has_input(0) || !n.has_output(0)) continue;
    const ir::ValueType& out_t = g.value(n.outputs[0]).type;
    if (!out_t.is_static()) continue;
    const Shape out_shape = out_t.static_shape();
    const ir::ValueType& in_t = g.value(n.inputs[0]).type;
    // A no-op: the input already has the output's shape.
    if (in_t.is_static() && in_t.static_shape() == out_shape && !uses.pinned(n.outputs[0])) {
      rw.removed[ni] = 1;
      replace_uses(g, rw.removed, n.outputs[0], n.inputs[0]);
      ++count;
      continue;
    }
    const int32_t pi = uses.producer(n.inputs[0]);
    if (pi < 0 || rw.removed[static_cast<size_t>(pi)] || !rw.eligible[static_cast<size_t>(pi)]) continue;
    const ir::Node& p = g.nodes[static_cast<size_t>(pi)];
    if (!is_reshape_like(p) || !p.has_input(0) || !uses.only_read_once(n.inputs[0])) continue;
    // Reshape's shape input copies the input's dim for a 0 (allowzero = 0):
    // a static shape with a 0 would mean something else.
    if (n.opset < 5 || std::find(out_shape.begin(), out_shape.end(), 0) != out_shape.end()) continue;
    std::vector<int64_t> dims(out_shape.begin(), out_shape.end());
    const ir::ValueId shape_id = add_constant(g, rw.constants, g.value_name(n.outputs[0]) + "_shape",
                                              Tensor::from_vector<int64_t>(dims, Shape{static_cast<int64_t>(dims.size())}));
    n.op_type = "Reshape";
    n.attributes.clear();
    n.inputs = {p.inputs[0], shape_id};
    rw.removed[static_cast<size_t>(pi)] = 1;
    ++count;
  }
  return count;
}

}  // namespace kiln::optimizer
