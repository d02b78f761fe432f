// The fusion passes of onednn_lower.h, on the Program (after lowering).
#include <oneapi/dnnl/dnnl_types.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "onednn_lower.h"

namespace kiln_onednn {

namespace {

class Fuser {
 public:
  explicit Fuser(Program& p) : p_(p) { recount(); }

  void recount() {
    uses_.assign(p_.num_values, 0);
    producer_.assign(p_.num_values, -1);
    for (size_t i = 0; i < p_.ops.size(); ++i) {
      const Op& op = p_.ops[i];
      if (dead(op)) continue;
      producer_[static_cast<size_t>(op.out)] = static_cast<int32_t>(i);
      for (int32_t v : op.in)
        if (v >= 0) ++uses_[static_cast<size_t>(v)];
      for (const PostOp& po : op.post)
        if (po.value >= 0) ++uses_[static_cast<size_t>(po.value)];
    }
    for (int32_t v : p_.outputs) uses_[static_cast<size_t>(v)] += 1000;  // never fused away
  }
  static bool dead(const Op& op) { return op.out < 0; }
  // The op producing v, when v has exactly one use (so it may be fused away).
  Op* sole(int32_t v) {
    if (v < 0 || uses_[static_cast<size_t>(v)] != 1 || producer_[static_cast<size_t>(v)] < 0) return nullptr;
    return &p_.ops[static_cast<size_t>(producer_[static_cast<size_t>(v)])];
  }
  Op* prod(int32_t v) { return v < 0 || producer_[static_cast<size_t>(v)] < 0 ? nullptr : &p_.ops[static_cast<size_t>(producer_[static_cast<size_t>(v)])]; }
  const float* scalar(int32_t v) {
    for (const Constant& c : p_.constants)
      if (c.value == v && c.data.size() == 1) return &c.data[0];
    return nullptr;
  }
  bool is_const(int32_t v) {
    for (const Constant& c : p_.constants)
      if (c.value == v) return true;
    return false;
  }
  // Replaces op `into`'s output with `from`'s output and kills `from`.
  void absorb(Op& into, Op& from) {
    into.out = from.out;
    from.out = -1;
    recount();
  }
  static bool is_elt(const Op* o, int32_t alg) { return o && o->kind == OpKind::kEltwise && o->alg == alg; }
  static bool linear(const Op* o, float a, float b) {
    return is_elt(o, dnnl_eltwise_linear) && std::fabs(o->floats[0] - a) < 1e-4f * std::fabs(a) + 1e-6f &&
           std::fabs(o->floats[1] - b) < 1e-6f;
  }

  void gelu();
  void layer_norm();
  void post_ops();
  Program& p_;
  std::vector<int32_t> uses_, producer_;
};

// y = Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt 2)), 1))  ->  gelu_erf(x)
void Fuser::gelu() {
  for (Op& mul : p_.ops) {
    if (dead(mul) || mul.kind != OpKind::kBinary || mul.alg != dnnl_binary_mul) continue;
    for (int k = 0; k < 2; ++k) {
      Op* half = sole(mul.in[static_cast<size_t>(k)]);
      Op* plus1 = sole(mul.in[static_cast<size_t>(1 - k)]);
      if (!linear(half, 0.5f, 0.f) || !linear(plus1, 1.f, 1.f)) continue;
      Op* erf = sole(plus1->in[0]);
      if (!erf || erf->kind != OpKind::kErf) continue;
      Op* div = sole(erf->in[0]);
      if (!linear(div, 1.f / std::sqrt(2.f), 0.f) || div->in[0] != half->in[0]) continue;
      Op g;
      g.kind = OpKind::kEltwise;
      g.alg = dnnl_eltwise_gelu_erf;
      g.in = {half->in[0]};
      g.floats = {0.f, 0.f};
      g.out = mul.out;
      half->out = plus1->out = erf->out = div->out = -1;
      mul = g;
      recount();
      break;
    }
  }
}

// d = x - mean(x); y = d / sqrt(mean(d^2) + eps) [* gamma] [+ beta], over the last axis.
void Fuser::layer_norm() {
  auto mean_last = [&](const Op* o, int32_t x) {
    if (!o || o->kind != OpKind::kReduce || o->alg != dnnl_reduction_mean || o->in[0] != x) return false;
    const size_t rank = p_.dims[static_cast<size_t>(x)].size();
    return o->ints.size() == 2 && o->ints[0] == 1 && o->ints[1] == static_cast<int64_t>(rank) - 1;
  };
  for (Op& div : p_.ops) {
    if (dead(div) || div.kind != OpKind::kBinary || div.alg != dnnl_binary_div) continue;
    Op* sub = prod(div.in[0]);
    Op* sq = sole(div.in[1]);
    if (!sub || sub->kind != OpKind::kBinary || sub->alg != dnnl_binary_sub || !is_elt(sq, dnnl_eltwise_sqrt)) continue;
    const int32_t x = sub->in[0], d = sub->out;
    Op* m1 = sole(sub->in[1]);
    Op* eps = sole(sq->in[0]);
    if (!mean_last(m1, x) || !is_elt(eps, dnnl_eltwise_linear) || eps->floats[0] != 1.f) continue;
    Op* m2 = sole(eps->in[0]);
    Op* pw = m2 ? sole(m2->in[0]) : nullptr;
    if (!m2 || !is_elt(pw, dnnl_eltwise_square) || pw->in[0] != d || !mean_last(m2, pw->out) || uses_[static_cast<size_t>(d)] != 2) continue;
    Op ln;
    ln.kind = OpKind::kLayerNorm;
    ln.in = {x, -1, -1};
    ln.floats = {eps->floats[1]};
    ln.out = div.out;
    m1->out = sub->out = pw->out = m2->out = eps->out = sq->out = -1;
    div = ln;
    recount();
    // Absorb `* gamma` and `+ beta` (constants of the last axis's size).
    const int64_t c = p_.dims[static_cast<size_t>(x)].back();
    for (int step = 1; step <= 2; ++step) {
      for (Op& o : p_.ops) {
        const int32_t alg = step == 1 ? dnnl_binary_mul : dnnl_binary_add;
        if (dead(o) || o.kind != OpKind::kBinary || o.alg != alg || o.in[0] != div.out || uses_[static_cast<size_t>(div.out)] != 1) continue;
        if (!is_const(o.in[1]) || p_.dims[static_cast<size_t>(o.in[1])] != std::vector<int64_t>{c}) continue;
        div.in[static_cast<size_t>(step)] = o.in[1];
        div.out = o.out;
        o.out = -1;
        recount();
        break;
      }
    }
  }
}

// Conv/ConvTranspose/MatMul followed by element-wise ops, a residual Add, a bias Add.
void Fuser::post_ops() {
  for (size_t i = 0; i < p_.ops.size(); ++i) {
    Op& op = p_.ops[i];
    if (dead(op) || (op.kind != OpKind::kConv && op.kind != OpKind::kDeconv && op.kind != OpKind::kMatMul)) continue;
    for (bool changed = true; changed;) {
      changed = false;
      if (uses_[static_cast<size_t>(op.out)] != 1) break;
      Op* next = nullptr;
      for (size_t j = i + 1; j < p_.ops.size() && !next; ++j)
        if (!dead(p_.ops[j]) && (p_.ops[j].in[0] == op.out || (p_.ops[j].in.size() > 1 && p_.ops[j].in[1] == op.out)))
          next = &p_.ops[j];
      if (!next) break;
      if (next->kind == OpKind::kEltwise && next->in[0] == op.out) {
        op.post.push_back({PostKind::kEltwise, next->alg, next->floats[0], next->floats[1], -1});
        absorb(op, *next);
        changed = true;
      } else if (next->kind == OpKind::kBinary && next->alg == dnnl_binary_add) {
        const int32_t other = next->in[0] == op.out ? next->in[1] : next->in[0];
        Op* def = prod(other);
        const bool before = !def || def < &op;  // defined before `op` runs
        const auto& od = p_.dims[static_cast<size_t>(other)];
        const auto& yd = p_.dims[static_cast<size_t>(op.out)];
        const bool bias = op.kind == OpKind::kMatMul && op.in.size() == 2 && op.post.empty() && is_const(other) &&
                          od.size() == 1 && od[0] == yd.back();
        if (bias) {
          op.in.push_back(other);
        } else if (before && od == yd && op.kind != OpKind::kDeconv) {
          op.post.push_back({op.kind == OpKind::kConv ? PostKind::kSum : PostKind::kBinary,
                             dnnl_binary_add, 1.f, 0.f, other});
        } else if (before && op.kind == OpKind::kMatMul && od.size() <= yd.size()) {
          op.post.push_back({PostKind::kBinary, dnnl_binary_add, 0.f, 0.f, other});
        } else {
          break;
        }
        absorb(op, *next);
        changed = true;
      }
    }
  }
}

}  // namespace

void fuse_program(Program& p) {
  Fuser f(p);
  f.gelu();
  f.layer_norm();
  f.post_ops();
  std::vector<Op> live;
  for (Op& op : p.ops)
    if (op.out >= 0) live.push_back(std::move(op));
  p.ops = std::move(live);
}

}  // namespace kiln_onednn
