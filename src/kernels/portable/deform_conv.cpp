// DeformConv-19 (2-D): convolution whose kernel taps are moved by learned
// offsets (bilinear sampling, zero outside the image) and optionally scaled
// by a mask, per offset group of input channels; as torchvision's
// deform_conv2d. Computed in float32.
#include <cmath>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

float bilinear(const float* img, int64_t h, int64_t w, float y, float x) {
  if (y <= -1.f || y >= static_cast<float>(h) || x <= -1.f || x >= static_cast<float>(w)) return 0.f;
  const auto y0 = static_cast<int64_t>(std::floor(y)), x0 = static_cast<int64_t>(std::floor(x));
  const float ly = y - static_cast<float>(y0), lx = x - static_cast<float>(x0);
  auto at = [&](int64_t yy, int64_t xx) { return yy >= 0 && yy < h && xx >= 0 && xx < w ? img[yy * w + xx] : 0.f; };
  return (1 - ly) * (1 - lx) * at(y0, x0) + (1 - ly) * lx * at(y0, x0 + 1) + ly * (1 - lx) * at(y0 + 1, x0) +
         ly * lx * at(y0 + 1, x0 + 1);
}

class DeformConvKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    dil_ = init.attr_ints("dilations");
    pads_ = init.attr_ints("pads");
    strides_ = init.attr_ints("strides");
    group_ = init.attr_int("group", 1);
    offset_group_ = init.attr_int("offset_group", 1);
    if (dil_.empty()) dil_ = {1, 1};
    if (pads_.empty()) pads_ = {0, 0, 0, 0};
    if (strides_.empty()) strides_ = {1, 1};
    if (dil_.size() != 2 || pads_.size() != 4 || strides_.size() != 2 || group_ <= 0 || offset_group_ <= 0)
      return unimplemented("only 2-D DeformConv with positive group counts is implemented");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor& off = ctx.input(2);
    if (x.rank() != 4 || w.rank() != 4 || off.rank() != 4)
      return invalid_argument("X, W and offset must be 4-D");
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
    const int64_t oc = w.dim(0), cg = w.dim(1), kh = w.dim(2), kw = w.dim(3);
    const int64_t oh = (h + pads_[0] + pads_[2] - dil_[0] * (kh - 1) - 1) / strides_[0] + 1;
    const int64_t ow = (wd + pads_[1] + pads_[3] - dil_[1] * (kw - 1) - 1) / strides_[1] + 1;
    if (cg * group_ != c || oc % group_ || c % offset_group_ || oh <= 0 || ow <= 0 ||
        off.dim(0) != n || off.dim(1) != offset_group_ * 2 * kh * kw || off.dim(2) != oh || off.dim(3) != ow)
      return invalid_argument("X ", x.shape().to_string(), ", W ", w.shape().to_string(),
                              " and offset ", off.shape().to_string(), " do not fit");
    std::vector<float> mask, bias(static_cast<size_t>(oc), 0.f);
    if (ctx.has_input(3)) bias = to_float_vector(ctx.input(3));
    if (ctx.has_input(4)) {
      mask = to_float_vector(ctx.input(4));
      if (static_cast<int64_t>(mask.size()) != n * offset_group_ * kh * kw * oh * ow)
        return invalid_argument("mask has shape ", ctx.input(4).shape().to_string());
    }
    if (static_cast<int64_t>(bias.size()) != oc) return invalid_argument("B must have ", oc, " values");
    const std::vector<float> xv = to_float_vector(x), wv = to_float_vector(w), ov = to_float_vector(off);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), Shape{n, oc, oh, ow}));
    std::vector<float> out(static_cast<size_t>(n * oc * oh * ow));
    // Sampled columns for one image: [c * kh * kw, oh * ow].
    std::vector<float> col(static_cast<size_t>(c * kh * kw * oh * ow));
    const int64_t per_og = c / offset_group_, ocg = oc / group_, taps = kh * kw, pix = oh * ow;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const int64_t g = ch / per_og;
        const float* img = xv.data() + (b * c + ch) * h * wd;
        for (int64_t k = 0; k < taps; ++k) {
          const float* oy = ov.data() + ((b * offset_group_ + g) * 2 * taps + 2 * k) * pix;
          const float* ox = oy + pix;
          const float* m = mask.empty() ? nullptr : mask.data() + ((b * offset_group_ + g) * taps + k) * pix;
          for (int64_t p = 0; p < pix; ++p) {
            const int64_t i = p / ow, j = p % ow;
            const float sy = static_cast<float>(i * strides_[0] - pads_[0] + (k / kw) * dil_[0]) + oy[p];
            const float sx = static_cast<float>(j * strides_[1] - pads_[1] + (k % kw) * dil_[1]) + ox[p];
            const float v = bilinear(img, h, wd, sy, sx);
            col[static_cast<size_t>((ch * taps + k) * pix + p)] = m ? v * m[p] : v;
          }
        }
      }
      for (int64_t o = 0; o < oc; ++o) {
        const int64_t g = o / ocg;
        float* dst = out.data() + (b * oc + o) * pix;
        for (int64_t p = 0; p < pix; ++p) dst[p] = bias[static_cast<size_t>(o)];
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t k = 0; k < taps; ++k) {
            const float wt = wv[static_cast<size_t>((o * cg + ci) * taps + k)];
            const float* src = col.data() + (((g * cg + ci) * taps + k) * pix);
            for (int64_t p = 0; p < pix; ++p) dst[p] += wt * src[p];
          }
      }
    }
    from_float_vector(out.data(), y);
    return Status::ok();
  }

 private:
  std::vector<int64_t> dil_, pads_, strides_;
  int64_t group_ = 1, offset_group_ = 1;
};

}  // namespace

void register_deform_conv_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "DeformConv", .since_version = 19, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<DeformConvKernel>, .flags = 0});
}

}  // namespace kiln::kernels
