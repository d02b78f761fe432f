#include "optimizer/elementwise_chains.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace kiln::optimizer {

namespace {

bool is_arith(const std::string& op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }

bool is_activation(const ir::Node& n) {
  static const char* const kOps[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid",
                                     "HardSwish", "Exp", "Sqrt", "Erf"};
  for (const char* op : kOps)
    if (n.op_type == op) return true;
  return false;
}

// One step of a chain.
struct Link {
  size_t node;
  std::string op;
  ir::ValueId constant = ir::kNoValue;  // binary steps
  bool reversed = false;                // chain value on the right (c - x, c / x)
  float alpha = 0.f, beta = 0.f;
};

class ChainFinder {
 public:
  ChainFinder(const ir::Graph& g, const ConstantMap& constants, const std::vector<uint8_t>& eligible,
              const GraphUses& uses, std::vector<uint8_t>& used)
      : g_(g), constants_(constants), eligible_(eligible), uses_(uses), used_(used) {}

  // The step node `ni` makes of chain value `x` (typed `xt`), or false.
  bool link(size_t ni, ir::ValueId x, const ir::ValueType& xt, Link* out) const {
    if (!eligible_[ni] || used_[ni]) return false;
    const ir::Node& n = g_.nodes[ni];
    if (!n.domain.empty() || n.outputs.size() != 1 || !n.has_output(0) || !same_type(n.outputs[0], xt)) return false;
    Link l{ni, n.op_type};
    if (is_arith(n.op_type)) {
      if (n.opset < 7 || n.inputs.size() != 2 || !n.has_input(0) || !n.has_input(1)) return false;
      if ((n.inputs[0] == x) == (n.inputs[1] == x)) return false;  // exactly one side is the chain value
      l.reversed = n.inputs[1] == x;
      l.constant = l.reversed ? n.inputs[0] : n.inputs[1];
      return keeps_shape(l.constant, xt) && (*out = l, true);
    }
    if (!is_activation(n) || n.inputs.size() != 1 || n.inputs[0] != x) return false;
    if (n.op_type == "HardSwish" && n.opset < 14) return false;
    if (n.op_type == "LeakyRelu") {
      auto a = n.attr_float("alpha", 0.01f);
      if (!a.is_ok()) return false;
      l.alpha = *a;
    } else if (n.op_type == "HardSigmoid") {
      auto a = n.attr_float("alpha", 0.2f), b = n.attr_float("beta", 0.5f);
      if (!a.is_ok() || !b.is_ok()) return false;
      l.alpha = *a;
      l.beta = *b;
    }
    *out = l;
    return true;
  }

  // The longest chain starting at node ni (empty when shorter than two).
  std::vector<Link> chain_from(size_t ni) const {
    const ir::Node& head = g_.nodes[ni];
    if (head.inputs.empty() || !head.has_output(0)) return {};
    // The chain value enters as the non-constant input.
    ir::ValueId x = head.inputs[0];
    if (is_arith(head.op_type) && head.inputs.size() == 2 && find_constant(constants_, x)) x = head.inputs[1];
    if (x == ir::kNoValue || find_constant(constants_, x)) return {};
    const ir::ValueType& xt = g_.value(x).type;
    if (!xt.is_tensor() || xt.dtype != DType::kFloat32 || !xt.has_shape) return {};
    std::vector<Link> chain;
    Link l;
    if (!link(ni, x, xt, &l)) return {};
    chain.push_back(l);
    for (;;) {
      const ir::ValueId v = g_.nodes[chain.back().node].outputs[0];
      if (!uses_.only_read_once(v)) break;
      const auto next = static_cast<size_t>(uses_.readers(v)[0]);
      if (!link(next, v, xt, &l)) break;
      chain.push_back(l);
    }
    if (chain.size() < 2) return {};
    return chain;
  }

 private:
  // `v` is float32 with exactly `xt`'s dims (known or named alike).
  bool same_type(ir::ValueId v, const ir::ValueType& xt) const {
    const ir::ValueType& t = g_.value(v).type;
    if (!t.is_tensor() || t.dtype != DType::kFloat32 || !t.has_shape || t.dims.size() != xt.dims.size()) return false;
    for (size_t i = 0; i < t.dims.size(); ++i) {
      const ir::Dim &a = t.dims[i], &b = xt.dims[i];
      if (a.known() != b.known() || (a.known() ? a.value != b.value : (a.param.empty() || a.param != b.param)))
        return false;
    }
    return true;
  }
  // A float32 constant that broadcasts to the chain value without growing
  // it: one element of rank <= the value's, or the value's static shape.
  bool keeps_shape(ir::ValueId c, const ir::ValueType& xt) const {
    const Tensor* t = find_constant(constants_, c);
    if (!t || t->dtype() != DType::kFloat32 || t->rank() > xt.dims.size()) return false;
    if (t->numel() == 1) return true;
    if (!xt.is_static()) return false;
    const Shape xs = xt.static_shape();
    if (t->numel() != xs.numel()) return false;
    // Right-aligned, every dim of c equals x's (a 1 only where x has 1).
    const size_t off = xs.rank() - t->rank();
    for (size_t i = 0; i < t->rank(); ++i)
      if (t->dim(i) != xs[off + i]) return false;
    return true;
  }

  const ir::Graph& g_;
  const ConstantMap& constants_;
  const std::vector<uint8_t>& eligible_;
  const GraphUses& uses_;
  std::vector<uint8_t>& used_;
};

ir::Node fused_node(const ir::Graph& g, const std::vector<Link>& chain) {
  const ir::Node& first = g.nodes[chain.front().node];
  const ir::Node& last = g.nodes[chain.back().node];
  ir::Node n;
  n.name = last.name;
  n.domain = kFusedDomain;
  n.op_type = kElementwiseChainOp;
  n.opset = 1;
  n.inputs = {first.inputs.size() == 2 && chain.front().reversed ? first.inputs[1] : first.inputs[0]};
  n.outputs = {last.outputs[0]};
  ir::Attribute ops, operands, reversed, alphas, betas;
  ops.name = "ops";
  ops.type = ir::AttrType::kStrings;
  operands.name = "operands";
  reversed.name = "reversed";
  operands.type = reversed.type = ir::AttrType::kInts;
  alphas.name = "alphas";
  betas.name = "betas";
  alphas.type = betas.type = ir::AttrType::kFloats;
  for (const Link& l : chain) {
    ops.strings.push_back(l.op);
    int64_t operand = -1;
    if (l.constant != ir::kNoValue) {
      auto it = std::find(n.inputs.begin(), n.inputs.end(), l.constant);
      operand = it - n.inputs.begin();
      if (it == n.inputs.end()) n.inputs.push_back(l.constant);
    }
    operands.ints.push_back(operand);
    reversed.ints.push_back(l.reversed ? 1 : 0);
    alphas.floats.push_back(l.alpha);
    betas.floats.push_back(l.beta);
  }
  n.attributes = {ops, operands, reversed, alphas, betas};
  return n;
}

}  // namespace

void find_elementwise_chains(const ir::Graph& g, const ConstantMap& constants, const std::vector<uint8_t>& eligible,
                             const GraphUses& uses, std::vector<uint8_t>* used, std::vector<Fusion>* out) {
  ChainFinder finder(g, constants, eligible, uses, *used);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!eligible[ni] || (*used)[ni]) continue;
    const std::vector<Link> chain = finder.chain_from(ni);
    if (chain.empty()) continue;
    Fusion f;
    f.name = "elementwise-chain";
    f.node = fused_node(g, chain);
    for (const Link& l : chain) {
      f.replaces.push_back(l.node);
      (*used)[l.node] = 1;
    }
    std::sort(f.replaces.begin(), f.replaces.end());
    out->push_back(std::move(f));
  }
}

}  // namespace kiln::optimizer
