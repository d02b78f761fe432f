// RoiAlign (opset 10 and 16): bilinear-interpolated average (or max) pooling
// of regions of interest, following the ONNX reference and ONNX Runtime:
// each output bin averages sampling_ratio^2 (or ceil(roi size / bins))
// bilinear samples; coordinate_transformation_mode "half_pixel" (default
// from opset 16) shifts by -0.5 pixel, "output_half_pixel" (opset 10
// behaviour) does not and clamps the roi size to >= 1. In max mode each
// sample contributes the largest of its four weighted corners, as in the
// reference implementation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  float w[4] = {0, 0, 0, 0};
};

class RoiAlignKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const std::string mode = init.attr_string("mode", "avg");
    if (mode != "avg" && mode != "max")
      return invalid_argument("attribute mode is '", mode, "', expected avg or max");
    max_mode_ = mode == "max";
    out_h_ = init.attr_int("output_height", 1);
    out_w_ = init.attr_int("output_width", 1);
    sampling_ratio_ = init.attr_int("sampling_ratio", 0);
    spatial_scale_ = init.attr_float("spatial_scale", 1.f);
    const std::string ctm =
        init.attr_string("coordinate_transformation_mode", init.opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      return invalid_argument("attribute coordinate_transformation_mode is '", ctm,
                              "', expected half_pixel or output_half_pixel");
    half_pixel_ = ctm == "half_pixel";
    if (out_h_ < 1 || out_w_ < 1 || sampling_ratio_ < 0)
      return invalid_argument("output_height/output_width must be >= 1 and sampling_ratio >= 0");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
    const Tensor& x = ctx.input(0);
    const Tensor& rois = ctx.input(1);
    const Tensor& batch = ctx.input(2);
    if (x.rank() != 4) return invalid_argument("input 0 (X) has shape ", x.shape().to_string(), ", expected [N, C, H, W]");
    if (rois.rank() != 2 || rois.dim(1) != 4)
      return invalid_argument("input 1 (rois) has shape ", rois.shape().to_string(), ", expected [num_rois, 4]");
    if (batch.rank() != 1 || batch.dim(0) != rois.dim(0))
      return invalid_argument("input 2 (batch_indices) has shape ", batch.shape().to_string(),
                              ", expected [", rois.dim(0), "]");
    if (!dtype_is_float(x.dtype()) || !dtype_is_float(rois.dtype()))
      return invalid_argument("inputs 0 (X) and 1 (rois) must be float tensors");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> bidx, to_int64_vector(batch));
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), num = rois.dim(0);
    for (int64_t i = 0; i < num; ++i)
      if (bidx[static_cast<size_t>(i)] < 0 || bidx[static_cast<size_t>(i)] >= n)
        return invalid_argument("input 2 (batch_indices) has ", bidx[static_cast<size_t>(i)],
                                " at ", i, ", expected [0, ", n, ")");
    const std::vector<float> xf = to_float_vector(x), rf = to_float_vector(rois);
    // Sampling grids follow the roi size when sampling_ratio is 0: refuse
    // rois that are not finite or whose grid would not fit in memory.
    for (int64_t r = 0; r < num; ++r) {
      const float* roi = rf.data() + r * 4;
      bool finite = true;
      for (int i = 0; i < 4; ++i) finite &= std::isfinite(roi[i] * spatial_scale_);
      const double gh = sampling_ratio_ > 0 ? sampling_ratio_ : std::ceil((roi[3] - roi[1]) * spatial_scale_ / out_h_);
      const double gw = sampling_ratio_ > 0 ? sampling_ratio_ : std::ceil((roi[2] - roi[0]) * spatial_scale_ / out_w_);
      if (!finite || std::max(gh, 1.0) * std::max(gw, 1.0) * static_cast<double>(out_h_ * out_w_) > 1e8) {
        return invalid_argument("input 1 (rois) row ", r, " (", roi[0], ", ", roi[1], ", ", roi[2],
                                ", ", roi[3], ") is not finite or needs too many samples");
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), Shape{num, c, out_h_, out_w_}));
    std::vector<float> yf(static_cast<size_t>(y->numel()));
    parallel_for(ctx.pool(), num, 1, [&](int64_t r0, int64_t r1) {
      std::vector<Sample> samples;
      for (int64_t r = r0; r < r1; ++r) {
        const float* roi = rf.data() + r * 4;
        const float off = half_pixel_ ? 0.5f : 0.f;
        const float x0 = roi[0] * spatial_scale_ - off, y0 = roi[1] * spatial_scale_ - off;
        const float x1 = roi[2] * spatial_scale_ - off, y1 = roi[3] * spatial_scale_ - off;
        float roi_w = x1 - x0, roi_h = y1 - y0;
        if (!half_pixel_) {
          roi_w = std::max(roi_w, 1.f);
          roi_h = std::max(roi_h, 1.f);
        }
        const float bin_h = roi_h / static_cast<float>(out_h_), bin_w = roi_w / static_cast<float>(out_w_);
        const int64_t grid_h = sampling_ratio_ > 0 ? sampling_ratio_ : static_cast<int64_t>(std::ceil(roi_h / static_cast<float>(out_h_)));
        const int64_t grid_w = sampling_ratio_ > 0 ? sampling_ratio_ : static_cast<int64_t>(std::ceil(roi_w / static_cast<float>(out_w_)));
        const int64_t per_bin = std::max<int64_t>(grid_h, 0) * std::max<int64_t>(grid_w, 0);
        const float count = static_cast<float>(std::max<int64_t>(per_bin, 1));
        samples.assign(static_cast<size_t>(out_h_ * out_w_ * per_bin), Sample{});
        size_t s = 0;
        for (int64_t ph = 0; ph < out_h_; ++ph)
          for (int64_t pw = 0; pw < out_w_; ++pw)
            for (int64_t iy = 0; iy < grid_h; ++iy) {
              const float yy = y0 + static_cast<float>(ph) * bin_h +
                               (static_cast<float>(iy) + 0.5f) * bin_h / static_cast<float>(grid_h);
              for (int64_t ix = 0; ix < grid_w; ++ix, ++s) {
                const float xx = x0 + static_cast<float>(pw) * bin_w +
                                 (static_cast<float>(ix) + 0.5f) * bin_w / static_cast<float>(grid_w);
                samples[s] = bilinear(yy, xx, h, w);
              }
            }
        const int64_t img = bidx[static_cast<size_t>(r)];
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* plane = xf.data() + (img * c + ch) * h * w;
          float* out = yf.data() + ((r * c + ch) * out_h_) * out_w_;
          for (int64_t bin = 0; bin < out_h_ * out_w_; ++bin) {
            const Sample* sp = samples.data() + bin * per_bin;
            float acc = 0.f;
            for (int64_t k = 0; k < per_bin; ++k) {
              const Sample& q = sp[k];
              if (max_mode_) {
                const float v = std::max(std::max(q.w[0] * plane[q.pos[0]], q.w[1] * plane[q.pos[1]]),
                                         std::max(q.w[2] * plane[q.pos[2]], q.w[3] * plane[q.pos[3]]));
                acc = k == 0 ? v : std::max(acc, v);
              } else {
                acc += q.w[0] * plane[q.pos[0]] + q.w[1] * plane[q.pos[1]] + q.w[2] * plane[q.pos[2]] +
                       q.w[3] * plane[q.pos[3]];
              }
            }
            out[bin] = max_mode_ ? acc : acc / count;
          }
        }
      }
    });
    from_float_vector(yf.data(), y);
    return Status::ok();
  }

 private:
  // Corner positions and weights of the bilinear sample at (y, x); samples
  // more than one pixel outside the map contribute nothing.
  static Sample bilinear(float y, float x, int64_t h, int64_t w) {
    Sample s;
    if (y < -1.f || y > static_cast<float>(h) || x < -1.f || x > static_cast<float>(w)) return s;
    y = std::max(y, 0.f);
    x = std::max(x, 0.f);
    int64_t y_lo = static_cast<int64_t>(y), x_lo = static_cast<int64_t>(x), y_hi, x_hi;
    if (y_lo >= h - 1) {
      y_hi = y_lo = h - 1;
      y = static_cast<float>(y_lo);
    } else {
      y_hi = y_lo + 1;
    }
    if (x_lo >= w - 1) {
      x_hi = x_lo = w - 1;
      x = static_cast<float>(x_lo);
    } else {
      x_hi = x_lo + 1;
    }
    const float ly = y - static_cast<float>(y_lo), lx = x - static_cast<float>(x_lo);
    const float hy = 1.f - ly, hx = 1.f - lx;
    s.pos[0] = y_lo * w + x_lo;
    s.pos[1] = y_lo * w + x_hi;
    s.pos[2] = y_hi * w + x_lo;
    s.pos[3] = y_hi * w + x_hi;
    s.w[0] = hy * hx;
    s.w[1] = hy * lx;
    s.w[2] = ly * hx;
    s.w[3] = ly * lx;
    return s;
  }

  bool max_mode_ = false, half_pixel_ = true;
  int64_t out_h_ = 1, out_w_ = 1, sampling_ratio_ = 0;
  float spatial_scale_ = 1.f;
};

}  // namespace

void register_roi_align_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "RoiAlign", .since_version = 10, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<RoiAlignKernel>, .flags = 0});
}

}  // namespace kiln::kernels
