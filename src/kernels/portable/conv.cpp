// Conv (opset 1 and 11): 1-D/2-D/3-D, groups, strides, dilations, pads,
// auto_pad. float32 has three paths:
//   - depthwise (one input channel per group, 1-D/2-D): conv_depthwise.h, a
//     direct kernel for any kernel size, stride and dilation;
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
#include <string>

#include "kernels/portable/conv_depthwise.h"
#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"
#include "kernels/portable/util/gemm_prepack.h"
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

DepthwiseConv depthwise_geometry(const ConvProblem& p) {
  const WindowGeometry& g = p.g;
  const size_t w = g.rank() - 1;  // the last spatial dim; 2-D adds the one before
  DepthwiseConv d;
  d.n = p.n;
  d.c = p.c;
  d.mult = p.mg();
  d.in_w = g.in[w];
  d.out_w = g.out[w];
  d.k_w = g.kernel[w];
  d.s_w = g.stride[w];
  d.d_w = g.dilation[w];
  d.p_w = g.pad_begin[w];
  if (g.rank() == 2) {
    d.in_h = g.in[0];
    d.out_h = g.out[0];
    d.k_h = g.kernel[0];
    d.s_h = g.stride[0];
    d.d_h = g.dilation[0];
    d.p_h = g.pad_begin[0];
  }
  return d;
}

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
    case ConvFusion::Act::kHardSigmoid: simd::hard_sigmoid_f32(y, y, n, f.p0, f.p1); break;  // as the kernels compute them
    case ConvFusion::Act::kHardSwish: simd::hard_swish_f32(y, y, n); break;
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
    depthwise_conv_f32(depthwise_geometry(p), x, w, bias, y, pool);
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
        packed_.push_back(pack_a_for(init, "W" + std::to_string(grp), false, mg, kg, w->data<float>() + grp * mg * kg, kg));
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
