#include "kernels/portable/util/cv_common.h"

#include <algorithm>

namespace kiln::kernels {

Result<WindowAttrs> WindowAttrs::parse(const KernelInit& init) {
  WindowAttrs a;
  a.kernel_shape = init.attr_ints("kernel_shape");
  a.strides = init.attr_ints("strides");
  a.dilations = init.attr_ints("dilations");
  a.pads = init.attr_ints("pads");
  a.auto_pad = init.attr_string("auto_pad", "NOTSET");
  a.ceil_mode = init.attr_int("ceil_mode", 0) != 0;
  KILN_RETURN_IF_ERROR(init.attr_status());
  if (a.auto_pad.empty()) a.auto_pad = "NOTSET";
  if (a.auto_pad != "NOTSET" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER" &&
      a.auto_pad != "VALID") {
    return invalid_argument("attribute auto_pad is '", a.auto_pad,
                            "', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  for (int64_t s : a.strides)
    if (s < 1) return invalid_argument("attribute strides has ", s, ", expected values >= 1");
  for (int64_t d : a.dilations)
    if (d < 1) return invalid_argument("attribute dilations has ", d, ", expected values >= 1");
  for (int64_t p : a.pads)
    if (p < 0) return invalid_argument("attribute pads has ", p, ", expected values >= 0");
  for (int64_t k : a.kernel_shape)
    if (k < 1) return invalid_argument("attribute kernel_shape has ", k, ", expected values >= 1");
  return a;
}

int64_t WindowGeometry::in_size() const {
  int64_t n = 1;
  for (int64_t d : in) n *= d;
  return n;
}
int64_t WindowGeometry::out_size() const {
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  return n;
}
int64_t WindowGeometry::kernel_size() const {
  int64_t n = 1;
  for (int64_t d : kernel) n *= d;
  return n;
}

Result<WindowGeometry> resolve_window(const WindowAttrs& attrs, std::span<const int64_t> in_spatial,
                                      std::span<const int64_t> kernel) {
  const size_t r = in_spatial.size();
  auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* name) -> Status {
    if (!v.empty() && v.size() != want) {
      return invalid_argument("attribute ", name, " has ", v.size(), " values, expected ", want,
                              " for ", r, " spatial dims");
    }
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(check_len(attrs.strides, r, "strides"));
  KILN_RETURN_IF_ERROR(check_len(attrs.dilations, r, "dilations"));
  KILN_RETURN_IF_ERROR(check_len(attrs.pads, 2 * r, "pads"));
  if (kernel.size() != r) {
    return invalid_argument("the kernel has ", kernel.size(), " spatial dims, the input ", r);
  }
  WindowGeometry g;
  g.in.assign(in_spatial.begin(), in_spatial.end());
  g.kernel.assign(kernel.begin(), kernel.end());
  g.stride = attrs.strides.empty() ? std::vector<int64_t>(r, 1) : attrs.strides;
  g.dilation = attrs.dilations.empty() ? std::vector<int64_t>(r, 1) : attrs.dilations;
  g.pad_begin.assign(r, 0);
  g.pad_end.assign(r, 0);
  g.out.assign(r, 0);
  const bool same = attrs.auto_pad == "SAME_UPPER" || attrs.auto_pad == "SAME_LOWER";
  for (size_t i = 0; i < r; ++i) {
    if (g.kernel[i] < 1) return invalid_argument("kernel dim ", i, " is ", g.kernel[i]);
    const int64_t in = g.in[i], s = g.stride[i];
    const int64_t dk = (g.kernel[i] - 1) * g.dilation[i] + 1;  // dilated kernel extent
    if (same) {
      g.out[i] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + dk - in);
      const int64_t small = total / 2;
      g.pad_begin[i] = attrs.auto_pad == "SAME_UPPER" ? small : total - small;
      g.pad_end[i] = total - g.pad_begin[i];
      continue;
    }
    if (attrs.auto_pad == "NOTSET" && !attrs.pads.empty()) {
      g.pad_begin[i] = attrs.pads[i];
      g.pad_end[i] = attrs.pads[i + r];
    }
    const int64_t span = in + g.pad_begin[i] + g.pad_end[i] - dk;
    if (span < 0) {
      return invalid_argument("spatial dim ", i, " of the input (", in, ", padded to ",
                              in + g.pad_begin[i] + g.pad_end[i], ") is smaller than the kernel extent ", dk);
    }
    if (attrs.ceil_mode) {
      g.out[i] = (span + s - 1) / s + 1;
      // A last window that would start in the end padding is dropped.
      if ((g.out[i] - 1) * s >= in + g.pad_begin[i]) --g.out[i];
    } else {
      g.out[i] = span / s + 1;
    }
  }
  return g;
}

std::vector<float> to_float_vector(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  switch (t.dtype()) {
    case DType::kFloat32: std::copy_n(t.data<float>(), v.size(), v.begin()); break;
    case DType::kFloat16:
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<Float16>()[i]);
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<BFloat16>()[i]);
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<double>()[i]);
      break;
    default: break;
  }
  return v;
}

void from_float_vector(const float* values, Tensor* out) {
  const size_t n = static_cast<size_t>(out->numel());
  switch (out->dtype()) {
    case DType::kFloat32: std::copy_n(values, n, out->data<float>()); break;
    case DType::kFloat16:
      for (size_t i = 0; i < n; ++i) out->data<Float16>()[i] = Float16(values[i]);
      break;
    case DType::kBFloat16:
      for (size_t i = 0; i < n; ++i) out->data<BFloat16>()[i] = BFloat16(values[i]);
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < n; ++i) out->data<double>()[i] = values[i];
      break;
    default: break;
  }
}


Status check_conv_inputs(const KernelContext& ctx) {
  for (size_t i = 0; i < 2; ++i)
    if (!ctx.has_input(i)) return invalid_argument(input_label(i, i ? "W" : "X"), " is missing");
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (x.rank() < 3 || x.rank() > 10) {
    return invalid_argument("input 0 (X) has shape ", x.shape().to_string(),
                            ", expected [N, C, spatial...] with 1 to 8 spatial dims");
  }
  if (w.rank() != x.rank()) {
    return invalid_argument("input 1 (W) has shape ", w.shape().to_string(), ", expected rank ",
                            x.rank(), " like input 0 (X) ", x.shape().to_string());
  }
  if (w.dtype() != x.dtype() || (b && b->dtype() != x.dtype())) {
    return invalid_argument("input 1 (W) and input 2 (B) must have the dtype of input 0 (X), ",
                            dtype_name(x.dtype()));
  }
  return Status::ok();
}

}  // namespace kiln::kernels
