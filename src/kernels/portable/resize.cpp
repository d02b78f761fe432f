// Resize (opset 10, 11, 13, 18) and Upsample (opset 7 and 9): N-D nearest,
// linear and cubic interpolation.
//
// Every output coordinate along each axis is mapped back to an input
// coordinate (coordinate_transformation_mode) and turned into a short list of
// taps (input index, weight): one for nearest, two for linear, four for cubic.
// Interpolation is separable, so an output element is the sum over the
// product of its per-axis taps; axes whose mapping is the identity have one
// tap of weight 1 and cost nothing.
//
// Semantics follow the ONNX reference (onnx/backend/test/case/node/resize.py),
// which the backend test data was made with: out-of-range neighbours take the
// edge value; align_corners, pytorch_half_pixel and tf_crop_and_resize use
// the real-valued output length `scale * input_length`; tf_crop_and_resize
// returns extrapolation_value for a coordinate outside [0, length - 1].
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/portable/cpu/x86/isa.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

// One output row of a nearest resize along x: dst[o] = src[x0[o]]. When each
// input column repeats `factor` times in order (an integer upsampling, as
// nn.Upsample(scale_factor=2) exports; factor 1 is a copy), every value is
// broadcast into its run with vector stores instead of a scalar gather;
// factor 0 means no such pattern.
KILN_ISA_BODY void nearest_row_f32_body(const float* src, const int64_t* x0, int64_t out_w, int64_t factor,
                                        float* dst) {
  if (factor == 1) {
    std::memcpy(dst, src, static_cast<size_t>(out_w) * sizeof(float));
  } else if (factor == 2) {
    for (int64_t i = 0; i < out_w / 2; ++i) {
      dst[2 * i] = src[i];
      dst[2 * i + 1] = src[i];
    }
  } else if (factor > 2) {
    for (int64_t i = 0; i < out_w / factor; ++i) std::fill_n(dst + i * factor, factor, src[i]);
  } else {
    for (int64_t o = 0; o < out_w; ++o) dst[o] = src[x0[o]];
  }
}
KILN_ISA_DISPATCH(nearest_row_f32, nearest_row_f32_body);

// The repeat factor of a nearest x table (x0[o] == o / factor for every o),
// else 0.
int64_t nearest_factor(const std::vector<int64_t>& x0, int64_t in_w) {
  const auto out_w = static_cast<int64_t>(x0.size());
  if (in_w <= 0 || out_w % in_w != 0) return 0;
  const int64_t f = out_w / in_w;
  for (int64_t o = 0; o < out_w; ++o)
    if (x0[static_cast<size_t>(o)] != o / f) return 0;
  return f;
}

enum class Mode { kNearest, kLinear, kCubic };
enum class CoordMode {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
  kHalfPixelSymmetric,
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };

// The taps of one axis: for output coordinate o, taps [start[o], start[o + 1])
// of offset (input index times the axis stride) and weight; `outside[o]` is
// set when tf_crop_and_resize maps o outside the input.
struct AxisTaps {
  std::vector<int64_t> start;
  std::vector<int64_t> offset;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
};

double cubic_weight(double d, double a) {
  // Keys' cubic convolution kernel with parameter a (ONNX cubic_coeff_a).
  d = std::fabs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

class ResizeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const ir::Node& node = init.node;
    upsample_ = node.op_type == "Upsample";
    opset_ = init.opset;
    const std::string mode = init.attr_string("mode", "nearest");
    if (mode == "nearest") {
      mode_ = Mode::kNearest;
    } else if (mode == "linear" || mode == "bilinear" || (upsample_ && mode == "trilinear")) {
      mode_ = Mode::kLinear;
    } else if (mode == "cubic" && !upsample_ && opset_ >= 11) {
      mode_ = Mode::kCubic;
    } else {
      return invalid_argument("attribute mode '", mode, "' is not supported (nearest, linear",
                              upsample_ || opset_ < 11 ? "" : ", cubic", ")");
    }
    if (upsample_ || opset_ < 11) {
      // Upsample and Resize-10 map coordinates asymmetrically and take the
      // floor for nearest (numpy's repeat in the Upsample reference).
      coord_ = CoordMode::kAsymmetric;
      nearest_ = NearestMode::kFloor;
    } else {
      const std::string c = init.attr_string("coordinate_transformation_mode", "half_pixel");
      if (c == "half_pixel") coord_ = CoordMode::kHalfPixel;
      else if (c == "pytorch_half_pixel") coord_ = CoordMode::kPytorchHalfPixel;
      else if (c == "align_corners") coord_ = CoordMode::kAlignCorners;
      else if (c == "asymmetric") coord_ = CoordMode::kAsymmetric;
      else if (c == "tf_half_pixel_for_nn" && opset_ < 18) coord_ = CoordMode::kTfHalfPixelForNn;
      else if (c == "tf_crop_and_resize") coord_ = CoordMode::kTfCropAndResize;
      else if (c == "half_pixel_symmetric" && opset_ >= 18) coord_ = CoordMode::kHalfPixelSymmetric;
      else return invalid_argument("attribute coordinate_transformation_mode '", c, "' is not supported");
      const std::string n = init.attr_string("nearest_mode", "round_prefer_floor");
      if (n == "round_prefer_floor") nearest_ = NearestMode::kRoundPreferFloor;
      else if (n == "round_prefer_ceil") nearest_ = NearestMode::kRoundPreferCeil;
      else if (n == "floor") nearest_ = NearestMode::kFloor;
      else if (n == "ceil") nearest_ = NearestMode::kCeil;
      else return invalid_argument("attribute nearest_mode '", n, "' is not supported");
      cubic_a_ = init.attr_float("cubic_coeff_a", -0.75f);
      exclude_outside_ = init.attr_int("exclude_outside", 0) != 0;
      extrapolation_ = init.attr_float("extrapolation_value", 0.f);
    }
    if (opset_ >= 18 && !upsample_) {
      antialias_ = init.attr_int("antialias", 0) != 0;
      axes_ = init.attr_ints("axes");
      const std::string p = init.attr_string("keep_aspect_ratio_policy", "stretch");
      if (p == "stretch") aspect_ = AspectPolicy::kStretch;
      else if (p == "not_larger") aspect_ = AspectPolicy::kNotLarger;
      else if (p == "not_smaller") aspect_ = AspectPolicy::kNotSmaller;
      else return invalid_argument("attribute keep_aspect_ratio_policy '", p, "' is not supported");
    }
    if (upsample_ && opset_ < 9) {
      if (!node.has_attr("scales")) return invalid_argument("Upsample-7 needs attribute scales");
      for (float s : init.attr_floats("scales")) attr_scales_.push_back(s);
      for (double s : attr_scales_) {
        if (!(s >= 1)) return invalid_argument("attribute scales must be >= 1, got ", s);
      }
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    const auto rank = static_cast<int64_t>(x.rank());

    // The axes the scales/sizes/roi inputs refer to (all, unless opset-18 axes).
    KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, resolve_axes(rank));
    const size_t na = axes.size();

    std::vector<double> scales_in, roi_in;
    std::vector<int64_t> sizes_in;
    KILN_RETURN_IF_ERROR(read_scales_and_sizes(ctx, na, &scales_in, &sizes_in, &roi_in));
    // Per-axis scale and output size over all `rank` axes.
    std::vector<double> scale(static_cast<size_t>(rank), 1.0);
    Shape out_shape = x.shape();
    std::vector<double> roi(2 * static_cast<size_t>(rank));
    KILN_RETURN_IF_ERROR(resolve_roi(roi_in, axes, rank, &roi));
    output_geometry(x.shape(), axes, scales_in, sizes_in, roi, &scale, &out_shape);
    for (int64_t i = 0; i < rank; ++i) {
      if (x.dim(static_cast<size_t>(i)) == 0 && out_shape[static_cast<size_t>(i)] > 0) {
        return invalid_argument("cannot resize an empty axis ", i, " of input 0 (X) ",
                                x.shape().to_string(), " to ", out_shape[static_cast<size_t>(i)]);
      }
    }

    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
    if (out->numel() == 0) return Status::ok();

    std::vector<AxisTaps> taps(static_cast<size_t>(rank));
    const std::vector<int64_t> strides = contiguous_strides(x.shape());
    for (size_t a = 0; a < static_cast<size_t>(rank); ++a) {
      build_taps(x.dim(a), out_shape[a], scale[a], roi[a], roi[static_cast<size_t>(rank) + a], strides[a], &taps[a]);
    }

    if (x.dtype() == DType::kFloat32 && run_planar_f32(x, taps, out, ctx.pool())) return Status::ok();
    Status st;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        run<T>(x, taps, out, ctx.pool());
      } else {
        st = unsupported_dtype(0, x.dtype());
      }
    });
    return st;
  }

 private:
  // The axes the scales/sizes/roi inputs refer to (all, unless opset-18 axes).
  Result<std::vector<int64_t>> resolve_axes(int64_t rank) const {
    std::vector<int64_t> axes;
    if (axes_.empty()) {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    } else {
      for (int64_t a : axes_) {
        KILN_ASSIGN_OR_RETURN(int64_t ax, normalize_axis(a, rank));
        if (std::find(axes.begin(), axes.end(), ax) != axes.end())
          return invalid_argument("attribute axes repeats axis ", a);
        axes.push_back(ax);
      }
    }
    return axes;
  }

  // Reads scales (attribute or input), sizes and roi by the op's version,
  // and checks that the given one of scales/sizes has `na` valid values.
  Status read_scales_and_sizes(KernelContext& ctx, size_t na, std::vector<double>* scales_in,
                               std::vector<int64_t>* sizes_in, std::vector<double>* roi_in) const {
    if (upsample_ && opset_ < 9) {
      *scales_in = attr_scales_;
    } else if (upsample_ || opset_ < 11) {
      if (!ctx.has_input(1)) return invalid_argument("input 1 (scales) is missing");
      KILN_ASSIGN_OR_RETURN(*scales_in, to_double_vector(ctx.input(1)));
    } else {
      if (ctx.has_input(1) && ctx.input(1).numel() > 0) {
        KILN_ASSIGN_OR_RETURN(*roi_in, to_double_vector(ctx.input(1)));
      }
      if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
        KILN_ASSIGN_OR_RETURN(*scales_in, to_double_vector(ctx.input(2)));
      }
      if (ctx.has_input(3) && ctx.input(3).numel() > 0) {
        if (!dtype_is_integer(ctx.input(3).dtype()))
          return invalid_argument("input 3 (sizes) must be int64, got ", dtype_name(ctx.input(3).dtype()));
        KILN_ASSIGN_OR_RETURN(*sizes_in, to_int64_vector(ctx.input(3)));
      }
      if (scales_in->empty() == sizes_in->empty()) {
        return invalid_argument("exactly one of input 2 (scales) and input 3 (sizes) must be given",
                                " and non-empty");
      }
    }
    if (!scales_in->empty()) {
      if (scales_in->size() != na)
        return invalid_argument("scales has ", scales_in->size(), " values, expected ", na);
      for (size_t i = 0; i < na; ++i) {
        if (!((*scales_in)[i] > 0))
          return invalid_argument("scales[", i, "] = ", (*scales_in)[i], " must be positive");
      }
    } else if (!sizes_in->empty()) {
      if (sizes_in->size() != na)
        return invalid_argument("sizes has ", sizes_in->size(), " values, expected ", na);
      for (size_t i = 0; i < na; ++i) {
        if ((*sizes_in)[i] < 0)
          return invalid_argument("sizes[", i, "] = ", (*sizes_in)[i], " must not be negative");
      }
    }
    return Status::ok();
  }

  // roi as [starts over all axes, ends over all axes]: 0 and 1, or input 1's
  // values on `axes` for tf_crop_and_resize.
  Status resolve_roi(const std::vector<double>& roi_in, const std::vector<int64_t>& axes, int64_t rank,
                     std::vector<double>* roi) const {
    const size_t na = axes.size();
    for (int64_t i = 0; i < rank; ++i) {
      (*roi)[static_cast<size_t>(i)] = 0;
      (*roi)[static_cast<size_t>(rank + i)] = 1;
    }
    if (coord_ == CoordMode::kTfCropAndResize) {
      if (roi_in.size() != 2 * na)
        return invalid_argument("tf_crop_and_resize needs input 1 (roi) with ", 2 * na,
                                " values, got ", roi_in.size());
      for (size_t i = 0; i < na; ++i) {
        (*roi)[static_cast<size_t>(axes[i])] = roi_in[i];
        (*roi)[static_cast<size_t>(rank + axes[i])] = roi_in[na + i];
      }
    }
    return Status::ok();
  }

  // The per-axis scale and output size (over all axes; those outside `axes`
  // keep 1 and the input size) from scales or sizes.
  void output_geometry(const Shape& in_shape, const std::vector<int64_t>& axes, const std::vector<double>& scales_in,
                       const std::vector<int64_t>& sizes_in, const std::vector<double>& roi, std::vector<double>* scale,
                       Shape* out_shape) const {
    const size_t na = axes.size();
    const size_t rank = in_shape.size();
    if (!scales_in.empty()) {
      for (size_t i = 0; i < na; ++i) {
        const auto a = static_cast<size_t>(axes[i]);
        (*scale)[a] = scales_in[i];
        double len = static_cast<double>(in_shape[a]) * (*scale)[a];
        if (coord_ == CoordMode::kTfCropAndResize) len *= roi[rank + a] - roi[a];
        (*out_shape)[a] = static_cast<int64_t>(std::floor(len));
      }
    } else {
      if (aspect_ == AspectPolicy::kStretch) {
        for (size_t i = 0; i < na; ++i) {
          const auto a = static_cast<size_t>(axes[i]);
          (*out_shape)[a] = sizes_in[i];
          (*scale)[a] = in_shape[a] > 0 ? static_cast<double>(sizes_in[i]) / static_cast<double>(in_shape[a]) : 1.0;
        }
      } else {
        // One scale for all axes: the smallest (not_larger) or largest
        // (not_smaller) of sizes / input, then rounded sizes (ONNX-18).
        double s = aspect_ == AspectPolicy::kNotLarger ? std::numeric_limits<double>::infinity() : 0.0;
        for (size_t i = 0; i < na; ++i) {
          const auto a = static_cast<size_t>(axes[i]);
          if (in_shape[a] == 0) continue;
          const double r = static_cast<double>(sizes_in[i]) / static_cast<double>(in_shape[a]);
          s = aspect_ == AspectPolicy::kNotLarger ? std::min(s, r) : std::max(s, r);
        }
        if (!std::isfinite(s) || s <= 0) s = 1.0;
        for (size_t i = 0; i < na; ++i) {
          const auto a = static_cast<size_t>(axes[i]);
          (*scale)[a] = s;
          (*out_shape)[a] = static_cast<int64_t>(std::nearbyint(s * static_cast<double>(in_shape[a])));
        }
      }
    }
  }

  // The input coordinate of output coordinate `o` along an axis.
  double source_coord(int64_t o, int64_t in_len, int64_t out_len, double scale, double roi_start,
                      double roi_end) const {
    const double xo = static_cast<double>(o);
    const double in = static_cast<double>(in_len);
    const double out_real = scale * in;  // the reference's output_width
    switch (coord_) {
      case CoordMode::kHalfPixel: return (xo + 0.5) / scale - 0.5;
      case CoordMode::kHalfPixelSymmetric: {
        const double adj = static_cast<double>(out_len) / out_real;
        const double center = in / 2;
        const double offset = center * (1 - adj);
        return offset + (xo + 0.5) / scale - 0.5;
      }
      case CoordMode::kPytorchHalfPixel: return out_real == 1 ? -0.5 : (xo + 0.5) / scale - 0.5;
      case CoordMode::kAlignCorners: return out_real == 1 ? 0.0 : xo * (in - 1) / (out_real - 1);
      case CoordMode::kAsymmetric: return xo / scale;
      case CoordMode::kTfHalfPixelForNn: return (xo + 0.5) / scale;
      case CoordMode::kTfCropAndResize: {
        const double c = out_len == 1 ? (roi_end - roi_start) * (in - 1) / 2
                                      : xo * (roi_end - roi_start) * (in - 1) / static_cast<double>(out_len - 1);
        return c + roi_start * (in - 1);
      }
    }
    return 0;
  }

  int64_t nearest_index(double c) const {
    const double f = std::floor(c);
    const double frac = c - f;
    auto i = static_cast<int64_t>(f);
    if (frac == 0) return i;
    switch (nearest_) {
      case NearestMode::kRoundPreferFloor: return frac <= 0.5 ? i : i + 1;
      case NearestMode::kRoundPreferCeil: return frac < 0.5 ? i : i + 1;
      case NearestMode::kFloor: return i;
      case NearestMode::kCeil: return i + 1;
    }
    return i;
  }

  void build_taps(int64_t in_len, int64_t out_len, double scale, double roi_start, double roi_end, int64_t stride,
                  AxisTaps* t) const {
    t->start.assign(1, 0);
    t->outside.assign(static_cast<size_t>(out_len), 0);
    auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in_len - 1); };
    auto add = [&](int64_t index, double w) {
      if (w == 0) return;
      const int64_t off = clamp(index) * stride;
      // Edge padding makes several taps read one element: merge them.
      for (size_t k = static_cast<size_t>(t->start.back()); k < t->offset.size(); ++k) {
        if (t->offset[k] == off) {
          t->weight[k] += w;
          return;
        }
      }
      t->offset.push_back(off);
      t->weight.push_back(w);
    };
    std::vector<double> w;
    for (int64_t o = 0; o < out_len; ++o) {
      const double c = source_coord(o, in_len, out_len, scale, roi_start, roi_end);
      if (coord_ == CoordMode::kTfCropAndResize && (c < 0 || c > static_cast<double>(in_len - 1))) {
        t->outside[static_cast<size_t>(o)] = 1;
      } else if (mode_ == Mode::kNearest) {
        add(nearest_index(c), 1.0);
      } else {
        const double f = std::floor(c);
        const double r = c - f;
        const auto i0 = static_cast<int64_t>(f);
        // Taps i0 + k for k in [k0, 1 - k0]: the kernel's support (radius 1
        // for linear, 2 for cubic), widened by 1 / scale when antialiasing a
        // downscale (ONNX-18 reference: weights then sum to 1 by division).
        const double radius = mode_ == Mode::kLinear ? 1.0 : 2.0;
        const double s = antialias_ ? std::min(scale, 1.0) : 1.0;
        const auto k0 = static_cast<int64_t>(std::floor(-radius / s)) + 1;
        w.clear();
        double sum = 0;
        for (int64_t k = k0; k <= 1 - k0; ++k) {
          const double xk = (static_cast<double>(k) - r) * s;
          double wk = mode_ == Mode::kLinear ? std::max(0.0, 1 - std::fabs(xk)) : cubic_weight(xk, cubic_a_);
          const int64_t idx = i0 + k;
          if (exclude_outside_ && (idx < 0 || idx >= in_len)) wk = 0;
          w.push_back(wk);
          sum += wk;
        }
        const bool normalize = (antialias_ || exclude_outside_) && sum != 0;
        for (int64_t k = k0; k <= 1 - k0; ++k) {
          const double wk = w[static_cast<size_t>(k - k0)];
          add(i0 + k, normalize ? wk / sum : wk);
        }
      }
      t->start.push_back(static_cast<int64_t>(t->offset.size()));
    }
  }

  template <class T>
  static T cast_out(double v) {
    if constexpr (std::is_integral_v<T>) {
      if (std::isnan(v)) return T(0);
      v = std::nearbyint(v);
      v = std::clamp(v, static_cast<double>(std::numeric_limits<T>::lowest()),
                     static_cast<double>(std::numeric_limits<T>::max()));
      return static_cast<T>(v);
    } else {
      return static_cast<T>(v);
    }
  }

  // float32 nearest/linear with at most two taps on the last two axes, one
  // unit tap on every other and nothing outside (NCHW upsampling, the common
  // case): each output row blends two input rows through a per-column table
  // of (offset, weight) pairs, in float. False when the taps do not fit.
  bool run_planar_f32(const Tensor& x, const std::vector<AxisTaps>& taps, Tensor* out, ThreadPool* pool) const {
    const size_t rank = taps.size();
    if (rank < 2 || mode_ == Mode::kCubic) return false;
    for (size_t d = 0; d < rank; ++d) {
      const AxisTaps& t = taps[d];
      for (size_t o = 0; o + 1 < t.start.size(); ++o) {
        const auto b = static_cast<size_t>(t.start[o]);
        const int64_t k = t.start[o + 1] - t.start[o];
        if (t.outside[o] || k < 1 || k > 2 || (d + 2 < rank && (k != 1 || t.weight[b] != 1.0))) return false;
      }
    }
    const AxisTaps& ty = taps[rank - 2];
    const AxisTaps& tx = taps[rank - 1];
    const Shape& os = out->shape();
    const int64_t out_h = os[rank - 2], out_w = os[rank - 1];
    std::vector<int64_t> x0(static_cast<size_t>(out_w)), x1(static_cast<size_t>(out_w));
    std::vector<float> w0(static_cast<size_t>(out_w)), w1(static_cast<size_t>(out_w));
    for (size_t o = 0; o < x0.size(); ++o) {
      const auto b = static_cast<size_t>(tx.start[o]);
      const bool two = tx.start[o + 1] - tx.start[o] == 2;
      x0[o] = tx.offset[b];
      w0[o] = static_cast<float>(tx.weight[b]);
      x1[o] = two ? tx.offset[b + 1] : x0[o];
      w1[o] = two ? static_cast<float>(tx.weight[b + 1]) : 0.f;
    }
    const float* in = x.data<float>();
    float* dst = out->data<float>();
    const bool nearest = mode_ == Mode::kNearest;
    const int64_t factor = nearest ? nearest_factor(x0, x.shape()[rank - 1]) : 0;
    auto body = [&](int64_t r0, int64_t r1) {
      // Input rows blended along x, kept while consecutive output rows read
      // them (upsampling reads each input row for several output rows): the
      // same arithmetic, in the same order, once per input row.
      std::vector<float> blended(nearest ? 0 : static_cast<size_t>(2 * out_w));
      const float* cached[2] = {nullptr, nullptr};
      const float* nearest_src = nullptr;  // the input row the previous output row read (nearest)
      auto horizontal = [&](const float* src) -> const float* {
        for (int s = 0; s < 2; ++s)
          if (cached[s] == src) return blended.data() + s * out_w;
        return nullptr;
      };
      for (int64_t r = r0; r < r1; ++r) {
        // The plane's base: the one tap of every outer axis.
        int64_t rem = r / out_h, base = 0;
        for (size_t d = rank - 2; d-- > 0;) {
          base += taps[d].offset[static_cast<size_t>(taps[d].start[static_cast<size_t>(rem % os[d])])];
          rem /= os[d];
        }
        const auto b = static_cast<size_t>(ty.start[static_cast<size_t>(r % out_h)]);
        const bool two = ty.start[static_cast<size_t>(r % out_h) + 1] - ty.start[static_cast<size_t>(r % out_h)] == 2;
        const float* ra = in + base + ty.offset[b];
        const float* rb = two ? in + base + ty.offset[b + 1] : ra;
        const float wa = static_cast<float>(ty.weight[b]), wb = two ? static_cast<float>(ty.weight[b + 1]) : 0.f;
        float* row = dst + r * out_w;
        if (nearest) {
          // Upsampling along y repeats the output row just written: copy it.
          if (ra == nearest_src)
            std::memcpy(row, row - out_w, static_cast<size_t>(out_w) * sizeof(float));
          else
            nearest_row_f32(ra, x0.data(), out_w, factor, row);
          nearest_src = ra;
          continue;
        }
        for (const float* src : {ra, rb}) {
          if (horizontal(src)) continue;
          // Overwrite the slot the current row does not use.
          const int s = (cached[0] == ra || cached[0] == rb) ? 1 : 0;
          float* h = blended.data() + s * out_w;
          for (int64_t o = 0; o < out_w; ++o) {
            const auto i = static_cast<size_t>(o);
            h[o] = w0[i] * src[x0[i]] + w1[i] * src[x1[i]];
          }
          cached[s] = src;
        }
        const float* ha = horizontal(ra);
        const float* hb = horizontal(rb);
        for (int64_t o = 0; o < out_w; ++o) row[o] = wa * ha[o] + wb * hb[o];
      }
    };
    parallel_for(pool, out->numel() / std::max<int64_t>(1, out_w), std::max<int64_t>(1, 16384 / std::max<int64_t>(out_w, 1)),
                 body);
    return true;
  }

  template <class T>
  void run(const Tensor& x, const std::vector<AxisTaps>& taps, Tensor* out, ThreadPool* pool) const {
    const size_t rank = taps.size();
    const T* in = x.data<T>();
    T* dst = out->data<T>();
    const Shape& os = out->shape();
    const int64_t inner = rank ? os[rank - 1] : 1;
    const int64_t rows = inner ? out->numel() / inner : 0;
    const T extrapolation = cast_out<T>(static_cast<double>(extrapolation_));
    const bool nearest = mode_ == Mode::kNearest;
    auto body = [&](int64_t r0, int64_t r1) {
      // Combined taps of the outer axes for the current row.
      std::vector<int64_t> off{0}, next_off;
      std::vector<double> wt{1.0}, next_wt;
      std::vector<int64_t> coord(rank > 0 ? rank - 1 : 0);
      for (int64_t r = r0; r < r1; ++r) {
        int64_t rem = r;
        for (size_t d = coord.size(); d-- > 0;) {
          coord[d] = rem % os[d];
          rem /= os[d];
        }
        bool outside = false;
        off.assign(1, 0);
        wt.assign(1, 1.0);
        for (size_t d = 0; d < coord.size() && !outside; ++d) {
          const AxisTaps& t = taps[d];
          const auto o = static_cast<size_t>(coord[d]);
          if (t.outside[o]) {
            outside = true;
            break;
          }
          const auto b = static_cast<size_t>(t.start[o]), e = static_cast<size_t>(t.start[o + 1]);
          if (e - b == 1) {
            for (size_t k = 0; k < off.size(); ++k) {
              off[k] += t.offset[b];
              wt[k] *= t.weight[b];
            }
            continue;
          }
          next_off.clear();
          next_wt.clear();
          for (size_t k = 0; k < off.size(); ++k) {
            for (size_t j = b; j < e; ++j) {
              next_off.push_back(off[k] + t.offset[j]);
              next_wt.push_back(wt[k] * t.weight[j]);
            }
          }
          off.swap(next_off);
          wt.swap(next_wt);
        }
        T* row = dst + r * inner;
        if (outside) {
          std::fill(row, row + inner, extrapolation);
          continue;
        }
        const AxisTaps& last = taps[rank - 1];
        for (int64_t xo = 0; xo < inner; ++xo) {
          const auto o = static_cast<size_t>(xo);
          if (last.outside[o]) {
            row[xo] = extrapolation;
            continue;
          }
          const auto b = static_cast<size_t>(last.start[o]), e = static_cast<size_t>(last.start[o + 1]);
          if (nearest) {
            row[xo] = in[off[0] + last.offset[b]];
            continue;
          }
          double acc = 0;
          for (size_t k = 0; k < off.size(); ++k) {
            double s = 0;
            for (size_t j = b; j < e; ++j) s += static_cast<double>(in[off[k] + last.offset[j]]) * last.weight[j];
            acc += s * wt[k];
          }
          row[xo] = cast_out<T>(acc);
        }
      }
    };
    if (rank == 0) {
      dst[0] = in[0];
      return;
    }
    parallel_for(pool, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), body);
  }

  bool upsample_ = false;
  int opset_ = 13;
  Mode mode_ = Mode::kNearest;
  CoordMode coord_ = CoordMode::kHalfPixel;
  NearestMode nearest_ = NearestMode::kRoundPreferFloor;
  AspectPolicy aspect_ = AspectPolicy::kStretch;
  double cubic_a_ = -0.75;
  bool exclude_outside_ = false;
  bool antialias_ = false;
  float extrapolation_ = 0.f;
  std::vector<int64_t> axes_;
  std::vector<double> attr_scales_;
};

}  // namespace

void register_resize_ops(KernelRegistry& r) {
  constexpr DTypeSet kTypes = kNumericDTypes;
  r.add({.domain = "", .op_type = "Upsample", .since_version = 7, .until_version = 9, .dtypes = kTypes, .type_input = 0,
         .factory = make_kernel<ResizeKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Resize", .since_version = 10, .until_version = 1000, .dtypes = kTypes,
         .type_input = 0, .factory = make_kernel<ResizeKernel>, .flags = 0});
}

}  // namespace kiln::kernels
