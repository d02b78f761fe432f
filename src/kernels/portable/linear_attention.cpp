// LinearAttention-27: recurrent (linear) attention with a per-head state S
// of [Dk, Dv], updated per time step by the update_rule:
//   linear:      S += k v^T
//   gated:       S = S * exp(decay) (per key row); S += k v^T
//   delta:       S += k (beta (v - S^T k))^T
//   gated_delta: decay, then the delta update (the default)
// and read as out_t = scale * q_t^T S. Query heads share key/value heads in
// groups (q head h reads kv head h / (Hq / Hkv)). Inputs are [B, T, H * D];
// past_state / present_state are [B, Hkv, Dk, Dv]. Computed in float32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

enum class Rule { kLinear, kGated, kDelta, kGatedDelta };

class LinearAttentionKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    q_heads_ = init.attr_int("q_num_heads", 0);
    kv_heads_ = init.attr_int("kv_num_heads", 0);
    scale_ = init.attr_float("scale", 0.f);
    const std::string rule = init.attr_string("update_rule", "gated_delta");
    if (rule == "linear") rule_ = Rule::kLinear;
    else if (rule == "gated") rule_ = Rule::kGated;
    else if (rule == "delta") rule_ = Rule::kDelta;
    else if (rule == "gated_delta") rule_ = Rule::kGatedDelta;
    else return invalid_argument("update_rule '", rule, "' is unknown");
    if (q_heads_ <= 0 || kv_heads_ <= 0 || q_heads_ % kv_heads_ != 0)
      return invalid_argument("q_num_heads ", q_heads_, " and kv_num_heads ", kv_heads_,
                              " must be positive, the second dividing the first");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
    const Tensor& q = ctx.input(0);
    const Tensor& k = ctx.input(1);
    const Tensor& v = ctx.input(2);
    if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3 || q.dim(2) % q_heads_ || k.dim(2) % kv_heads_ ||
        v.dim(2) % kv_heads_ || k.dim(0) != q.dim(0) || k.dim(1) != q.dim(1) || v.dim(0) != q.dim(0) ||
        v.dim(1) != q.dim(1))
      return invalid_argument("query ", q.shape().to_string(), ", key ", k.shape().to_string(),
                              " and value ", v.shape().to_string(), " do not fit the head counts");
    Dims d{q.dim(0), q.dim(1), q.dim(2) / q_heads_, v.dim(2) / kv_heads_};
    if (k.dim(2) / kv_heads_ != d.dk) return invalid_argument("key and query head sizes differ");
    // Dims of an empty tensor are unbounded: the products below must fit.
    KILN_ASSIGN_OR_RETURN(const int64_t state_numel, checked_numel(Shape{d.b, kv_heads_, d.dk, d.dv}));
    KILN_RETURN_IF_ERROR(checked_numel(Shape{d.b, d.t, q_heads_, std::max(d.dk, d.dv)}).status());
    const size_t state_size = static_cast<size_t>(state_numel);
    std::vector<float> state(state_size, 0.f);
    if (ctx.has_input(3)) {
      if (static_cast<size_t>(ctx.input(3).numel()) != state_size)
        return invalid_argument("past_state has shape ", ctx.input(3).shape().to_string());
      state = to_float_vector(ctx.input(3));
    }
    const bool gated = rule_ == Rule::kGated || rule_ == Rule::kGatedDelta;
    const bool delta = rule_ == Rule::kDelta || rule_ == Rule::kGatedDelta;
    std::vector<float> decay, beta;
    if (gated) {
      if (!ctx.has_input(4)) return invalid_argument("the gated rules need input 4 (decay)");
      decay = to_float_vector(ctx.input(4));
    }
    if (delta) {
      if (!ctx.has_input(5)) return invalid_argument("the delta rules need input 5 (beta)");
      beta = to_float_vector(ctx.input(5));
    }
    // decay: one value per [B, T, Hkv] or per [B, T, Hkv, Dk]; beta: per [B, T] or [B, T, Hkv].
    const auto steps = static_cast<size_t>(d.b * d.t);
    const auto heads = static_cast<size_t>(kv_heads_);
    const int64_t decay_per = decay.size() == steps * heads ? 1 : d.dk;
    const int64_t beta_per = beta.size() == steps ? 1 : kv_heads_;
    if (gated && decay.size() != steps * heads * static_cast<size_t>(decay_per))
      return invalid_argument("decay has ", decay.size(), " values, not B*T*Hkv (*Dk)");
    if (delta && beta.size() != steps * static_cast<size_t>(beta_per))
      return invalid_argument("beta has ", beta.size(), " values, not B*T (*Hkv)");
    const std::vector<float> qv = to_float_vector(q), kv = to_float_vector(k), vv = to_float_vector(v);
    std::vector<float> out(static_cast<size_t>(d.b * d.t * q_heads_ * d.dv));
    const float scale = scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(d.dk));
    const int64_t group = q_heads_ / kv_heads_;
    std::vector<float> diff(static_cast<size_t>(d.dv));
    for (int64_t b = 0; b < d.b; ++b) {
      for (int64_t t = 0; t < d.t; ++t) {
        const int64_t bt = b * d.t + t;
        for (int64_t h = 0; h < kv_heads_; ++h) {
          float* s = state.data() + (b * kv_heads_ + h) * d.dk * d.dv;
          const float* kt = kv.data() + (bt * kv_heads_ + h) * d.dk;
          const float* vt = vv.data() + (bt * kv_heads_ + h) * d.dv;
          if (gated) {
            const float* dec = decay.data() + (bt * kv_heads_ + h) * decay_per;
            for (int64_t i = 0; i < d.dk; ++i) {
              const float f = std::exp(dec[decay_per == 1 ? 0 : i]);
              for (int64_t j = 0; j < d.dv; ++j) s[i * d.dv + j] *= f;
            }
          }
          for (int64_t j = 0; j < d.dv; ++j) diff[static_cast<size_t>(j)] = vt[j];
          if (delta) {
            const float bta = beta[static_cast<size_t>(bt * beta_per + (beta_per == 1 ? 0 : h))];
            for (int64_t j = 0; j < d.dv; ++j) {
              float r = 0;
              for (int64_t i = 0; i < d.dk; ++i) r += s[i * d.dv + j] * kt[i];
              diff[static_cast<size_t>(j)] = bta * (vt[j] - r);
            }
          }
          for (int64_t i = 0; i < d.dk; ++i)
            for (int64_t j = 0; j < d.dv; ++j) s[i * d.dv + j] += kt[i] * diff[static_cast<size_t>(j)];
          for (int64_t g = 0; g < group; ++g) {
            const int64_t qh = h * group + g;
            const float* qt = qv.data() + (bt * q_heads_ + qh) * d.dk;
            float* o = out.data() + (bt * q_heads_ + qh) * d.dv;
            for (int64_t j = 0; j < d.dv; ++j) {
              float r = 0;
              for (int64_t i = 0; i < d.dk; ++i) r += qt[i] * s[i * d.dv + j];
              o[j] = scale * r;
            }
          }
        }
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, q.dtype(), Shape{d.b, d.t, q_heads_ * d.dv}));
    from_float_vector(out.data(), y);
    if (ctx.wants_output(1)) {
      KILN_ASSIGN_OR_RETURN(Tensor * ps, ctx.allocate_output(1, q.dtype(), Shape{d.b, kv_heads_, d.dk, d.dv}));
      from_float_vector(state.data(), ps);
    }
    return Status::ok();
  }

 private:
  struct Dims {
    int64_t b, t, dk, dv;
  };

  int64_t q_heads_ = 0, kv_heads_ = 0;
  float scale_ = 0.f;
  Rule rule_ = Rule::kGatedDelta;
};

}  // namespace

void register_linear_attention_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "LinearAttention", .since_version = 27, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<LinearAttentionKernel>, .flags = 0});
}

}  // namespace kiln::kernels
