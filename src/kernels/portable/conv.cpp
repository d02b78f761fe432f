// Conv (opset 1 and 11): 1-D/2-D/3-D, groups, strides, dilations, pads,
// auto_pad. float32 has three paths:
//   - depthwise (one input channel per group, 1-D/2-D): conv_depthwise.h, a
//     direct kernel for any kernel size, stride and dilation;
//   - pointwise (1x1 kernel, stride 1, no padding): Y = W x X, a GEMM straight
//     on the NCHW input, no copy; on small maps whose size is a poor fit for
//     the vector width (7x7 = 49 positions fill 64 lanes) and known at load,
//     Y^T = X^T W^T instead (the vectors then run along the output channels)
//     into a scratch, each block transposed into Y as soon as it is final;
//   - everything else: GEMM with an implicit im2col that writes the packed B
//     panels directly (gemm.h BPanelSource), so the column matrix is never
//     materialized and its scratch stays one cache block; stride-1 convs on
//     small maps or with few channels per group read the zero-bordered
//     input as rows instead (conv_padded_rows.h: whole-run copies).
// Constant-weight 3x3 stride-1 group-1 convolutions with enough channels on
// maps large enough to gain take Winograd F(4x4, 3x3) instead
// (conv_winograd.h; KILN_WINOGRAD=off|always|auto). Constant-weight
// convolutions whose taps mostly read padding (dilated segmentation heads)
// run one GEMM per tap over the outputs it reaches (conv_sparse_taps.h).
// Constant-weight group-1 convs with at most 64 output channels and few taps
// per output (stems, early downsampling) run a direct kernel
// (conv_direct_small.h).
// Constant weights are packed for the GEMM once, at load; the bias is a
// fused per-row epilogue. float16/bfloat16/double are staged through float32.
// The same kernel runs com.microsoft FusedConv (Conv + optional sum input Z +
// activation), the form ONNX Runtime saves optimized models in and the one
// Kiln's optimizer (src/optimizer) fuses Conv + activation into; Kiln adds
// the activations HardSwish and Silu (x * Sigmoid(x)) to ORT's list. It also
// runs kiln::PreActivationConv, BatchNormalization + Relu + Conv
// (conv_preact.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/portable/conv_depthwise.h"
#include "kernels/portable/conv_direct_small.h"
#include "kernels/portable/conv_padded_rows.h"
#include "kernels/portable/conv_preact.h"
#include "kernels/portable/conv_sparse_taps.h"
#include "kernels/portable/conv_winograd.h"
#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"
#include "kernels/portable/util/gemm_prepack.h"
#include "kernels/portable/util/pointwise.h"
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

// im2col_panels<float> compiled for the CPU's vector width (flatten inlines
// it into each variant): its copies and stride-2 gathers are most of a stem
// conv's time besides the GEMM.
void im2col_panels_f32_body(const WindowGeometry& g, const float* x, int64_t p0, int64_t kc,
                                            int64_t j0, int64_t nc, int64_t nr, float* out) {
  im2col_panels<float>(g, x, p0, kc, j0, nc, nr, 0.f, out);
}
KILN_ISA_DISPATCH_FLATTEN(im2col_panels_f32, im2col_panels_f32_body);

// The im2col matrix of one image and group, produced panel by panel.
class Im2colSource final : public BPanelSource {
 public:
  Im2colSource(const WindowGeometry& g, const float* x) : g_(g), x_(x) {}
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const override {
    im2col_panels_f32(g_, x_, p0, kc, j0, nc, nr, out);
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
  // kiln::PreActivationConv on the pointwise GEMM path: X's rows go through
  // max(0, pre_a[c] * x + pre_b[c]) as B is packed (conv_preact.h).
  const float* pre_a = nullptr;
  const float* pre_b = nullptr;
};

void apply_activation_block(float* y, int64_t n, const ConvFusion& f) {
  switch (f.act) {
    case ConvFusion::Act::kNone: break;
    case ConvFusion::Act::kClamp: simd::clip_f32(y, y, n, f.p0, f.p1); break;
    case ConvFusion::Act::kLeakyRelu: simd::leaky_relu_f32(y, y, n, f.p0); break;
    case ConvFusion::Act::kSigmoid: simd::sigmoid_f32(y, y, n); break;
    case ConvFusion::Act::kTanh: simd::tanh_f32(y, y, n); break;
    case ConvFusion::Act::kHardSigmoid: simd::hard_sigmoid_f32(y, y, n, f.p0, f.p1); break;  // as the kernel computes it
    case ConvFusion::Act::kHardSwish: simd::hard_swish_f32(y, y, n); break;
    case ConvFusion::Act::kSilu: simd::silu_f32(y, y, n); break;
  }
}

// The GEMM epilogue's view of the activation: the clamp in the microkernel's
// store, any other activation on each block of C while it is in cache.
GemmEpilogue activation_epilogue(const ConvFusion& f) {
  GemmEpilogue ep;
  if (f.act == ConvFusion::Act::kClamp) {
    ep.clamp_min = f.p0;
    ep.clamp_max = f.p1;
  } else if (f.act != ConvFusion::Act::kNone) {
    ep.apply = [](const void* ctx, float* c, int64_t ldc, int64_t rows, int64_t cols) {
      const ConvFusion& fusion = *static_cast<const ConvFusion*>(ctx);
      if (cols == ldc) {
        apply_activation_block(c, rows * cols, fusion);
        return;
      }
      for (int64_t r = 0; r < rows; ++r) apply_activation_block(c + r * ldc, cols, fusion);
    };
    ep.apply_ctx = &f;
  }
  return ep;
}

// The activation over all of Y (the depthwise path, which has no GEMM
// epilogue), vectorized and split over the pool.
void apply_activation(float* y, int64_t n, const ConvFusion& f, ThreadPool* pool) {
  if (f.act == ConvFusion::Act::kNone) return;
  parallel_for(pool, n, 16384, [&](int64_t b, int64_t e) { apply_activation_block(y + b, e - b, f); });
}

// A pointwise conv of one image as Y^T = X^T W^T (prefer_transposed_pointwise):
// `wt` is W^T packed as the GEMM's B; the bias is a per-column epilogue. Each
// block of Y^T goes into Y as the GEMM finishes it (TransposedStore), with
// the activation before; FusedConv's sum input `z` (the image's planes; may
// be null) is added after the transpose, then the activation.
void pointwise_transposed(const ConvProblem& p, const float* xg, const PackedMatrix& wt, const float* bias,
                          const ConvFusion& fusion, const float* z, float* yg, ThreadPool* pool) {
  const int64_t n = p.g.out_size(), m = p.m, k = p.c;
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(n * m)) scratch.resize(static_cast<size_t>(n * m));
  struct SumThenAct {
    const float* z;
    int64_t n;
    const ConvFusion* fusion;
  } sum{z, n, &fusion};
  TransposedStore store{scratch.data(), m, yg, n};
  GemmEpilogue ep;
  if (z) {  // Z and the activation (a clamp too) on each channel's run of Y
    store.after = [](const void* ctx, float* run, int64_t ch, int64_t pos0, int64_t len) {
      const SumThenAct& s = *static_cast<const SumThenAct*>(ctx);
      const float* zr = s.z + ch * s.n + pos0;
      for (int64_t i = 0; i < len; ++i) run[i] += zr[i];
      apply_activation_block(run, len, *s.fusion);
    };
    store.after_ctx = &sum;
    ep = store.epilogue();
  } else {
    const GemmEpilogue act = activation_epilogue(fusion);
    store.before = act.apply;
    store.before_ctx = act.apply_ctx;
    ep = store.epilogue();
    ep.clamp_min = act.clamp_min;
    ep.clamp_max = act.clamp_max;
  }
  ep.col_bias = bias;
  sgemm_ex(n, m, k, 1.f, GemmOperand::raw(xg, n, true), GemmOperand::prepacked(wt), 0.f, scratch.data(), m, pool, ep);
}

// Y = conv(X, W) + B for float32. `packed` holds W per group when W was
// constant at load (else null: W is read directly); `packed_t`, when not
// null, W^T for the transposed pointwise path.
void conv_f32(const ConvProblem& p, const float* x, const float* w, const std::vector<PackedMatrix>* packed,
              const float* bias, float* y, ThreadPool* pool, const ConvFusion& fusion = {},
              const PackedMatrix* packed_t = nullptr) {
  const int64_t total = p.n * p.m * p.g.out_size();
  if (packed_t && p.group == 1 && p.pointwise()) {
    const int64_t y_image = p.m * p.g.out_size();
    for (int64_t img = 0; img < p.n; ++img)
      pointwise_transposed(p, x + img * p.c * p.g.in_size(), *packed_t, bias, fusion,
                           fusion.z ? fusion.z + img * y_image : nullptr, y + img * y_image, pool);
    return;
  }
  if (p.depthwise()) {
    if (fusion.z) {  // Z is added before the activation: two passes
      depthwise_conv_f32(depthwise_geometry(p), x, w, bias, y, pool);
      for (int64_t i = 0; i < total; ++i) y[i] += fusion.z[i];
      apply_activation(y, total, fusion, pool);
      return;
    }
    // The activation on each output plane while it is in cache.
    DepthwiseEpilogue ep;
    if (fusion.act == ConvFusion::Act::kClamp) {
      ep.lo = fusion.p0;
      ep.hi = fusion.p1;
    } else if (fusion.act != ConvFusion::Act::kNone) {
      ep.apply = [](const void* f, float* v, int64_t n) { apply_activation_block(v, n, *static_cast<const ConvFusion*>(f)); };
      ep.ctx = &fusion;
    }
    depthwise_conv_f32(depthwise_geometry(p), x, w, bias, y, pool, ep);
    return;
  }
  const int64_t mg = p.mg(), kg = p.kg(), cg = p.cg();
  const int64_t in_size = p.g.in_size(), out_size = p.g.out_size();
  const bool pointwise = p.pointwise();
  const bool padded_rows = !pointwise && padded_rows_gain(p.g, cg);
  auto one = [&](int64_t img, int64_t grp, ThreadPool* tp) {
    const float* xg = x + (img * p.c + grp * cg) * in_size;
    float* yg = y + (img * p.m + grp * mg) * out_size;
    const GemmOperand a = packed ? GemmOperand::prepacked((*packed)[static_cast<size_t>(grp)])
                                 : GemmOperand::raw(w + grp * mg * kg, kg);
    GemmEpilogue ep = activation_epilogue(fusion);
    ep.row_bias = bias ? bias + grp * mg : nullptr;
    float beta = 0.f;
    if (fusion.z && !padded_rows) {  // Y starts as Z and the GEMM accumulates onto it
      std::copy_n(fusion.z + (yg - y), mg * out_size, yg);
      beta = 1.f;
    }
    if (pointwise && fusion.pre_a) {
      const PreActSource src(xg, in_size, fusion.pre_a + grp * cg, fusion.pre_b + grp * cg);
      sgemm_ex(mg, out_size, kg, 1.f, a, GemmOperand::from_source(src), beta, yg, out_size, tp, ep);
    } else if (pointwise) {
      sgemm_ex(mg, out_size, kg, 1.f, a, GemmOperand::raw(xg, in_size), beta, yg, out_size, tp, ep);
    } else if (padded_rows) {
      conv_padded_rows(p.g, cg, mg, xg, a, ep, fusion.z ? fusion.z + (yg - y) : nullptr, yg, tp);
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
}

// Conv's bias and fusion as the epilogue of the Winograd and sparse-tap paths.
ConvEpilogue conv_epilogue(const float* bias, const ConvFusion& fusion) {
  ConvEpilogue ep;
  ep.bias = bias;
  ep.z = fusion.z;
  if (fusion.act == ConvFusion::Act::kClamp) {
    ep.lo = fusion.p0;
    ep.hi = fusion.p1;
  } else if (fusion.act != ConvFusion::Act::kNone) {
    ep.act = [](float* v, int64_t n, const void* f) { apply_activation_block(v, n, *static_cast<const ConvFusion*>(f)); };
    ep.act_ctx = &fusion;
  }
  return ep;
}

class ConvKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(attrs_, WindowAttrs::parse(init));
    group_ = init.attr_int("group", 1);
    if (group_ < 1) return invalid_argument("attribute group is ", group_, ", expected >= 1");
    if (init.node.op_type == "FusedConv" || init.node.op_type == "PreActivationConv")
      KILN_RETURN_IF_ERROR(parse_fusion(init));
    if (init.node.op_type == "PreActivationConv") {
      const Tensor* w = init.constant_input(1);
      if (!w || w->rank() < 3) return invalid_argument("input 1 (W) must be a constant of rank >= 3");
      KILN_RETURN_IF_ERROR(preact_params(init, w->dim(1) * group_, &pre_a_, &pre_b_));
    }
    const Tensor* w = init.constant_input(1);
    if (w && w->dtype() == DType::kFloat32 && w->rank() >= 3 && group_ == 1 && w->numel() > 0 &&
        prefer_transposed_pointwise(w->dim(0), static_pointwise_size(init, *w))) {
      packed_t_ = pack_b_for(init, "WT", true, w->dim(1), w->dim(0), w->data<float>(), w->dim(1));
      packed_shape_ = w->shape();
    } else if (w && w->dtype() == DType::kFloat32 && w->rank() >= 3 && w->dim(0) % group_ == 0 && w->numel() > 0 &&
               !(w->dim(1) == 1 && group_ > 1)) {  // depthwise reads W directly
      sparse_.prepare(init, *w, group_, attrs_);
      if (sparse_.covers_static_input()) return Status::ok();  // W is packed per tap instead
      wino_.prepare(init, *w, group_, attrs_);
      if (wino_.covers_static_input(init)) return Status::ok();  // W is never read by im2col
      direct_.prepare(*w, group_);  // few output channels: a direct kernel (conv_direct_small.h)
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
        const bool use_packed_t = !packed_t_.empty() && w.shape() == packed_shape_;
        fusion.z = z ? z->data<float>() : nullptr;
        const float* xd = x.data<float>();
        std::vector<float> pre;  // PreActivationConv off the pointwise GEMM path: transformed X
        if (!pre_a_.empty()) {
          if (static_cast<int64_t>(pre_a_.size()) != p.c)
            return invalid_argument("input 0 (X) has ", p.c, " channels, the normalization ", pre_a_.size());
          if (p.pointwise() && !use_packed_t && !p.depthwise()) {
            fusion.pre_a = pre_a_.data();
            fusion.pre_b = pre_b_.data();
          } else {
            pre.resize(static_cast<size_t>(x.numel()));
            preact_relu(xd, p.n, p.c, p.g.in_size(), pre_a_.data(), pre_b_.data(), pre.data(), ctx.pool());
            xd = pre.data();
          }
        }
        const float* bias = b ? b->data<float>() : nullptr;
        if (sparse_.applies(p.g, w.shape())) {
          sparse_.run(p.n, p.g, xd, y->data<float>(), conv_epilogue(bias, fusion), ctx.pool());
          return Status::ok();
        }
        if (wino_.applies(p.g, p.n, w.shape())) {
          wino_.run(p.n, p.g, xd, y->data<float>(), conv_epilogue(bias, fusion), ctx.pool());
          return Status::ok();
        }
        if (direct_.applies(p.g, w.shape())) {
          direct_.run(p.n, p.g, xd, y->data<float>(), conv_epilogue(bias, fusion), ctx.pool());
          return Status::ok();
        }
        conv_f32(p, xd, w.data<float>(), use_packed ? &packed_ : nullptr, b ? b->data<float>() : nullptr,
                 y->data<float>(), ctx.pool(), fusion, use_packed_t ? &packed_t_ : nullptr);
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

  // The output positions of a pointwise (1x1, stride 1, unpadded) conv whose
  // input's spatial dims are known at load; 0 otherwise.
  int64_t static_pointwise_size(const KernelInit& init, const Tensor& w) const {
    const ir::ValueType* xt = init.inputs.empty() ? nullptr : init.inputs[0].type;
    if (!xt || !xt->has_shape || xt->dims.size() != w.shape().rank()) return 0;
    for (size_t d = 2; d < w.shape().rank(); ++d)
      if (w.dim(d) != 1) return 0;
    for (int64_t s : attrs_.strides)
      if (s != 1) return 0;
    for (int64_t pad : attrs_.pads)
      if (pad != 0) return 0;
    int64_t n = 1;
    for (size_t d = 2; d < xt->dims.size(); ++d) {
      if (!xt->dims[d].known()) return 0;
      n *= xt->dims[d].value;
    }
    return n;
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  ConvFusion fusion_;
  std::vector<PackedMatrix> packed_;  // W per group, when W is a constant
  WinogradConv wino_;                  // W transformed, when the Winograd path may run
  SparseTapConv sparse_;               // W per tap, when most taps read only padding
  DirectSmallConv direct_;             // W for the direct kernel, when Cout is small
  std::vector<float> pre_a_, pre_b_;   // PreActivationConv's input transform (empty: none)
  PackedMatrix packed_t_;              // W^T, for the transposed pointwise path
  Shape packed_shape_;
};

}  // namespace

void register_conv_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Conv", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<ConvKernel>, .flags = 0});
  r.add({.domain = "com.microsoft", .op_type = "FusedConv", .since_version = 1, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<ConvKernel>, .flags = 0});
  r.add({.domain = "kiln", .op_type = "PreActivationConv", .since_version = 1, .until_version = 1000,
         .dtypes = dtype_set(DType::kFloat32), .type_input = 0, .factory = make_kernel<ConvKernel>, .flags = 0});
}

}  // namespace kiln::kernels
