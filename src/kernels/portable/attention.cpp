// Attention-23/24 and RotaryEmbedding-23. Attention: scaled dot-product attention with optional mask (bool or
// additive), causal masking, KV cache (past/present key and value), grouped
// query attention, softcap, the qk_matmul_output modes and (24) per-batch
// non-padded KV lengths. Q/K/V are [B, heads, S, D] or [B, S, heads * D].
// Computed in float32 (double for float64 inputs is staged through float32
// as well); results are rounded to the input dtype.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// A [B, H, S, D] float copy of Q, K or V given as 4-D or as 3-D [B, S, H*D].
struct Heads {
  int64_t b = 0, h = 0, s = 0, d = 0;
  std::vector<float> v;
  float* at(int64_t bi, int64_t hi, int64_t si) { return v.data() + ((bi * h + hi) * s + si) * d; }
  const float* at(int64_t bi, int64_t hi, int64_t si) const { return v.data() + ((bi * h + hi) * s + si) * d; }
};

Result<Heads> to_heads(const Tensor& t, int64_t num_heads, const char* what) {
  Heads out;
  std::vector<float> f = to_float_vector(t);
  if (t.rank() == 4) {
    out = Heads{t.dim(0), t.dim(1), t.dim(2), t.dim(3), std::move(f)};
    return out;
  }
  if (t.rank() != 3) return invalid_argument(what, " has rank ", t.rank(), "; expected 3 or 4");
  if (num_heads <= 0 || t.dim(2) % num_heads != 0)
    return invalid_argument(what, " is 3-D with hidden size ", t.dim(2),
                            ", which the head count ", num_heads, " does not divide (set q_num_heads/kv_num_heads)");
  out.b = t.dim(0);
  out.s = t.dim(1);
  out.h = num_heads;
  out.d = t.dim(2) / num_heads;
  out.v.resize(f.size());
  for (int64_t bi = 0; bi < out.b; ++bi)
    for (int64_t si = 0; si < out.s; ++si)
      for (int64_t hi = 0; hi < out.h; ++hi)
        for (int64_t di = 0; di < out.d; ++di)
          out.at(bi, hi, si)[di] = f[static_cast<size_t>(((bi * out.s + si) * out.h + hi) * out.d + di)];
  return out;
}

// past (may be absent) followed by cur along the sequence axis.
Result<Heads> concat_past(const KernelContext& ctx, size_t past_index, Heads cur, const char* what) {
  if (!ctx.has_input(past_index)) return cur;
  const Tensor& p = ctx.input(past_index);
  if (p.rank() != 4 || p.dim(0) != cur.b || p.dim(1) != cur.h || p.dim(3) != cur.d)
    return invalid_argument(what, " has shape ", p.shape().to_string(), "; expected [",
                            cur.b, ", ", cur.h, ", past, ", cur.d, "]");
  std::vector<float> pf = to_float_vector(p);
  Heads all{cur.b, cur.h, p.dim(2) + cur.s, cur.d, {}};
  all.v.resize(static_cast<size_t>(all.b * all.h * all.s * all.d));
  for (int64_t bi = 0; bi < all.b; ++bi)
    for (int64_t hi = 0; hi < all.h; ++hi)
      for (int64_t si = 0; si < all.s; ++si) {
        const float* src = si < p.dim(2) ? pf.data() + ((bi * all.h + hi) * p.dim(2) + si) * all.d
                                         : cur.at(bi, hi, si - p.dim(2));
        std::copy(src, src + all.d, all.at(bi, hi, si));
      }
  return all;
}

// Additive bias of attn_mask at [b, h, i, j], broadcast from its shape
// (right-aligned, up to 4-D); a last dim shorter than the KV length is
// padded with -inf.
class Mask {
 public:
  // `scores` is [B, H, Sq]: each of the mask's leading dims is 1 or that size.
  Status init(const KernelContext& ctx, size_t index, const int64_t (&scores)[3]) {
    if (!ctx.has_input(index)) return Status::ok();
    const Tensor& m = ctx.input(index);
    if (m.rank() > 4 || m.rank() < 1)
      return invalid_argument("attn_mask has rank ", m.rank(), "; expected 1 to 4");
    present_ = true;
    int64_t dims[4] = {1, 1, 1, 1};
    for (size_t i = 0; i < m.rank(); ++i) dims[4 - m.rank() + i] = m.dim(i);
    for (int d = 0; d < 3; ++d)
      if (dims[d] != 1 && dims[d] != scores[d])
        return invalid_argument("attn_mask ", m.shape().to_string(), " does not broadcast to the scores [", scores[0],
                                ", ", scores[1], ", ", scores[2], ", kv]");
    int64_t stride = 1;
    for (int d = 3; d >= 0; --d) {
      stride_[d] = dims[d] == 1 ? 0 : stride;
      stride *= dims[d];
    }
    last_ = dims[3];
    if (m.dtype() == DType::kBool) {
      const bool* p = m.data<bool>();
      bias_.resize(static_cast<size_t>(m.numel()));
      for (int64_t i = 0; i < m.numel(); ++i) bias_[static_cast<size_t>(i)] = p[i] ? 0.f : kNegInf;
    } else {
      bias_ = to_float_vector(m);
    }
    return Status::ok();
  }
  float at(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (!present_) return 0.f;
    if (j >= last_) return kNegInf;
    return bias_[static_cast<size_t>(b * stride_[0] + h * stride_[1] + i * stride_[2] + j * stride_[3])];
  }

 private:
  bool present_ = false;
  int64_t stride_[4] = {};
  int64_t last_ = 0;
  std::vector<float> bias_;
};

class AttentionKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    causal_ = init.attr_int("is_causal", 0) != 0;
    q_heads_ = init.attr_int("q_num_heads", 0);
    kv_heads_ = init.attr_int("kv_num_heads", 0);
    mode_ = init.attr_int("qk_matmul_output_mode", 0);
    scale_ = init.attr_float("scale", 0.f);
    softcap_ = init.attr_float("softcap", 0.f);
    if (mode_ < 0 || mode_ > 3)
      return invalid_argument("qk_matmul_output_mode is ", mode_, "; expected 0 to 3");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " (Q, K, V) is missing");
    const Tensor& qt = ctx.input(0);
    const bool three_d = qt.rank() == 3;
    if (ctx.input(1).rank() != qt.rank() || ctx.input(2).rank() != qt.rank())
      return invalid_argument("Q, K and V must have the same rank");
    KILN_ASSIGN_OR_RETURN(Heads q, to_heads(qt, q_heads_, "Q"));
    KILN_ASSIGN_OR_RETURN(Heads k0, to_heads(ctx.input(1), kv_heads_, "K"));
    KILN_ASSIGN_OR_RETURN(Heads v0, to_heads(ctx.input(2), kv_heads_, "V"));
    KILN_ASSIGN_OR_RETURN(Heads k, concat_past(ctx, 4, std::move(k0), "past_key"));
    KILN_ASSIGN_OR_RETURN(Heads v, concat_past(ctx, 5, std::move(v0), "past_value"));
    if (k.b != q.b || v.b != q.b || k.d != q.d || k.h != v.h || k.s != v.s || k.h == 0 || q.h % k.h != 0)
      return invalid_argument("Q ", qt.shape().to_string(), ", K ",
                              ctx.input(1).shape().to_string(), " and V ", ctx.input(2).shape().to_string(),
                              " do not fit (batch, head size, and K/V heads dividing Q heads must agree)");
    Mask mask;
    KILN_RETURN_IF_ERROR(mask.init(ctx, 3, {q.b, q.h, q.s}));
    std::vector<int64_t> nonpad;
    if (ctx.has_input(6)) {
      KILN_ASSIGN_OR_RETURN(nonpad, to_int64_vector(ctx.input(6)));
      if (static_cast<int64_t>(nonpad.size()) != q.b)
        return invalid_argument("nonpad_kv_seqlen has ", nonpad.size(), " values for batch ",
                                q.b);
    }
    const DType dt = qt.dtype();
    Tensor* y = nullptr;
    if (three_d) {
      KILN_ASSIGN_OR_RETURN(y, ctx.allocate_output(0, dt, Shape{q.b, q.s, q.h * v.d}));
    } else {
      KILN_ASSIGN_OR_RETURN(y, ctx.allocate_output(0, dt, Shape{q.b, q.h, q.s, v.d}));
    }
    std::vector<float> yv(static_cast<size_t>(q.b * q.h * q.s * v.d));
    std::vector<float> qk(static_cast<size_t>(q.b * q.h * q.s * k.s));
    // Causal masking aligns the queries with the keys after the past ones.
    const int64_t past = ctx.has_input(4) ? ctx.input(4).dim(2) : 0;
    attend(q, k, v, mask, nonpad, past, yv.data(), qk.data());
    if (three_d) {  // [B, H, S, Dv] -> [B, S, H * Dv]
      std::vector<float> t(yv.size());
      for (int64_t bi = 0; bi < q.b; ++bi)
        for (int64_t hi = 0; hi < q.h; ++hi)
          for (int64_t si = 0; si < q.s; ++si)
            for (int64_t di = 0; di < v.d; ++di)
              t[static_cast<size_t>(((bi * q.s + si) * q.h + hi) * v.d + di)] =
                  yv[static_cast<size_t>(((bi * q.h + hi) * q.s + si) * v.d + di)];
      yv.swap(t);
    }
    from_float_vector(yv.data(), y);
    return write_extra_outputs(ctx, dt, k, v, q, qk);
  }

 private:
  Status write_extra_outputs(KernelContext& ctx, DType dt, const Heads& k, const Heads& v, const Heads& q,
                             const std::vector<float>& qk) const {
    if (ctx.wants_output(1)) {
      KILN_ASSIGN_OR_RETURN(Tensor * pk, ctx.allocate_output(1, dt, Shape{k.b, k.h, k.s, k.d}));
      from_float_vector(k.v.data(), pk);
    }
    if (ctx.wants_output(2)) {
      KILN_ASSIGN_OR_RETURN(Tensor * pv, ctx.allocate_output(2, dt, Shape{v.b, v.h, v.s, v.d}));
      from_float_vector(v.v.data(), pv);
    }
    if (ctx.wants_output(3)) {
      KILN_ASSIGN_OR_RETURN(Tensor * o, ctx.allocate_output(3, dt, Shape{q.b, q.h, q.s, k.s}));
      from_float_vector(qk.data(), o);
    }
    return Status::ok();
  }

  // y[b, h, i] = softmax_j(softcap(q_i . k_j * scale) + bias) . v_j; `qk_out`
  // gets the scores at the stage qk_matmul_output_mode names (0: the matmul,
  // 1: after softcap, 2: after the mask, 3: after softmax).
  void attend(const Heads& q, const Heads& k, const Heads& v, const Mask& mask, const std::vector<int64_t>& nonpad,
              int64_t past, float* y, float* qk_out) const {
    const double scale = scale_ != 0.f ? scale_ : 1.0 / std::sqrt(static_cast<double>(q.d));
    const float sq = static_cast<float>(std::sqrt(scale));
    const int64_t group = q.h / k.h;
    std::vector<float> row(static_cast<size_t>(k.s));
    for (int64_t b = 0; b < q.b; ++b) {
      for (int64_t h = 0; h < q.h; ++h) {
        const int64_t kh = h / group;
        for (int64_t i = 0; i < q.s; ++i) {
          const float* qi = q.at(b, h, i);
          float* qo = qk_out + ((b * q.h + h) * q.s + i) * k.s;
          float mx = kNegInf;
          for (int64_t j = 0; j < k.s; ++j) {
            const float* kj = k.at(b, kh, j);
            float dot = 0;
            for (int64_t d = 0; d < q.d; ++d) dot += (qi[d] * sq) * (kj[d] * sq);
            float bias = mask.at(b, h, i, j);
            if (causal_ && j > i + past) bias = kNegInf;
            if (!nonpad.empty() && j >= nonpad[static_cast<size_t>(b)]) bias = kNegInf;
            // softcap applies to the scores before the mask, so masked
            // positions stay -inf.
            const float capped = softcap_ > 0.f ? softcap_ * std::tanh(dot / softcap_) : dot;
            const float s = capped + bias;
            if (mode_ == 0) qo[j] = dot;
            if (mode_ == 1) qo[j] = capped;
            if (mode_ == 2) qo[j] = s;
            row[static_cast<size_t>(j)] = s;
            mx = std::max(mx, s);
          }
          double sum = 0;
          for (float& r : row) {
            r = std::exp(r - mx);
            sum += r;
          }
          for (float& r : row) r = static_cast<float>(r / sum);
          if (mode_ == 3) std::copy(row.begin(), row.end(), qo);
          float* yi = y + ((b * q.h + h) * q.s + i) * v.d;
          for (int64_t d = 0; d < v.d; ++d) yi[d] = 0;
          for (int64_t j = 0; j < k.s; ++j) {
            const float p = row[static_cast<size_t>(j)];
            const float* vj = v.at(b, kh, j);
            for (int64_t d = 0; d < v.d; ++d) yi[d] += p * vj[d];
          }
        }
      }
    }
  }

  bool causal_ = false;
  int64_t q_heads_ = 0, kv_heads_ = 0, mode_ = 0;
  float scale_ = 0.f, softcap_ = 0.f;
};

// RotaryEmbedding-23: rotates the first rotary_embedding_dim features of each
// head by the cached angles of its position (halves, or interleaved pairs).
class RotaryEmbeddingKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    interleaved_ = init.attr_int("interleaved", 0) != 0;
    num_heads_ = init.attr_int("num_heads", 0);
    rotary_dim_ = init.attr_int("rotary_embedding_dim", 0);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
    const Tensor& x = ctx.input(0);
    // Heads works on [B, H, S, D]; a 3-D X is [B, S, H * D].
    KILN_ASSIGN_OR_RETURN(Heads h, to_heads(x, num_heads_, "X"));
    const int64_t dim = rotary_dim_ > 0 ? rotary_dim_ : h.d;
    if (dim > h.d || dim % 2 != 0)
      return invalid_argument("rotary_embedding_dim ", dim, " does not fit head size ", h.d);
    const std::vector<float> cosv = to_float_vector(ctx.input(1)), sinv = to_float_vector(ctx.input(2));
    const Tensor& cache = ctx.input(1);
    if (ctx.input(2).shape() != cache.shape())  // rows of both are read at the same offsets
      return invalid_argument("sin_cache ", ctx.input(2).shape().to_string(), " differs from cos_cache ",
                              cache.shape().to_string());
    const int64_t row = cache.rank() ? cache.dim(cache.rank() - 1) : 0;
    std::vector<int64_t> pos;
    if (ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(pos, to_int64_vector(ctx.input(3)));
      if (static_cast<int64_t>(pos.size()) != h.b * h.s)
        return invalid_argument("position_ids has ", pos.size(), " values for ", h.b * h.s,
                                " positions");
    }
    const int64_t half = dim / 2, rows = row ? static_cast<int64_t>(cosv.size()) / row : 0;
    if (row < half) return invalid_argument("cos_cache rows are shorter than ", half);
    for (int64_t b = 0; b < h.b; ++b) {
      for (int64_t si = 0; si < h.s; ++si) {
        const int64_t r = pos.empty() ? b * h.s + si : pos[static_cast<size_t>(b * h.s + si)];
        if (r < 0 || r >= rows) return invalid_argument("position ", r, " is outside the cache");
        const float* c = cosv.data() + r * row;
        const float* sn = sinv.data() + r * row;
        for (int64_t hi = 0; hi < h.h; ++hi) {
          float* e = h.at(b, hi, si);
          for (int64_t k = 0; k < half; ++k) {
            float& x1 = interleaved_ ? e[2 * k] : e[k];
            float& x2 = interleaved_ ? e[2 * k + 1] : e[k + half];
            const float a = x1, bb = x2;
            x1 = c[k] * a - sn[k] * bb;
            x2 = sn[k] * a + c[k] * bb;
          }
        }
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    if (x.rank() == 3) {  // back to [B, S, H * D]
      std::vector<float> t(h.v.size());
      for (int64_t b = 0; b < h.b; ++b)
        for (int64_t hi = 0; hi < h.h; ++hi)
          for (int64_t si = 0; si < h.s; ++si)
            std::copy(h.at(b, hi, si), h.at(b, hi, si) + h.d, t.data() + ((b * h.s + si) * h.h + hi) * h.d);
      h.v.swap(t);
    }
    from_float_vector(h.v.data(), y);
    return Status::ok();
  }

 private:
  bool interleaved_ = false;
  int64_t num_heads_ = 0, rotary_dim_ = 0;
};

// FlexAttention (ai.onnx.preview, 1): scaled dot-product attention over
// [B, H, S, D] inputs whose float32 scores and probabilities may be
// rewritten by the score_mod and prob_mod subgraphs (each takes and returns
// the whole [B, H, Sq, Skv] tensor). K/V heads are shared in groups.
class FlexAttentionKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    scale_ = init.attr_float("scale", 0.f);
    score_mod_ = init.attr_graph("score_mod");
    prob_mod_ = init.attr_graph("prob_mod");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " (Q, K, V) is missing");
    for (size_t i = 0; i < 3; ++i)
      if (ctx.input(i).rank() != 4) return invalid_argument("Q, K and V must be 4-D");
    KILN_ASSIGN_OR_RETURN(Heads q, to_heads(ctx.input(0), 0, "Q"));
    KILN_ASSIGN_OR_RETURN(Heads k, to_heads(ctx.input(1), 0, "K"));
    KILN_ASSIGN_OR_RETURN(Heads v, to_heads(ctx.input(2), 0, "V"));
    if (k.b != q.b || v.b != q.b || k.d != q.d || k.h != v.h || k.s != v.s || k.h == 0 || q.h % k.h != 0)
      return invalid_argument("Q, K and V shapes do not fit");
    const float sq = std::sqrt(scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(q.d)));
    const int64_t group = q.h / k.h;
    std::vector<float> scores(static_cast<size_t>(q.b * q.h * q.s * k.s));
    for (int64_t b = 0; b < q.b; ++b)
      for (int64_t h = 0; h < q.h; ++h)
        for (int64_t i = 0; i < q.s; ++i)
          for (int64_t j = 0; j < k.s; ++j) {
            const float* qi = q.at(b, h, i);
            const float* kj = k.at(b, h / group, j);
            float dot = 0;
            for (int64_t d = 0; d < q.d; ++d) dot += (qi[d] * sq) * (kj[d] * sq);
            scores[static_cast<size_t>(((b * q.h + h) * q.s + i) * k.s + j)] = dot;
          }
    const Shape shape{q.b, q.h, q.s, k.s};
    KILN_RETURN_IF_ERROR(apply_mod(ctx, score_mod_, shape, &scores));
    for (size_t r = 0; r < scores.size(); r += static_cast<size_t>(k.s)) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < k.s; ++j) mx = std::max(mx, scores[r + static_cast<size_t>(j)]);
      double sum = 0;
      for (int64_t j = 0; j < k.s; ++j) sum += scores[r + static_cast<size_t>(j)] = std::exp(scores[r + static_cast<size_t>(j)] - mx);
      for (int64_t j = 0; j < k.s; ++j) scores[r + static_cast<size_t>(j)] = static_cast<float>(scores[r + static_cast<size_t>(j)] / sum);
    }
    KILN_RETURN_IF_ERROR(apply_mod(ctx, prob_mod_, shape, &scores));
    std::vector<float> y(static_cast<size_t>(q.b * q.h * q.s * v.d), 0.f);
    for (int64_t b = 0; b < q.b; ++b)
      for (int64_t h = 0; h < q.h; ++h)
        for (int64_t i = 0; i < q.s; ++i) {
          float* yi = y.data() + ((b * q.h + h) * q.s + i) * v.d;
          const float* p = scores.data() + ((b * q.h + h) * q.s + i) * k.s;
          for (int64_t j = 0; j < k.s; ++j) {
            const float* vj = v.at(b, h / group, j);
            for (int64_t d = 0; d < v.d; ++d) yi[d] += p[j] * vj[d];
          }
        }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, ctx.input(0).dtype(), Shape{q.b, q.h, q.s, v.d}));
    from_float_vector(y.data(), out);
    return Status::ok();
  }

 private:
  static Status apply_mod(KernelContext& ctx, const ir::Graph* g, const Shape& shape, std::vector<float>* values) {
    if (!g) return Status::ok();
    if (!ctx.subgraphs()) return internal_error("no subgraph runner");
    std::vector<Value> in;
    in.emplace_back(Tensor::from_vector(*values, shape));
    KILN_ASSIGN_OR_RETURN(std::vector<Value> out, ctx.subgraphs()->run(*g, in));
    if (out.empty() || !out[0].is_tensor() || out[0].tensor().numel() != static_cast<int64_t>(values->size()) ||
        !dtype_is_float(out[0].tensor().dtype()))
      return invalid_argument("a score_mod/prob_mod graph must return one float tensor of shape ",
                              shape.to_string());
    *values = to_float_vector(out[0].tensor());
    return Status::ok();
  }

  float scale_ = 0.f;
  const ir::Graph* score_mod_ = nullptr;
  const ir::Graph* prob_mod_ = nullptr;
};

}  // namespace

void register_attention_ops(KernelRegistry& r) {
  r.add({.domain = "ai.onnx.preview", .op_type = "FlexAttention", .since_version = 1, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<FlexAttentionKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Attention", .since_version = 23, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<AttentionKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "RotaryEmbedding", .since_version = 23, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<RotaryEmbeddingKernel>, .flags = 0});
}

}  // namespace kiln::kernels
