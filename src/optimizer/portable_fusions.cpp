// Phase B (optimizer.h): patterns left to portable kernels become one node.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "optimizer/channel_scale_fusion.h"
#include "optimizer/elementwise_chains.h"
#include "optimizer/fusion_patterns.h"
#include "optimizer/graph_uses.h"
#include "optimizer/matcher.h"
#include "optimizer/optimizer.h"
#include "optimizer/sequence_fusions.h"

namespace kiln::optimizer {

std::string conv_activation(const ConstantMap& constants, const ir::Node& act, std::vector<float>* params) {
  if (!act.domain.empty() || !act.has_input(0)) return "";
  const std::string& op = act.op_type;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish") return op;
  if (op == "LeakyRelu") {
    auto alpha = act.attr_float("alpha", 0.01f);
    if (!alpha.is_ok()) return "";
    *params = {*alpha};
    return op;
  }
  if (op == "HardSigmoid") {
    auto alpha = act.attr_float("alpha", 0.2f);
    auto beta = act.attr_float("beta", 0.5f);
    if (!alpha.is_ok() || !beta.is_ok()) return "";
    *params = {*alpha, *beta};
    return op;
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (act.opset < 11) {
      auto a = act.attr_float("min", lo);
      auto b = act.attr_float("max", hi);
      if (!a.is_ok() || !b.is_ok()) return "";
      lo = *a;
      hi = *b;
    } else {
      if (act.has_input(1) && !constant_scalar(constants, act.inputs[1], &lo)) return "";
      if (act.has_input(2) && !constant_scalar(constants, act.inputs[2], &hi)) return "";
    }
    *params = {lo, hi};
    return op;
  }
  return "";
}

void set_conv_activation(ir::Node* node, const std::string& act, const std::vector<float>& params) {
  node->attributes.push_back(string_attr("activation", act));
  if (params.empty()) return;
  ir::Attribute p;
  p.name = "activation_params";
  p.type = ir::AttrType::kFloats;
  p.floats = params;
  node->attributes.push_back(std::move(p));
}

void take_conv_activation(const ir::Graph& g, const ConstantMap& constants, const GraphUses& uses,
                          const std::vector<uint8_t>& eligible, const std::vector<uint8_t>& used, ir::ValueId* result,
                          Fusion* f) {
  if (!uses.only_read_once(*result)) return;
  const int32_t ri = uses.readers(*result)[0];
  if (ri < 0 || !eligible[static_cast<size_t>(ri)] || used[static_cast<size_t>(ri)]) return;
  const ir::Node& a = g.nodes[static_cast<size_t>(ri)];
  std::vector<float> params;
  std::string act = conv_activation(constants, a, &params);
  if (act.empty() || a.inputs[0] != *result || !a.has_output(0)) return;
  f->replaces.push_back(static_cast<size_t>(ri));
  *result = a.outputs[0];
  set_conv_activation(&f->node, act, params);
  std::transform(act.begin(), act.end(), act.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
  f->name += "+" + act;
}

namespace {

// What x * gate(x) is for a gate node: Sigmoid gives SiLU; HardSigmoid with
// alpha 1/6 and beta 1/2 gives HardSwish (torch exports it so before opset
// 14); else "".
std::string self_gated(const ir::Node& gate) {
  if (!gate.domain.empty() || !gate.has_output(0) || !gate.has_input(0)) return "";
  if (gate.op_type == "Sigmoid") return "Silu";
  if (gate.op_type != "HardSigmoid") return "";
  auto alpha = gate.attr_float("alpha", 0.2f);
  auto beta = gate.attr_float("beta", 0.5f);
  if (!alpha.is_ok() || !beta.is_ok()) return "";
  return std::fabs(*alpha - 1.f / 6.f) <= 1e-6f && *beta == 0.5f ? "HardSwish" : "";
}

// The Mul that reads `x` and the gate's output once, as x * gate(x), or null.
const ir::Node* gate_mul(const Matcher& m, const ir::Node& gate, ir::ValueId x, const ir::Node& mul) {
  if (!mul.domain.empty() || mul.op_type != "Mul" || mul.inputs.size() != 2 || !mul.has_output(0)) return nullptr;
  const ir::ValueId other = mul.inputs[0] == x ? mul.inputs[1] : mul.inputs[0];
  if ((mul.inputs[0] != x && mul.inputs[1] != x) || other != gate.outputs[0]) return nullptr;
  return m.uses.only_read_once(other) && !m.uses.pinned(other) ? &mul : nullptr;
}

// Conv followed by an activation (or by x * Sigmoid(x), SiLU, or
// x * HardSigmoid(x), HardSwish).
void match_conv_activation(Matcher& m, size_t ni, std::vector<Fusion>* out) {
  const ir::Node& conv = m.g.nodes[ni];
  if (!conv.domain.empty() || conv.op_type != "Conv" || !conv.has_output(0) || conv.outputs.size() != 1) return;
  const ir::ValueId y = conv.outputs[0];
  if (m.uses.pinned(y) || !m.is_float32(y)) return;
  const std::vector<int32_t>& readers = m.uses.readers(y);
  std::vector<size_t> replaces{ni};
  std::string act;
  std::vector<float> params;
  ir::ValueId result = ir::kNoValue;
  auto free = [&](int32_t r) { return m.eligible[static_cast<size_t>(r)] && !m.used[static_cast<size_t>(r)]; };
  if (readers.size() == 1 && free(readers[0])) {
    const ir::Node& a = m.g.nodes[static_cast<size_t>(readers[0])];
    act = conv_activation(m.constants, a, &params);
    if (act.empty() || a.inputs[0] != y || !a.has_output(0)) return;
    replaces.push_back(static_cast<size_t>(readers[0]));
    result = a.outputs[0];
  } else if (readers.size() == 2 && free(readers[0]) && free(readers[1])) {
    // SiLU / HardSwish: the gate of y and Mul(y, gate) in either order.
    for (int k = 0; k < 2 && result == ir::kNoValue; ++k) {
      const ir::Node& s = m.g.nodes[static_cast<size_t>(readers[static_cast<size_t>(k)])];
      const ir::Node& mul = m.g.nodes[static_cast<size_t>(readers[static_cast<size_t>(1 - k)])];
      const std::string gated = self_gated(s);
      if (gated.empty() || s.inputs[0] != y || !gate_mul(m, s, y, mul)) continue;
      act = gated;
      replaces.push_back(static_cast<size_t>(readers[static_cast<size_t>(k)]));
      replaces.push_back(static_cast<size_t>(readers[static_cast<size_t>(1 - k)]));
      result = mul.outputs[0];
    }
  }
  if (result == ir::kNoValue) return;
  Fusion f;
  f.name = "conv+" + act;
  std::transform(f.name.begin(), f.name.end(), f.name.begin(), [](char c) { return static_cast<char>(std::tolower(c)); });
  f.node = conv;
  f.node.domain = "com.microsoft";
  f.node.op_type = "FusedConv";
  f.node.opset = 1;
  f.node.outputs = {result};
  set_conv_activation(&f.node, act, params);
  f.replaces = replaces;
  std::sort(f.replaces.begin(), f.replaces.end());
  out->push_back(std::move(f));
}

// MatMul of 2-D float32 operands whose only reader is an Add of a constant
// bias that broadcasts to the product without growing it: Gemm.
void match_matmul_add(Matcher& m, size_t ni, std::vector<Fusion>* out) {
  const ir::Node& mm = m.g.nodes[ni];
  if (!mm.domain.empty() || mm.op_type != "MatMul" || mm.opset < 7 || mm.inputs.size() != 2) return;
  if (!mm.has_input(0) || !mm.has_input(1) || !mm.has_output(0) || !m.uses.only_read_once(mm.outputs[0])) return;
  const int32_t ai = m.uses.readers(mm.outputs[0])[0];
  if (!m.eligible[static_cast<size_t>(ai)] || m.used[static_cast<size_t>(ai)]) return;
  const ir::Node& add = m.g.nodes[static_cast<size_t>(ai)];
  if (!add.domain.empty() || add.op_type != "Add" || add.inputs.size() != 2 || !add.has_output(0)) return;
  const ir::ValueId bias = add.inputs[0] == mm.outputs[0] ? add.inputs[1] : add.inputs[0];
  const Tensor* c = find_constant(m.constants, bias);
  if (!c || c->dtype() != DType::kFloat32 || !m.is_float32(mm.inputs[0]) || !m.is_float32(mm.inputs[1])) return;
  const ir::ValueType& at = m.g.value(mm.inputs[0]).type;
  const ir::ValueType& bt = m.g.value(mm.inputs[1]).type;
  if (!at.has_shape || !bt.has_shape || at.dims.size() != 2 || bt.dims.size() != 2) return;
  // C must broadcast to [M, N] without growing it (Gemm's C is unidirectional).
  auto fits = [](int64_t d, const ir::Dim& full) { return d == 1 || (full.known() && d == full.value); };
  const bool ok = c->rank() == 0 || (c->rank() == 1 && fits(c->dim(0), bt.dims[1])) ||
                  (c->rank() == 2 && fits(c->dim(0), at.dims[0]) && fits(c->dim(1), bt.dims[1]));
  if (!ok) return;
  Fusion f;
  f.name = "matmul+add";
  f.node = mm;
  f.node.op_type = "Gemm";
  f.node.inputs.push_back(bias);
  f.node.outputs = {add.outputs[0]};
  f.replaces = {ni, static_cast<size_t>(ai)};
  std::sort(f.replaces.begin(), f.replaces.end());
  out->push_back(std::move(f));
}

// Add(Erf(x / sqrt 2), 1), as Div or as Mul by 1/sqrt 2: x, and the nodes.
ir::ValueId erf_branch(const Matcher& m, ir::ValueId v, std::vector<int32_t>* nodes) {
  int32_t ia = -1, ie = -1, id = -1;
  const ir::Node* add = m.producer(v, "Add", true, &ia);
  if (!add || add->inputs.size() != 2) return ir::kNoValue;
  for (int k = 0; k < 2; ++k) {
    if (!m.scalar_near(add->inputs[static_cast<size_t>(1 - k)], 1.f, 0.f)) continue;
    const ir::Node* erf = m.producer(add->inputs[static_cast<size_t>(k)], "Erf", true, &ie);
    if (!erf || !erf->has_input(0)) continue;
    const ir::Node* scale = m.producer(erf->inputs[0], nullptr, true, &id);
    if (!scale || scale->inputs.size() != 2) continue;
    const bool div = scale->op_type == "Div" && m.scalar_near(scale->inputs[1], 1.41421356f, 1e-4f);
    bool mul = false;
    ir::ValueId x = scale->inputs[0];
    if (scale->op_type == "Mul") {
      if (m.scalar_near(scale->inputs[1], 0.70710678f, 1e-5f)) mul = true;
      else if (m.scalar_near(scale->inputs[0], 0.70710678f, 1e-5f)) mul = true, x = scale->inputs[1];
    }
    if (!div && !mul) continue;
    *nodes = {ia, ie, id};
    return x;
  }
  return ir::kNoValue;
}

// 0.5 * x * (1 + erf(x / sqrt 2)): Mul(Mul(x, 0.5), branch) or Mul(Mul(x, branch), 0.5).
void match_gelu(Matcher& m, size_t ni, std::vector<Fusion>* out) {
  const ir::Node& top = m.g.nodes[ni];
  if (!top.domain.empty() || top.op_type != "Mul" || top.inputs.size() != 2 || !top.has_output(0)) return;
  for (int k = 0; k < 2; ++k) {
    const ir::ValueId a = top.inputs[static_cast<size_t>(k)], b = top.inputs[static_cast<size_t>(1 - k)];
    std::vector<int32_t> nodes;
    int32_t ih = -1;
    ir::ValueId x = erf_branch(m, b, &nodes);
    const ir::Node* half = m.producer(a, "Mul", true, &ih);
    if (half && half->inputs.size() != 2) continue;
    if (x != ir::kNoValue && half) {
      // Form 1: (x * 0.5) * branch.
      const bool ok = (half->inputs[0] == x && m.scalar_near(half->inputs[1], 0.5f, 0.f)) ||
                      (half->inputs[1] == x && m.scalar_near(half->inputs[0], 0.5f, 0.f));
      if (!ok) continue;
      nodes.push_back(ih);
    } else if (m.scalar_near(b, 0.5f, 0.f) && half) {
      // Form 2: (x * branch) * 0.5.
      x = ir::kNoValue;
      for (int j = 0; j < 2 && x == ir::kNoValue; ++j) {
        std::vector<int32_t> inner;
        const ir::ValueId cand = erf_branch(m, half->inputs[static_cast<size_t>(1 - j)], &inner);
        if (cand != ir::kNoValue && cand == half->inputs[static_cast<size_t>(j)]) {
          x = cand;
          nodes = inner;
        }
      }
      if (x == ir::kNoValue) continue;
      nodes.push_back(ih);
    } else {
      continue;
    }
    // x feeds the pattern twice; that is all the pattern reads of it.
    if (!m.is_float32(x)) continue;
    Fusion f;
    f.name = "gelu";
    f.node.name = top.name;
    f.node.op_type = "Gelu";
    f.node.opset = 20;
    f.node.inputs = {x};
    f.node.outputs = {top.outputs[0]};
    for (int32_t n : nodes) f.replaces.push_back(static_cast<size_t>(n));
    f.replaces.push_back(ni);
    std::sort(f.replaces.begin(), f.replaces.end());
    out->push_back(std::move(f));
    return;
  }
}

// ReduceMean axes == [-1] (or the last axis, when the rank is known: rank
// -1 means unknown), keepdims 1.
bool mean_over_last_axis(const Matcher& m, const ir::Node& n, int64_t rank) {
  auto keep = n.attr_int("keepdims", 1);
  if (!keep.is_ok() || *keep != 1) return false;
  std::vector<int64_t> axes;
  if (n.opset >= 18) {
    const Tensor* t = n.has_input(1) ? find_constant(m.constants, n.inputs[1]) : nullptr;
    if (!t || t->dtype() != DType::kInt64 || t->numel() != 1) return false;
    axes = {t->data<int64_t>()[0]};
  } else {
    auto a = n.attr_ints("axes");
    if (!a.is_ok()) return false;
    axes = *a;
  }
  return axes.size() == 1 && (axes[0] == -1 || (rank > 0 && axes[0] == rank - 1));
}

// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma + beta over the
// last axis, as torch exports LayerNorm below opset 17.
void match_layernorm(Matcher& m, size_t ni, std::vector<Fusion>* out) {
  const ir::Node& add = m.g.nodes[ni];
  if (!add.domain.empty() || add.op_type != "Add" || add.inputs.size() != 2 || !add.has_output(0)) return;
  for (int k = 0; k < 2; ++k) {
    int32_t i_mul = -1, i_div = -1, i_sqrt = -1, i_eps = -1, i_var = -1, i_pow = -1, i_sub = -1, i_mean = -1;
    const ir::ValueId beta = add.inputs[static_cast<size_t>(1 - k)];
    const ir::Node* mul = m.producer(add.inputs[static_cast<size_t>(k)], "Mul", true, &i_mul);
    if (!mul || mul->inputs.size() != 2) continue;
    for (int j = 0; j < 2; ++j) {
      const ir::ValueId gamma = mul->inputs[static_cast<size_t>(1 - j)];
      const ir::Node* div = m.producer(mul->inputs[static_cast<size_t>(j)], "Div", true, &i_div);
      if (!div || div->inputs.size() != 2) continue;
      const ir::Node* sqrt = m.producer(div->inputs[1], "Sqrt", true, &i_sqrt);
      const ir::Node* eps_add = sqrt && sqrt->has_input(0) ? m.producer(sqrt->inputs[0], "Add", true, &i_eps) : nullptr;
      if (!eps_add || eps_add->inputs.size() != 2) continue;
      float eps = 0.f;
      if (!constant_scalar(m.constants, eps_add->inputs[1], &eps)) continue;
      const ir::Node* var = m.producer(eps_add->inputs[0], "ReduceMean", true, &i_var);
      const ir::Node* pow = var && var->has_input(0) ? m.producer(var->inputs[0], "Pow", true, &i_pow) : nullptr;
      if (!pow || pow->inputs.size() != 2 || !m.scalar_near(pow->inputs[1], 2.f, 0.f)) continue;
      const ir::ValueId d = div->inputs[0];
      if (pow->inputs[0] != d) continue;
      const ir::Node* sub = m.producer(d, "Sub", false, &i_sub);
      if (!sub || sub->inputs.size() != 2 || !m.uses.read_only_by(d, {i_pow, i_div})) continue;
      const ir::ValueId x = sub->inputs[0];
      const ir::Node* mean = m.producer(sub->inputs[1], "ReduceMean", true, &i_mean);
      if (!mean || !mean->has_input(0) || mean->inputs[0] != x || !m.is_float32(x)) continue;
      // The normalized size h is gamma's. x's last dim must be h where the
      // type says; where inference lost x's shape (torch's MultiheadAttention
      // slices by computed bounds, and every later residual is untyped) the
      // kernel checks it at run time: only a last dim of 1 broadcast by
      // gamma (never produced by a LayerNorm export) would fail there where
      // the pattern gives beta.
      const ir::ValueType& xt = m.g.value(x).type;
      if (xt.has_shape && (xt.dims.empty() || !xt.dims.back().known())) continue;
      const int64_t rank = xt.has_shape ? static_cast<int64_t>(xt.dims.size()) : -1;
      if (!mean_over_last_axis(m, *mean, rank) || !mean_over_last_axis(m, *var, rank)) continue;
      const Tensor* gt = find_constant(m.constants, gamma);
      const Tensor* bt = find_constant(m.constants, beta);
      const int64_t h = gt && gt->rank() == 1 ? gt->dim(0) : -1;
      if (h <= 0 || (xt.has_shape && xt.dims.back().value != h)) continue;
      auto vec_h = [&](const Tensor* t) { return t && t->dtype() == DType::kFloat32 && t->rank() == 1 && t->dim(0) == h; };
      if (!vec_h(gt) || !vec_h(bt)) continue;
      Fusion f;
      f.name = "layernorm";
      f.node.name = add.name;
      f.node.op_type = "LayerNormalization";
      f.node.opset = 17;
      f.node.inputs = {x, gamma, beta};
      f.node.outputs = {add.outputs[0]};
      ir::Attribute axis;
      axis.name = "axis";
      axis.type = ir::AttrType::kInt;
      axis.i = -1;
      f.node.attributes = {axis, float_attr("epsilon", eps)};
      for (int32_t n : {i_mean, i_sub, i_pow, i_var, i_eps, i_sqrt, i_div, i_mul}) f.replaces.push_back(static_cast<size_t>(n));
      f.replaces.push_back(ni);
      std::sort(f.replaces.begin(), f.replaces.end());
      out->push_back(std::move(f));
      return;
    }
  }
}

// x * HardSigmoid(x) (alpha 1/6, beta 1/2) not after a Conv: one HardSwish
// node, one pass over x instead of two.
void match_hardswish(Matcher& m, size_t ni, std::vector<Fusion>* out) {
  const ir::Node& gate = m.g.nodes[ni];
  if (self_gated(gate) != "HardSwish" || !m.is_float32(gate.inputs[0])) return;
  const std::vector<int32_t>& readers = m.uses.readers(gate.outputs[0]);
  if (readers.size() != 1) return;
  const auto mi = static_cast<size_t>(readers[0]);
  if (!m.eligible[mi] || m.used[mi] || !gate_mul(m, gate, gate.inputs[0], m.g.nodes[mi])) return;
  Fusion f;
  f.name = "hardswish";
  f.node.name = m.g.nodes[mi].name;
  f.node.op_type = "HardSwish";
  f.node.opset = 14;
  f.node.inputs = {gate.inputs[0]};
  f.node.outputs = {m.g.nodes[mi].outputs[0]};
  f.replaces = {ni, mi};
  std::sort(f.replaces.begin(), f.replaces.end());
  out->push_back(std::move(f));
}

}  // namespace

std::vector<Fusion> find_portable_fusions(const ir::Graph& g, const ConstantMap& constants,
                                          const std::vector<uint8_t>& eligible) {
  Matcher m{g, constants, eligible, GraphUses(g, {}), std::vector<uint8_t>(g.nodes.size(), 0)};
  std::vector<Fusion> out;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!eligible[ni] || m.used[ni]) continue;
    const size_t before = out.size();
    match_conv_activation(m, ni, &out);
    if (out.size() == before) match_conv_add(g, constants, m.uses, eligible, m.used, ni, &out);
    if (out.size() == before) match_preact_conv(g, constants, m.uses, eligible, m.used, ni, &out);
    if (out.size() == before) {
      Fusion f;
      if (match_channel_scaled_conv(g, constants, m.uses, eligible, m.used, ni, &f)) out.push_back(std::move(f));
    }
    if (out.size() == before) match_matmul_add(m, ni, &out);
    if (out.size() == before) match_gelu(m, ni, &out);
    if (out.size() == before) match_layernorm(m, ni, &out);
    if (out.size() == before) match_hardswish(m, ni, &out);
    if (out.size() == before) match_gelu_tanh(m, ni, &out);
    if (out.size() == before) match_matmul_bias(m, ni, &out);
    if (out.size() == before) match_transposed_matmul(m, ni, &out);
    for (size_t k = before; k < out.size(); ++k)
      for (size_t r : out[k].replaces) m.used[r] = 1;
  }
  merge_matmul_activation(m, &out);
  // Last, so the patterns above (Gelu's Div/Erf/Add, Conv + activation) keep their nodes.
  find_elementwise_chains(g, constants, eligible, m.uses, &m.used, &out);
  return out;
}

}  // namespace kiln::optimizer
