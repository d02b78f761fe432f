// Conv (opset 1 and 11): 1-D/2-D/3-D, groups, strides, dilations, pads,
// auto_pad. float32 has three paths:
//   - depthwise (one input channel per group, 1-D/2-D): a direct loop over
//     output rows, vectorized along the row;
//   - pointwise (1x1 kernel, stride 1, no padding): Y = W x X, a GEMM straight
//     on the NCHW input, no copy;
//   - everything else: GEMM with an implicit im2col that writes the packed B
//     panels directly (gemm.h BPanelSource), so the column matrix is never
//     materialized and its scratch stays one cache block.
// Constant weights are packed for the GEMM once, at load; the bias is a
// fused per-row epilogue. float16/bfloat16/double are staged through float32.
// The same kernel runs com.microsoft FusedConv (Conv + optional sum input Z +
// activation), the form ONNX Runtime saves optimized models in and the one
// Kiln's optimizer (src/optimizer) fuses Conv + activation into; Kiln adds
// the activations HardSwish and Silu (x * Sigmoid(x)) to ORT's list.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"
#include "kernels/registry.h"

namespace kiln::kernels {

namespace {

struct ConvProblem {
  int64_t n = 0, c = 0, m = 0, group = 1;
  WindowGeometry g;
  int64_t cg() const { return c / group; }
  int64_t mg() const { return m / group; }
  int64_t kg() const { return cg() * g.kernel_size(); }  // GEMM K per group
  bool depthwise() const { return cg() == 1 && group > 1 && g.rank() <= 2; }
  bool pointwise() const {
    for (size_t d = 0; d < g.rank(); ++d)
      if (g.kernel[d] != 1 || g.stride[d] != 1 || g.pad_begin[d] != 0 || g.pad_end[d] != 0) return false;
    return true;
  }
};

// The im2col matrix of one image and group, produced panel by panel.
class Im2colSource final : public BPanelSource {
 public:
  Im2colSource(const WindowGeometry& g, const float* x) : g_(g), x_(x) {}
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const override {
    im2col_panels<float>(g_, x_, p0, kc, j0, nc, nr, 0.f, out);
  }

 private:
  const WindowGeometry& g_;
  const float* x_;
};

// One output row of a depthwise 2-D conv: y[ow] += sum_kw w[kw] * x[ow*s + kw*d - pad].
KILN_CV_MULTIVERSION
void depthwise_row(float* y, int64_t ow_count, const float* xrow, int64_t in_w, const float* w, int64_t kw_count,
                   int64_t stride, int64_t dilation, int64_t pad) {
  for (int64_t kw = 0; kw < kw_count; ++kw) {
    const float wv = w[kw];
    const int64_t off = kw * dilation - pad;  // input column of output column 0
    // Output columns whose input column lies in [0, in_w).
    const int64_t lo = off < 0 ? (-off + stride - 1) / stride : 0;
    const int64_t hi = std::min(ow_count, off < in_w ? (in_w - 1 - off) / stride + 1 : 0);
    if (stride == 1) {
      const float* xs = xrow + off;
      for (int64_t ow = lo; ow < hi; ++ow) y[ow] += wv * xs[ow];
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) y[ow] += wv * xrow[ow * stride + off];
    }
  }
}

// 3x3 depthwise rows (mobilenet): 16 outputs per step held in one vector
// (GCC vector extension: one zmm on AVX-512, two ymm on AVX2, four xmm on the
// baseline), 9 taps from up to three input rows; stride 2 picks the even
// lanes of two loads. `rows[k]` is input row oh*s - pad + k (in_w floats), or
// null in the padding. Columns [ow_lo, ow_hi) must have all three taps inside
// the row; vector steps also stop before reading past it.
typedef float Vec16 __attribute__((vector_size(64)));
typedef int Idx16 __attribute__((vector_size(64)));

KILN_CV_MULTIVERSION
void depthwise3x3_row(float* y, int64_t ow_lo, int64_t ow_hi, const float* const* rows, const float* w, float bias,
                      int64_t stride, int64_t pad, int64_t in_w) {
  [[maybe_unused]] const Idx16 evens = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  const int64_t span = stride == 1 ? 18 : 34;  // floats one 16-wide step reads
  int64_t ow = ow_lo;
  for (; ow + 16 <= ow_hi && ow * stride - pad + span <= in_w; ow += 16) {
    Vec16 acc = {};
    acc += bias;
    for (int k = 0; k < 3; ++k) {
      if (!rows[k]) continue;
      const float* x = rows[k] + ow * stride - pad;
      for (int kw = 0; kw < 3; ++kw) {
        Vec16 v;
        std::memcpy(&v, x + kw, sizeof v);
        if (stride != 1) {
          Vec16 next;
          std::memcpy(&next, x + kw + 16, sizeof next);
#if defined(__clang__)
          v = __builtin_shufflevector(v, next, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
#else
          v = __builtin_shuffle(v, next, evens);
#endif
        }
        acc += w[k * 3 + kw] * v;
      }
    }
    std::memcpy(y + ow, &acc, sizeof acc);
  }
  for (; ow < ow_hi; ++ow) {
    float acc = bias;
    for (int k = 0; k < 3; ++k) {
      if (!rows[k]) continue;
      const float* x = rows[k] + ow * stride - pad;
      acc += w[k * 3] * x[0] + w[k * 3 + 1] * x[1] + w[k * 3 + 2] * x[2];
    }
    y[ow] = acc;
  }
}

void conv_depthwise_f32(const ConvProblem& p, const float* x, const float* w, const float* bias, float* y,
                        ThreadPool* pool) {
  const WindowGeometry& g = p.g;
  const bool one_d = g.rank() == 1;
  const int64_t in_h = one_d ? 1 : g.in[0], in_w = g.in[one_d ? 0 : 1];
  const int64_t out_h = one_d ? 1 : g.out[0], out_w = g.out[one_d ? 0 : 1];
  const int64_t k_h = one_d ? 1 : g.kernel[0], k_w = g.kernel[one_d ? 0 : 1];
  const int64_t s_h = one_d ? 1 : g.stride[0], s_w = g.stride[one_d ? 0 : 1];
  const int64_t d_h = one_d ? 1 : g.dilation[0], d_w = g.dilation[one_d ? 0 : 1];
  const int64_t p_h = one_d ? 0 : g.pad_begin[0], p_w = g.pad_begin[one_d ? 0 : 1];
  const int64_t mult = p.mg();  // output channels per input channel
  const bool fast3x3 = k_h == 3 && k_w == 3 && d_h == 1 && d_w == 1 && (s_w == 1 || s_w == 2);
  const int64_t planes = p.n * p.m;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, out_h * out_w * k_h * k_w));
  // Narrow rows (7x7, 14x14 maps) would be mostly edge columns: copy each
  // input row into a zero-padded buffer instead, so whole output rows run
  // as vector steps without bounds checks.
  const int64_t out_w16 = (out_w + 15) / 16 * 16;
  const bool narrow = fast3x3 && out_w < 48;
  const int64_t padded_w = out_w16 * s_w + 34;  // what the vector steps read
  parallel_for(pool, planes, grain, [&](int64_t b, int64_t e) {
    std::vector<float> padded, ytmp;
    if (narrow) {
      padded.assign(static_cast<size_t>(in_h * padded_w), 0.f);
      ytmp.resize(static_cast<size_t>(out_w16));
    }
    for (int64_t plane = b; plane < e; ++plane) {
      const int64_t img = plane / p.m, oc = plane % p.m, ic = oc / mult;
      if (narrow) {
        const float* xp = x + (img * p.c + ic) * in_h * in_w;
        for (int64_t ih = 0; ih < in_h; ++ih)
          std::copy_n(xp + ih * in_w, std::min(in_w, padded_w - p_w), padded.data() + ih * padded_w + p_w);
        const float* wp = w + oc * 9;
        float* yp = y + plane * out_h * out_w;
        for (int64_t oh = 0; oh < out_h; ++oh) {
          const float* rows[3];
          for (int64_t kh = 0; kh < 3; ++kh) {
            const int64_t ih = oh * s_h - p_h + kh;
            rows[kh] = ih >= 0 && ih < in_h ? padded.data() + ih * padded_w : nullptr;
          }
          // Column ow reads padded[ow * s .. ow * s + 2] (input column - pad).
          depthwise3x3_row(ytmp.data(), 0, out_w16, rows, wp, bias ? bias[oc] : 0.f, s_w, 0, padded_w);
          std::copy_n(ytmp.data(), out_w, yp + oh * out_w);
        }
        continue;
      }
      const float* xp = x + (img * p.c + ic) * in_h * in_w;
      const float* wp = w + oc * k_h * k_w;
      float* yp = y + plane * out_h * out_w;
      const float b0 = bias ? bias[oc] : 0.f;
      if (fast3x3) {
        for (int64_t oh = 0; oh < out_h; ++oh) {
          const float* rows[3];
          for (int64_t kh = 0; kh < 3; ++kh) {
            const int64_t ih = oh * s_h - p_h + kh;
            rows[kh] = ih >= 0 && ih < in_h ? xp + ih * in_w : nullptr;
          }
          float* yrow = yp + oh * out_w;
          // Interior columns: all three taps inside the row.
          const int64_t lo = std::min(out_w, (p_w + s_w - 1) / s_w);
          const int64_t hi = std::max(lo, std::min(out_w, in_w - 3 + p_w >= 0 ? (in_w - 3 + p_w) / s_w + 1 : 0));
          depthwise3x3_row(yrow, lo, hi, rows, wp, b0, s_w, p_w, in_w);
          for (int64_t ow = 0; ow < out_w; ++ow) {
            if (ow == lo) ow = hi;
            if (ow >= out_w) break;
            float acc = b0;
            for (int64_t kh = 0; kh < 3; ++kh) {
              if (!rows[kh]) continue;
              for (int64_t kw = 0; kw < 3; ++kw) {
                const int64_t iw = ow * s_w - p_w + kw;
                if (iw >= 0 && iw < in_w) acc += wp[kh * 3 + kw] * rows[kh][iw];
              }
            }
            yrow[ow] = acc;
          }
        }
        continue;
      }
      for (int64_t oh = 0; oh < out_h; ++oh) {
        float* yrow = yp + oh * out_w;
        std::fill_n(yrow, out_w, b0);
        for (int64_t kh = 0; kh < k_h; ++kh) {
          const int64_t ih = oh * s_h - p_h + kh * d_h;
          if (ih < 0 || ih >= in_h) continue;
          depthwise_row(yrow, out_w, xp + ih * in_w, in_w, wp + kh * k_w, k_w, s_w, d_w, p_w);
        }
      }
    }
  });
}

// What com.microsoft FusedConv (ONNX Runtime's contrib op, found in models
// ORT saved after optimization) adds after conv + bias: an optional sum
// input Z of Y's shape, then an activation. Relu and Clip are fused into the
// GEMM epilogue; the others run as a pass over Y.
struct ConvFusion {
  enum class Act { kNone, kClamp, kLeakyRelu, kSigmoid, kTanh, kHardSigmoid, kHardSwish, kSilu };
  const float* z = nullptr;
  Act act = Act::kNone;
  float p0 = 0.f, p1 = 0.f;  // clamp: lo, hi; LeakyRelu: alpha; HardSigmoid: alpha, beta
};

void apply_activation_block(float* y, int64_t n, const ConvFusion& f) {
  switch (f.act) {
    case ConvFusion::Act::kNone: break;
    case ConvFusion::Act::kClamp: simd::clip_f32(y, y, n, f.p0, f.p1); break;
    case ConvFusion::Act::kLeakyRelu: simd::leaky_relu_f32(y, y, n, f.p0); break;
    case ConvFusion::Act::kSigmoid: simd::sigmoid_f32(y, y, n); break;
    case ConvFusion::Act::kTanh: simd::tanh_f32(y, y, n); break;
    case ConvFusion::Act::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = std::min(1.f, std::max(0.f, f.p0 * y[i] + f.p1));
      break;
    case ConvFusion::Act::kHardSwish:  // as the HardSwish kernel computes it
      for (int64_t i = 0; i < n; ++i) y[i] *= std::min(1.f, std::max(0.f, y[i] * (1.f / 6.f) + 0.5f));
      break;
    case ConvFusion::Act::kSilu: {  // x * sigmoid(x), as the Sigmoid and Mul kernels compute it
      float s[256];
      for (int64_t i = 0; i < n; i += 256) {
        const int64_t len = std::min<int64_t>(256, n - i);
        simd::sigmoid_f32(y + i, s, len);
        for (int64_t k = 0; k < len; ++k) y[i + k] *= s[k];
      }
      break;
    }
  }
}

// The activation over all of Y (the paths that cannot apply it in the GEMM
// epilogue), vectorized and split over the pool.
void apply_activation(float* y, int64_t n, const ConvFusion& f, ThreadPool* pool) {
  if (f.act == ConvFusion::Act::kNone) return;
  parallel_for(pool, n, 16384, [&](int64_t b, int64_t e) { apply_activation_block(y + b, e - b, f); });
}

// Y = conv(X, W) + B for float32. `packed` holds W per group when W was
// constant at load (else null: W is read directly).
void conv_f32(const ConvProblem& p, const float* x, const float* w, const std::vector<PackedMatrix>* packed,
              const float* bias, float* y, ThreadPool* pool, const ConvFusion& fusion = {}) {
  const int64_t total = p.n * p.m * p.g.out_size();
  if (p.depthwise()) {
    conv_depthwise_f32(p, x, w, bias, y, pool);
    if (fusion.z)
      for (int64_t i = 0; i < total; ++i) y[i] += fusion.z[i];
    apply_activation(y, total, fusion, pool);
    return;
  }
  const bool clamp = fusion.act == ConvFusion::Act::kClamp;
  const int64_t mg = p.mg(), kg = p.kg(), cg = p.cg();
  const int64_t in_size = p.g.in_size(), out_size = p.g.out_size();
  const bool pointwise = p.pointwise();
  auto one = [&](int64_t img, int64_t grp, ThreadPool* tp) {
    const float* xg = x + (img * p.c + grp * cg) * in_size;
    float* yg = y + (img * p.m + grp * mg) * out_size;
    const GemmOperand a = packed ? GemmOperand::prepacked((*packed)[static_cast<size_t>(grp)])
                                 : GemmOperand::raw(w + grp * mg * kg, kg);
    GemmEpilogue ep;
    ep.row_bias = bias ? bias + grp * mg : nullptr;
    if (clamp) {
      ep.clamp_min = fusion.p0;
      ep.clamp_max = fusion.p1;
    }
    float beta = 0.f;
    if (fusion.z) {  // Y starts as Z and the GEMM accumulates onto it
      std::copy_n(fusion.z + (yg - y), mg * out_size, yg);
      beta = 1.f;
    }
    if (pointwise) {
      sgemm_ex(mg, out_size, kg, 1.f, a, GemmOperand::raw(xg, in_size), beta, yg, out_size, tp, ep);
    } else {
      const Im2colSource src(p.g, xg);
      sgemm_ex(mg, out_size, kg, 1.f, a, GemmOperand::from_source(src), beta, yg, out_size, tp, ep);
    }
  };
  const int64_t jobs = p.n * p.group;
  const double flops = 2.0 * static_cast<double>(mg) * static_cast<double>(out_size) * static_cast<double>(kg);
  if (jobs > 1 && flops < 8e6) {
    // Many small GEMMs (grouped convs, small images): one per task.
    parallel_for(pool, jobs, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) one(t / p.group, t % p.group, nullptr);
    });
  } else {
    for (int64_t t = 0; t < jobs; ++t) one(t / p.group, t % p.group, pool);
  }
  if (!clamp) apply_activation(y, total, fusion, pool);
}

class ConvKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(attrs_, WindowAttrs::parse(init));
    group_ = init.attr_int("group", 1);
    if (group_ < 1) return invalid_argument("attribute group is ", group_, ", expected >= 1");
    if (init.node.op_type == "FusedConv") KILN_RETURN_IF_ERROR(parse_fusion(init));
    const Tensor* w = init.constant_input(1);
    if (w && w->dtype() == DType::kFloat32 && w->rank() >= 3 && w->dim(0) % group_ == 0 && w->numel() > 0 &&
        !(w->dim(1) == 1 && group_ > 1)) {  // depthwise reads W directly
      const int64_t mg = w->dim(0) / group_, kg = w->numel() / w->dim(0);
      for (int64_t grp = 0; grp < group_; ++grp)
        packed_.push_back(PackedMatrix::pack_a(false, mg, kg, w->data<float>() + grp * mg * kg, kg));
      packed_shape_ = w->shape();
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const ir::Node& node = ctx.node();
    KILN_RETURN_IF_ERROR(check_conv_inputs(ctx));
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    ConvProblem p;
    p.n = x.dim(0);
    p.c = x.dim(1);
    p.m = w.dim(0);
    p.group = group_;
    if (w.dim(1) * group_ != p.c) {
      return invalid_argument("input 1 (W) has shape ", w.shape().to_string(), ", expected W[1] * group (",
                              group_, ") == C of input 0 (X) ", x.shape().to_string());
    }
    if (p.m % group_ != 0) {
      return invalid_argument("input 1 (W) has ", p.m, " output channels, not a multiple of group ",
                              group_);
    }
    if (b && (b->rank() != 1 || b->dim(0) != p.m)) {
      return invalid_argument("input 2 (B) has shape ", b->shape().to_string(), ", expected [", p.m, "]");
    }
    const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
    if (!attrs_.kernel_shape.empty() &&
        !std::equal(kernel.begin(), kernel.end(), attrs_.kernel_shape.begin(), attrs_.kernel_shape.end())) {
      return invalid_argument("attribute kernel_shape ", Shape(attrs_.kernel_shape).to_string(),
                              " does not match input 1 (W) ", w.shape().to_string());
    }
    KILN_ASSIGN_OR_RETURN(p.g, resolve_window(attrs_, x.shape().dims().subspan(2), kernel));
    Shape y_shape{p.n, p.m};
    for (int64_t d : p.g.out) y_shape.push_back(d);
    // FusedConv's input 3 (Z) is added before the activation.
    const Tensor* z = nullptr;
    if (ctx.has_input(3) && node.op_type == "FusedConv") {
      z = &ctx.input(3);
      if (z->shape() != y_shape || z->dtype() != x.dtype()) {
        return invalid_argument("input 3 (Z) is ", dtype_name(z->dtype()), z->shape().to_string(),
                                ", expected ", dtype_name(x.dtype()), y_shape.to_string(), " like the output");
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), y_shape));
    if (y->numel() == 0) return Status::ok();
    ConvFusion fusion = fusion_;
    switch (x.dtype()) {
      case DType::kFloat32: {
        const bool use_packed = !packed_.empty() && w.shape() == packed_shape_;
        fusion.z = z ? z->data<float>() : nullptr;
        conv_f32(p, x.data<float>(), w.data<float>(), use_packed ? &packed_ : nullptr, b ? b->data<float>() : nullptr,
                 y->data<float>(), ctx.pool(), fusion);
        return Status::ok();
      }
      case DType::kFloat16:
      case DType::kBFloat16:
      case DType::kFloat64: {
        const std::vector<float> xf = to_float_vector(x), wf = to_float_vector(w);
        const std::vector<float> bf = b ? to_float_vector(*b) : std::vector<float>();
        const std::vector<float> zf = z ? to_float_vector(*z) : std::vector<float>();
        std::vector<float> yf(static_cast<size_t>(y->numel()));
        fusion.z = z ? zf.data() : nullptr;
        conv_f32(p, xf.data(), wf.data(), nullptr, b ? bf.data() : nullptr, yf.data(), ctx.pool(), fusion);
        from_float_vector(yf.data(), y);
        return Status::ok();
      }
      default:
        return unsupported_dtype(0, x.dtype());
    }
  }

 private:
  // FusedConv's activation and activation_params.
  Status parse_fusion(const KernelInit& init) {
    const std::string act = init.attr_string("activation", "");
    const std::vector<float> params = init.attr_floats("activation_params");
    auto need = [&](size_t n) -> Status {
      if (params.size() < n)
        return invalid_argument("activation ", act, " needs ", n, " activation_params, got ",
                                params.size());
      return Status::ok();
    };
    using Act = ConvFusion::Act;
    if (act.empty() || act == "Identity") {
      fusion_.act = Act::kNone;
    } else if (act == "Relu") {
      fusion_ = {nullptr, Act::kClamp, 0.f, std::numeric_limits<float>::infinity()};
    } else if (act == "Clip") {
      KILN_RETURN_IF_ERROR(need(2));
      fusion_ = {nullptr, Act::kClamp, params[0], params[1]};
    } else if (act == "LeakyRelu") {
      fusion_ = {nullptr, Act::kLeakyRelu, params.empty() ? 0.01f : params[0], 0.f};
    } else if (act == "Sigmoid") {
      fusion_.act = Act::kSigmoid;
    } else if (act == "Tanh") {
      fusion_.act = Act::kTanh;
    } else if (act == "HardSigmoid") {
      fusion_ = {nullptr, Act::kHardSigmoid, params.size() > 0 ? params[0] : 0.2f, params.size() > 1 ? params[1] : 0.5f};
    } else if (act == "HardSwish") {
      fusion_.act = Act::kHardSwish;
    } else if (act == "Silu") {
      fusion_.act = Act::kSilu;
    } else {
      return invalid_argument("attribute activation is '", act,
                              "', expected Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish or Silu");
    }
    return Status::ok();
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  ConvFusion fusion_;
  std::vector<PackedMatrix> packed_;  // W per group, when W is a constant
  Shape packed_shape_;
};

}  // namespace

void register_conv_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Conv", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<ConvKernel>, .flags = 0});
  r.add({.domain = "com.microsoft", .op_type = "FusedConv", .since_version = 1, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<ConvKernel>, .flags = 0});
}

}  // namespace kiln::kernels
