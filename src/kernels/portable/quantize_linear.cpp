// QuantizeLinear-19+ and DequantizeLinear-19+: per-tensor, per-axis and
// blocked (block_size, opset 21) scales; output_dtype (21); saturate (19);
// every integer type from 2 to 16 bits and the float8/float4 types.
// (Opsets 10-18 keep the 8/16-bit kernels of quantize.cpp.)
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/low_precision.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/dtype_attr.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

// Which scale (and zero point) element each element of x uses.
struct ScaleMap {
  int64_t outer = 1, dim = 1, inner = 1;  // x as [outer, dim, inner] around the axis
  int64_t block = 0;                      // 0: per-axis or per-tensor
  bool per_tensor = true;
  int64_t index(int64_t i) const {
    if (per_tensor) return 0;
    const int64_t in = i % inner;
    const int64_t a = (i / inner) % dim;
    if (block == 0) return a;
    const int64_t o = i / (inner * dim);
    const int64_t blocks = (dim + block - 1) / block;
    return (o * blocks + a / block) * inner + in;
  }
};

Result<ScaleMap> scale_map(const Tensor& x, const Tensor& scale, int64_t axis_attr, int64_t block) {
  ScaleMap m;
  if (scale.rank() == 0 || (scale.numel() == 1 && block == 0)) return m;
  m.per_tensor = false;
  KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_attr, static_cast<int64_t>(x.rank())));
  for (int64_t d = 0; d < static_cast<int64_t>(x.rank()); ++d) {
    const int64_t v = x.dim(static_cast<size_t>(d));
    if (d < axis) m.outer *= v;
    else if (d == axis) m.dim = v;
    else m.inner *= v;
  }
  if (block <= 0) {
    if (scale.rank() != 1 || scale.dim(0) != m.dim)
      return invalid_argument("scale has shape ", scale.shape().to_string(), "; expected [",
                              m.dim, "] (dim ", axis, " of x ", x.shape().to_string(), ")");
    return m;
  }
  m.block = block;
  Shape want = x.shape();
  want[static_cast<size_t>(axis)] = (m.dim + block - 1) / block;
  if (scale.shape() != want)
    return invalid_argument("scale has shape ", scale.shape().to_string(), "; block_size ",
                            block, " on axis ", axis, " needs ", want.to_string());
  return m;
}

// Values of a quantized tensor (integers, or low-precision codes) as doubles.
std::vector<double> quantized_values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  if (dtype_is_low_precision(t.dtype())) {
    const auto* c = static_cast<const uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = lp_decode(t.dtype(), c[i]);
    return v;
  }
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const T* p = t.data<T>();
      for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = static_cast<double>(p[i]);
    }
  });
  return v;
}

constexpr DTypeSet kQuantizedTypes = kLowPrecisionDTypes | dtype_set(DType::kUInt8, DType::kInt8, DType::kUInt16,
                                                                     DType::kInt16, DType::kInt32);

class QuantizeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 1);
    block_ = init.attr_int("block_size", 0);
    saturate_ = init.attr_int("saturate", 1) != 0;
    KILN_ASSIGN_OR_RETURN(output_dtype_, dtype_attr(init, "output_dtype", DType::kUndefined));
    if (block_ < 0) return invalid_argument("block_size is negative");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return invalid_argument("needs x and y_scale");
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    DType out = output_dtype_ != DType::kUndefined ? output_dtype_ : DType::kUInt8;
    if (ctx.has_input(2)) out = ctx.input(2).dtype();
    if (!(kQuantizedTypes & dtype_bit(out)) || out == DType::kInt32)
      return invalid_argument("cannot quantize to ", dtype_name(out));
    KILN_ASSIGN_OR_RETURN(ScaleMap map, scale_map(x, scale, axis_, block_));
    const std::vector<float> s = to_float_vector(scale);
    std::vector<double> zp(s.size(), 0.0);
    if (ctx.has_input(2)) {
      if (ctx.input(2).shape() != scale.shape() && ctx.input(2).numel() != static_cast<int64_t>(s.size()))
        return invalid_argument("y_zero_point has shape ", ctx.input(2).shape().to_string(),
                                " unlike y_scale ", scale.shape().to_string());
      zp = quantized_values(ctx.input(2));
    }
    std::vector<float> xf;
    if (x.dtype() == DType::kInt32) {
      for (int64_t i = 0; i < x.numel(); ++i) xf.push_back(static_cast<float>(x.data<int32_t>()[i]));
    } else {
      xf = to_float_vector(x);
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out, x.shape()));
    const bool lp_float = dtype_is_low_precision(out) && out != DType::kInt4 && out != DType::kUInt4 &&
                          out != DType::kInt2 && out != DType::kUInt2;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const auto k = static_cast<size_t>(map.index(i));
      const float q = xf[static_cast<size_t>(i)] / s[k];
      if (lp_float) {
        static_cast<uint8_t*>(y->raw_data())[i] = lp_encode(out, static_cast<double>(q) + zp[k], saturate_);
      } else {
        const double r = std::isnan(q) ? zp[k] : std::nearbyint(static_cast<double>(q)) + zp[k];
        store_int(y, i, r);
      }
    }
    return Status::ok();
  }

 private:
  static void store_int(Tensor* y, int64_t i, double r) {
    if (dtype_is_low_precision(y->dtype())) {
      static_cast<uint8_t*>(y->raw_data())[i] = lp_quantize(y->dtype(), r);
      return;
    }
    visit_dtype(y->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
        const double hi = static_cast<double>(std::numeric_limits<T>::max());
        y->data<T>()[i] = static_cast<T>(std::fmin(std::fmax(r, lo), hi));
      }
    });
  }

  int64_t axis_ = 1, block_ = 0;
  bool saturate_ = true;
  DType output_dtype_ = DType::kUndefined;
};

class DequantizeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 1);
    block_ = init.attr_int("block_size", 0);
    KILN_ASSIGN_OR_RETURN(output_dtype_, dtype_attr(init, "output_dtype", DType::kUndefined));
    if (block_ < 0) return invalid_argument("block_size is negative");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return invalid_argument("needs x and x_scale");
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    if (!(kQuantizedTypes & dtype_bit(x.dtype())))
      return invalid_argument("cannot dequantize ", dtype_name(x.dtype()));
    KILN_ASSIGN_OR_RETURN(ScaleMap map, scale_map(x, scale, axis_, block_));
    const std::vector<float> s = to_float_vector(scale);
    std::vector<double> zp(s.size(), 0.0);
    if (ctx.has_input(2)) {
      if (ctx.input(2).dtype() != x.dtype())
        return invalid_argument("x_zero_point has dtype ", dtype_name(ctx.input(2).dtype()),
                                ", expected ", dtype_name(x.dtype()));
      zp = quantized_values(ctx.input(2));
      if (zp.size() != s.size())
        return invalid_argument("x_zero_point has ", zp.size(), " values, x_scale ", s.size());
    }
    const std::vector<double> xv = quantized_values(x);
    const DType out = output_dtype_ != DType::kUndefined ? output_dtype_ : scale.dtype();
    if (!dtype_is_float(out)) return invalid_argument("output_dtype ", dtype_name(out), " is not a float type");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out, x.shape()));
    std::vector<float> yf(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      const auto k = static_cast<size_t>(map.index(i));
      yf[static_cast<size_t>(i)] = static_cast<float>(xv[static_cast<size_t>(i)] - zp[k]) * s[k];
    }
    from_float_vector(yf.data(), y);
    return Status::ok();
  }

 private:
  int64_t axis_ = 1, block_ = 0;
  DType output_dtype_ = DType::kUndefined;
};

}  // namespace

void register_quantize_linear_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "QuantizeLinear", .since_version = 19, .until_version = 1000,
         .dtypes = kFloatDTypes | dtype_set(DType::kInt32), .type_input = 0, .factory = make_kernel<QuantizeKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "DequantizeLinear", .since_version = 19, .until_version = 1000,
         .dtypes = kQuantizedTypes, .type_input = 0, .factory = make_kernel<DequantizeKernel>, .flags = 0});
}

}  // namespace kiln::kernels
