// kiln ChannelScaledConv(X, W, B, S): Conv(X * S, W, B) for a 1x1, stride-1,
// unpadded, group-1 convolution and a per-channel (and per-image) scale S,
// which the optimizer fuses from a squeeze-and-excitation block's final Mul
// and the projection Conv that reads it (optimizer/channel_scale_fusion.h).
//
// Y[img] = W (diag(S[img]) X[img]) + B, as one GEMM per image with X read
// through a panel source that scales each channel (a row of the GEMM's B)
// while it packs it: the scaled tensor never exists, and the scale costs
// nothing beyond the packing the GEMM does anyway. W, when constant, is
// packed once at load. Small maps known at load that run better as
// Y^T = X^T W^T (util/pointwise.h, as Conv decides) put X on the GEMM's A
// side, which has no panel source: there the scaled X goes to a scratch
// (split over the pool by channel) and W^T is packed at load. float32 only
// (the optimizer fuses float32 only).
//
// Inputs: X [N, C, H, W] (any spatial rank >= 1), W [M, C, 1...], B [M] or
// absent, S [C, 1...] or [N' in {1, N}, C, 1...]. Output: [N, M, spatial...].
#include <algorithm>
#include <string>

#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"
#include "kernels/portable/util/gemm_prepack.h"
#include "kernels/portable/util/pointwise.h"
#include "kernels/portable/util/scratch.h"
#include "kernels/registry.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

// out[(j / nr) * kc * nr + p * nr + j % nr] = x[(p0 + p) * ld + j0 + j] *
// s[p0 + p], columns past nc of the last group zero (BPanelSource::pack).
KILN_ISA_BODY
void pack_scaled_rows_body(const float* x, int64_t ld, const float* s, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                      int64_t nr, float* out) {
  for (int64_t jg = 0; jg < nc; jg += nr) {
    const int64_t w = std::min(nr, nc - jg);
    float* o = out + (jg / nr) * kc * nr;
    for (int64_t p = 0; p < kc; ++p) {
      const float* xr = x + (p0 + p) * ld + j0 + jg;
      const float sc = s[p0 + p];
      float* op = o + p * nr;
      for (int64_t j = 0; j < w; ++j) op[j] = xr[j] * sc;
      for (int64_t j = w; j < nr; ++j) op[j] = 0.f;
    }
  }
}
KILN_ISA_DISPATCH(pack_scaled_rows, pack_scaled_rows_body);

KILN_ISA_BODY
void scale_row_body(const float* x, float scale, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
}
KILN_ISA_DISPATCH(scale_row, scale_row_body);

// One image's X (C rows of `hw` floats) scaled by channel, as the GEMM's B.
class ScaledRows final : public BPanelSource {
 public:
  ScaledRows(const float* x, int64_t hw, const float* scale) : x_(x), hw_(hw), scale_(scale) {}
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const override {
    pack_scaled_rows(x_, hw_, scale_, p0, kc, j0, nc, nr, out);
  }

 private:
  const float* x_;
  int64_t hw_;
  const float* scale_;
};

class ChannelScaledConvKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const Tensor* w = init.constant_input(1);
    if (!w || w->dtype() != DType::kFloat32 || w->rank() < 3 || w->numel() == 0 || w->numel() != w->dim(0) * w->dim(1))
      return Status::ok();  // W is read as it comes
    packed_shape_ = w->shape();
    const int64_t m = w->dim(0), c = w->dim(1), n = static_positions(init);
    if (prefer_transposed_pointwise(m, n)) {
      packed_t_ = pack_b_for(init, "WT", true, c, m, w->data<float>(), c);
      transposed_n_ = n;
    } else {
      packed_ = pack_a_for(init, "W", false, m, c, w->data<float>(), c);
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i : {size_t{0}, size_t{1}, size_t{3}})
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor& s = ctx.input(3);
    const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    for (const Tensor* t : {&x, &w, &s, b})
      if (t && t->dtype() != DType::kFloat32) return unsupported_dtype(t == &x ? 0 : t == &w ? 1 : t == &s ? 3 : 2, t->dtype());
    if (x.rank() < 3) return invalid_argument("input 0 (X) has shape ", x.shape().to_string(), ", expected [N, C, D...]");
    const int64_t n = x.dim(0), c = x.dim(1), hw = x.numel() / std::max<int64_t>(1, n * c);
    if (w.rank() != x.rank() || w.dim(1) != c || w.numel() != w.dim(0) * c) {
      return invalid_argument("input 1 (W) has shape ", w.shape().to_string(), ", expected [M, ", c,
                              ", 1...] (a 1x1 kernel over X ", x.shape().to_string(), ")");
    }
    const int64_t m = w.dim(0);
    if (b && (b->rank() != 1 || b->dim(0) != m))
      return invalid_argument("input 2 (B) has shape ", b->shape().to_string(), ", expected [", m, "]");
    // S: one factor per channel ([C, 1...]), or per image and channel.
    const bool per_image = s.rank() == x.rank() && s.dim(0) == n && n > 1;
    const int64_t s_rank_off = s.rank() == x.rank() ? 1 : 0;
    if ((s.rank() != x.rank() && s.rank() + 1 != x.rank()) || (s_rank_off && s.dim(0) != 1 && s.dim(0) != n) ||
        s.dim(static_cast<size_t>(s_rank_off)) != c || s.numel() != (per_image ? n * c : c)) {
      return invalid_argument("input 3 (S) has shape ", s.shape().to_string(), ", expected [", c, ", 1...] or [", n,
                              ", ", c, ", 1...] (one factor per channel of X ", x.shape().to_string(), ")");
    }
    Shape y_shape{n, m};
    for (size_t d = 2; d < x.rank(); ++d) y_shape.push_back(x.dim(d));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, y_shape));
    if (y->numel() == 0) return Status::ok();
    const float* xd = x.data<float>();
    const float* sd = s.data<float>();
    float* yd = y->data<float>();
    const float* bias = b ? b->data<float>() : nullptr;
    if (!packed_t_.empty() && w.shape() == packed_shape_ && hw == transposed_n_) {
      for (int64_t img = 0; img < n; ++img)
        run_transposed(xd + img * c * hw, sd + (per_image ? img * c : 0), c, hw, m, bias, yd + img * m * hw, ctx.pool());
      return Status::ok();
    }
    const GemmOperand a = !packed_.empty() && w.shape() == packed_shape_ ? GemmOperand::prepacked(packed_)
                                                                         : GemmOperand::raw(w.data<float>(), c);
    GemmEpilogue ep;
    ep.row_bias = bias;
    for (int64_t img = 0; img < n; ++img) {
      const ScaledRows src(xd + img * c * hw, hw, sd + (per_image ? img * c : 0));
      sgemm_ex(m, hw, c, 1.f, a, GemmOperand::from_source(src), 0.f, yd + img * m * hw, hw, ctx.pool(), ep);
    }
    return Status::ok();
  }

 private:
  // One image as Y^T = (X^T diag(s)) W^T: the scaled X in a scratch, the
  // GEMM into another, each block transposed into Y as it is final.
  void run_transposed(const float* x, const float* scale, int64_t c, int64_t hw, int64_t m, const float* bias,
                      float* y, ThreadPool* pool) const {
    thread_local Scratch xs_buf, yt_buf;
    float* xs = xs_buf.get(c * hw);
    float* yt = yt_buf.get(hw * m);
    parallel_for(pool, c, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, hw)), [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) scale_row(x + ch * hw, scale[ch], hw, xs + ch * hw);
    });
    const TransposedStore store{yt, m, y, hw};  // Y^T's blocks into Y as they are final
    GemmEpilogue ep = store.epilogue();
    ep.col_bias = bias;
    sgemm_ex(hw, m, c, 1.f, GemmOperand::raw(xs, hw, true), GemmOperand::prepacked(packed_t_), 0.f, yt, m, pool, ep);
  }

  // Output positions per image when X's spatial dims are known at load; 0 otherwise.
  static int64_t static_positions(const KernelInit& init) {
    const ir::ValueType* xt = init.inputs.empty() ? nullptr : init.inputs[0].type;
    if (!xt || !xt->has_shape || xt->dims.size() < 3) return 0;
    int64_t n = 1;
    for (size_t d = 2; d < xt->dims.size(); ++d) {
      if (!xt->dims[d].known()) return 0;
      n *= xt->dims[d].value;
    }
    return n;
  }

  PackedMatrix packed_;    // W as the GEMM's A, when W is a constant
  PackedMatrix packed_t_;  // W^T as the GEMM's B, for the transposed path
  int64_t transposed_n_ = -1;  // the positions per image the transposed path is for
  Shape packed_shape_;
};

}  // namespace

void register_conv_channel_scaled_ops(KernelRegistry& r) {
  r.add({.domain = "kiln", .op_type = "ChannelScaledConv", .since_version = 1, .until_version = 1000,
         .dtypes = dtype_set(DType::kFloat32), .type_input = 0, .factory = make_kernel<ChannelScaledConvKernel>,
         .flags = 0});
}

}  // namespace kiln::kernels
