// Phase-B matchers for transformer patterns (sequence_fusions.h).
#include "optimizer/sequence_fusions.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace kiln::optimizer {

namespace {

// A free, eligible node of the default domain; null when `ni` is not one.
const ir::Node* free_node(const Matcher& m, int32_t ni, const char* op) {
  if (ni < 0 || !m.eligible[static_cast<size_t>(ni)] || m.used[static_cast<size_t>(ni)]) return nullptr;
  const ir::Node& n = m.g.nodes[static_cast<size_t>(ni)];
  return n.domain.empty() && n.op_type == op ? &n : nullptr;
}

// The factors of the product `v`: `v` itself, or (when a free Mul read only
// here makes it, `depth` > 0) the factors of that Mul's two inputs. The Muls
// expanded go to `nodes`.
void factors(const Matcher& m, ir::ValueId v, int depth, std::vector<ir::ValueId>* f, std::vector<int32_t>* nodes) {
  int32_t pi = -1;
  const ir::Node* mul = depth > 0 ? m.producer(v, "Mul", true, &pi) : nullptr;
  if (!mul || mul->inputs.size() != 2 || !mul->has_input(0) || !mul->has_input(1)) {
    f->push_back(v);
    return;
  }
  nodes->push_back(pi);
  factors(m, mul->inputs[0], depth - 1, f, nodes);
  factors(m, mul->inputs[1], depth - 1, f, nodes);
}

// Removes from `f` the one constant scalar (rank 0 or 1: a higher rank
// would broadcast the result) within `tol` of `want`; false when there is
// none.
bool take_constant(const Matcher& m, std::vector<ir::ValueId>* f, float want, float tol) {
  for (size_t i = 0; i < f->size(); ++i)
    if (const Tensor* t = find_constant(m.constants, (*f)[i]); t && t->rank() <= 1 && m.scalar_near((*f)[i], want, tol)) {
      f->erase(f->begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  return false;
}

// The operand of the Add making `v` (free, read only here) that is not the
// constant `c`, or kNoValue.
ir::ValueId add_of_constant(const Matcher& m, ir::ValueId v, float c, int32_t* index) {
  const ir::Node* add = m.producer(v, "Add", true, index);
  if (!add || add->inputs.size() != 2) return ir::kNoValue;
  for (int k = 0; k < 2; ++k)
    if (m.scalar_near(add->inputs[static_cast<size_t>(1 - k)], c, 0.f)) return add->inputs[static_cast<size_t>(k)];
  return ir::kNoValue;
}

// x + 0.044715 x^3 (x^3 as Pow(x, 3) or a product of three x), given x.
bool cubic_term(const Matcher& m, ir::ValueId s, ir::ValueId x, std::vector<int32_t>* nodes) {
  int32_t ia = -1;
  const ir::Node* add = m.producer(s, "Add", true, &ia);
  if (!add || add->inputs.size() != 2) return false;
  for (int k = 0; k < 2; ++k) {
    if (add->inputs[static_cast<size_t>(k)] != x) continue;
    std::vector<ir::ValueId> f;
    std::vector<int32_t> inner;
    factors(m, add->inputs[static_cast<size_t>(1 - k)], 3, &f, &inner);
    if (!take_constant(m, &f, 0.044715f, 1e-6f)) continue;
    bool ok = f.size() == 3 && f[0] == x && f[1] == x && f[2] == x;
    if (!ok && f.size() == 1) {
      int32_t ip = -1;
      const ir::Node* pow = m.producer(f[0], "Pow", true, &ip);
      ok = pow && pow->inputs.size() == 2 && pow->inputs[0] == x && m.scalar_near(pow->inputs[1], 3.f, 0.f);
      if (ok) inner.push_back(ip);
    }
    if (!ok) continue;
    nodes->push_back(ia);
    nodes->insert(nodes->end(), inner.begin(), inner.end());
    return true;
  }
  return false;
}

// The 1-D float32 constant of N values `bias` is, or null.
const Tensor* bias_vector(const Matcher& m, ir::ValueId bias, int64_t n) {
  const Tensor* c = find_constant(m.constants, bias);
  return c && c->dtype() == DType::kFloat32 && c->rank() == 1 && c->dim(0) == n ? c : nullptr;
}

}  // namespace

void match_gelu_tanh(Matcher& m, size_t ni, std::vector<Fusion>* out) {
  const ir::Node& top = m.g.nodes[ni];
  if (!top.domain.empty() || top.op_type != "Mul" || top.inputs.size() != 2 || !top.has_output(0)) return;
  if (!top.has_input(0) || !top.has_input(1)) return;
  // x * 0.5 * (1 + tanh(inner)) as two Muls in any order.
  std::vector<ir::ValueId> f;
  std::vector<int32_t> nodes{static_cast<int32_t>(ni)};
  factors(m, top.inputs[0], 1, &f, &nodes);
  factors(m, top.inputs[1], 1, &f, &nodes);
  if (f.size() != 3 || !take_constant(m, &f, 0.5f, 0.f)) return;
  for (int k = 0; k < 2; ++k) {
    const ir::ValueId x = f[static_cast<size_t>(k)];
    std::vector<int32_t> more;
    int32_t i_add = -1, i_tanh = -1;
    const ir::ValueId t = add_of_constant(m, f[static_cast<size_t>(1 - k)], 1.f, &i_add);
    const ir::Node* tanh = t == ir::kNoValue ? nullptr : m.producer(t, "Tanh", true, &i_tanh);
    if (!tanh || !tanh->has_input(0) || !m.is_float32(x)) continue;
    // inner = sqrt(2 / pi) * (x + 0.044715 x^3)
    std::vector<ir::ValueId> g;
    factors(m, tanh->inputs[0], 1, &g, &more);
    if (g.size() != 2 || !take_constant(m, &g, 0.7978845608f, 1e-5f)) continue;
    if (!cubic_term(m, g[0], x, &more)) continue;
    Fusion fu;
    fu.name = "gelu tanh";
    fu.node.name = top.name;
    fu.node.op_type = "Gelu";
    fu.node.opset = 20;
    fu.node.inputs = {x};
    fu.node.outputs = {top.outputs[0]};
    fu.node.attributes = {string_attr("approximate", "tanh")};
    for (int32_t n : nodes) fu.replaces.push_back(static_cast<size_t>(n));
    for (int32_t n : {i_add, i_tanh}) fu.replaces.push_back(static_cast<size_t>(n));
    for (int32_t n : more) fu.replaces.push_back(static_cast<size_t>(n));
    std::sort(fu.replaces.begin(), fu.replaces.end());
    if (std::adjacent_find(fu.replaces.begin(), fu.replaces.end()) != fu.replaces.end()) return;
    out->push_back(std::move(fu));
    return;
  }
}

void match_matmul_bias(Matcher& m, size_t ni, std::vector<Fusion>* out) {
  const ir::Node& mm = m.g.nodes[ni];
  if (!mm.domain.empty() || mm.op_type != "MatMul" || mm.inputs.size() != 2 || !mm.has_output(0)) return;
  if (!mm.has_input(0) || !mm.has_input(1) || !m.uses.only_read_once(mm.outputs[0])) return;
  const Tensor* b = find_constant(m.constants, mm.inputs[1]);
  if (!b || b->dtype() != DType::kFloat32 || b->rank() != 2 || !m.is_float32(mm.inputs[0])) return;
  const ir::ValueType& at = m.g.value(mm.inputs[0]).type;
  if (at.has_shape && at.dims.size() == 2) return;  // Gemm's (match_matmul_add)
  const int32_t ai = m.uses.readers(mm.outputs[0])[0];
  const ir::Node* add = free_node(m, ai, "Add");
  if (!add || add->inputs.size() != 2 || !add->has_output(0)) return;
  const ir::ValueId bias = add->inputs[0] == mm.outputs[0] ? add->inputs[1] : add->inputs[0];
  if (!bias_vector(m, bias, b->dim(1))) return;
  Fusion f;
  f.name = "matmul+bias";
  f.node.name = mm.name;
  f.node.domain = kKilnDomain;
  f.node.op_type = kMatMulBiasOp;
  f.node.opset = 1;
  f.node.inputs = {mm.inputs[0], mm.inputs[1], bias};
  f.node.outputs = {add->outputs[0]};
  f.replaces = {ni, static_cast<size_t>(ai)};
  std::sort(f.replaces.begin(), f.replaces.end());
  out->push_back(std::move(f));
}

namespace {

// The perm of a Transpose node (explicit only), when its matrix axes keep a
// unit stride: the last axis stays last, or (for an input) becomes the
// second to last, which the GEMM reads transposed.
std::vector<int64_t> matrix_perm(const ir::Node& t, bool input) {
  auto perm = t.attr_ints("perm");
  if (!perm.is_ok() || perm->size() < 2) return {};
  const int64_t r = static_cast<int64_t>(perm->size());
  const bool ok = (*perm)[static_cast<size_t>(r - 1)] == r - 1 || (input && (*perm)[static_cast<size_t>(r - 2)] == r - 1);
  return ok ? *perm : std::vector<int64_t>{};
}

// A finite nonzero float32 scalar constant of rank 0 or 1 (a higher rank
// would broadcast the product to more dims).
bool scale_constant(const Matcher& m, ir::ValueId v, float* out) {
  const Tensor* t = find_constant(m.constants, v);
  return t && t->rank() <= 1 && constant_scalar(m.constants, v, out) && std::isfinite(*out) && *out != 0.f;
}

// x when `v` is Mul(x, c), Mul(c, x) or Div(x, c) of a scalar constant c
// (made by a free node read only here): the factor in *scale.
ir::ValueId scaled_value(const Matcher& m, ir::ValueId v, float* scale, int32_t* index) {
  const ir::Node* n = m.producer(v, nullptr, true, index);
  if (!n || n->inputs.size() != 2 || !n->has_input(0) || !n->has_input(1)) return ir::kNoValue;
  float c = 0.f;
  if (n->op_type == "Div" && scale_constant(m, n->inputs[1], &c)) {
    *scale = 1.f / c;
    return n->inputs[0];
  }
  if (n->op_type != "Mul") return ir::kNoValue;
  for (int k = 0; k < 2; ++k)
    if (scale_constant(m, n->inputs[static_cast<size_t>(1 - k)], &c)) {
      *scale = c;
      return n->inputs[static_cast<size_t>(k)];
    }
  return ir::kNoValue;
}

// Whether `n` (a Div or Mul reading y) scales y by a scalar constant.
bool output_scale(const Matcher& m, const ir::Node& n, ir::ValueId y, float* scale) {
  if (n.inputs.size() != 2 || !n.has_output(0)) return false;
  float c = 0.f;
  if (n.op_type == "Div") {
    if (n.inputs[0] != y || !scale_constant(m, n.inputs[1], &c)) return false;
    *scale = 1.f / c;
    return true;
  }
  const ir::ValueId other = n.inputs[0] == y ? n.inputs[1] : n.inputs[0];
  if ((n.inputs[0] != y && n.inputs[1] != y) || !scale_constant(m, other, &c)) return false;
  *scale = c;
  return true;
}

ir::Attribute ints_attr(const char* name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}

}  // namespace

void match_transposed_matmul(Matcher& m, size_t ni, std::vector<Fusion>* out) {
  const ir::Node& mm = m.g.nodes[ni];
  if (!mm.domain.empty() || mm.op_type != "MatMul" || mm.inputs.size() != 2 || !mm.has_output(0)) return;
  if (!mm.has_input(0) || !mm.has_input(1)) return;
  if (!m.is_float32(mm.inputs[0]) && !m.is_float32(mm.inputs[1]) && !m.is_float32(mm.outputs[0])) return;
  if (find_constant(m.constants, mm.inputs[1])) return;  // weights: MatMul packs them once
  Fusion f;
  f.node.name = mm.name;
  f.node.domain = kKilnDomain;
  f.node.op_type = "TransposedMatMul";
  f.node.opset = 1;
  f.node.inputs = mm.inputs;
  f.node.outputs = mm.outputs;
  f.replaces = {ni};
  // Each input: a Transpose, and a constant scale (q / sqrt(d) in
  // MultiheadAttention) before or after it, which goes into the GEMM's alpha.
  float alpha = 1.f;
  const char* names[] = {"perm_a", "perm_b"};
  for (size_t i = 0; i < 2; ++i) {
    bool scaled = false;
    auto peel_scale = [&] {
      int32_t si = -1;
      float c = 1.f;
      const ir::ValueId x = scaled ? ir::kNoValue : scaled_value(m, f.node.inputs[i], &c, &si);
      if (x == ir::kNoValue) return;
      f.node.inputs[i] = x;
      alpha *= c;
      scaled = true;
      f.replaces.push_back(static_cast<size_t>(si));
    };
    peel_scale();
    int32_t ti = -1;
    const ir::Node* t = m.producer(f.node.inputs[i], "Transpose", true, &ti);
    const std::vector<int64_t> perm = t && t->has_input(0) ? matrix_perm(*t, true) : std::vector<int64_t>{};
    if (perm.empty()) continue;
    f.node.inputs[i] = t->inputs[0];
    f.node.attributes.push_back(ints_attr(names[i], perm));
    f.replaces.push_back(static_cast<size_t>(ti));
    peel_scale();
  }
  const std::vector<int32_t>& readers = m.uses.readers(mm.outputs[0]);
  if (readers.size() == 1 && !m.uses.pinned(mm.outputs[0])) {
    const ir::Node* t = free_node(m, readers[0], "Transpose");
    const std::vector<int64_t> perm = t && t->has_output(0) ? matrix_perm(*t, false) : std::vector<int64_t>{};
    const ir::Node* sc = free_node(m, readers[0], "Div");
    if (!sc) sc = free_node(m, readers[0], "Mul");
    float c = 1.f;
    if (!perm.empty()) {
      f.node.outputs = {t->outputs[0]};
      f.node.attributes.push_back(ints_attr("perm_y", perm));
      f.replaces.push_back(static_cast<size_t>(readers[0]));
    } else if (sc && output_scale(m, *sc, mm.outputs[0], &c)) {
      // ... or of the product (BERT's scores / sqrt(d)): the GEMM's alpha.
      f.node.outputs = {sc->outputs[0]};
      alpha *= c;
      f.replaces.push_back(static_cast<size_t>(readers[0]));
    }
  }
  if (f.replaces.size() == 1) return;
  f.name = f.node.attributes.empty() ? "matmul+scale" : "transpose+matmul";
  if (alpha != 1.f) f.node.attributes.push_back(float_attr("alpha", alpha));
  std::sort(f.replaces.begin(), f.replaces.end());
  out->push_back(std::move(f));
}

void merge_matmul_activation(Matcher& m, std::vector<Fusion>* out) {
  // Which proposal (if any) replaces each node.
  std::vector<int32_t> owner(m.g.nodes.size(), -1);
  for (size_t k = 0; k < out->size(); ++k)
    for (size_t r : (*out)[k].replaces) owner[r] = static_cast<int32_t>(k);
  std::vector<uint8_t> dropped(out->size(), 0);
  for (size_t k = 0; k < out->size(); ++k) {
    Fusion& lin = (*out)[k];
    const bool gemm = lin.name == "matmul+add";
    if (lin.name != "matmul+bias" && !gemm) continue;
    if (gemm) {  // 2-D MatMul + bias: only a [N] bias goes into MatMulBias
      const Tensor* b = find_constant(m.constants, lin.node.inputs[1]);
      if (!b || b->rank() != 2 || !bias_vector(m, lin.node.inputs[2], b->dim(1))) continue;
    }
    const ir::ValueId y = lin.node.outputs[0];
    if (m.uses.pinned(y)) continue;
    // A Gelu node, free, the only reader.
    std::string act;
    std::vector<size_t> more;
    ir::ValueId result = ir::kNoValue;
    const std::vector<int32_t>& readers = m.uses.readers(y);
    const ir::Node* node = readers.size() == 1 ? free_node(m, readers[0], "Gelu") : nullptr;
    if (node && node->opset >= 20 && node->has_output(0)) {
      auto mode = node->attr_string("approximate", "none");
      if (mode.is_ok() && (*mode == "none" || *mode == "tanh")) {
        act = *mode == "tanh" ? "GeluTanh" : "Gelu";
        more = {static_cast<size_t>(readers[0])};
        result = node->outputs[0];
      }
    }
    // A Gelu proposal whose input is y and which holds every reader of y.
    const int32_t g = readers.empty() ? -1 : owner[static_cast<size_t>(readers[0])];
    if (act.empty() && g >= 0 && !dropped[static_cast<size_t>(g)]) {
      const Fusion& gelu = (*out)[static_cast<size_t>(g)];
      bool all = gelu.node.inputs.size() == 1 && gelu.node.inputs[0] == y;
      for (int32_t r : readers) all = all && owner[static_cast<size_t>(r)] == g;
      if (all && (gelu.name == "gelu" || gelu.name == "gelu tanh")) {
        act = gelu.name == "gelu" ? "Gelu" : "GeluTanh";
        more = gelu.replaces;
        result = gelu.node.outputs[0];
        dropped[static_cast<size_t>(g)] = 1;
      }
    }
    if (act.empty()) continue;
    lin.name = "matmul+bias+gelu";
    lin.node.domain = kKilnDomain;
    lin.node.op_type = kMatMulBiasOp;
    lin.node.opset = 1;
    lin.node.inputs.resize(3);
    lin.node.attributes = {string_attr("activation", act)};
    lin.node.outputs = {result};
    lin.replaces.insert(lin.replaces.end(), more.begin(), more.end());
    std::sort(lin.replaces.begin(), lin.replaces.end());
  }
  size_t kept = 0;
  for (size_t k = 0; k < out->size(); ++k) {
    if (dropped[k]) continue;
    if (kept != k) (*out)[kept] = std::move((*out)[k]);  // (a self-move would empty it)
    ++kept;
  }
  out->resize(kept);
}

}  // namespace kiln::optimizer
