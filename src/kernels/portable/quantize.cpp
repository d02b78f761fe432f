// Quantization ops: QuantizeLinear / DequantizeLinear (per-tensor and
// per-axis), DynamicQuantizeLinear, MatMulInteger, ConvInteger,
// QLinearMatMul and QLinearConv.
//
// Integer products run on the float32 SGEMM engine, exactly: operands have
// their zero points subtracted (|value| <= 255, so each product is < 2^16)
// and K is split into chunks of 256, whose partial sums stay below 2^24 and
// are therefore exact in float32; the chunks are summed in int32.
// Requantization follows ONNX Runtime: real = float(acc) * (scale_a *
// scale_b / scale_y), rounded half to even, plus the zero point, saturated.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"
#include "kernels/portable/util/matmul.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kExactChunk = 256;  // 256 * 255 * 255 < 2^24

// c[m x n] (int32, ldc) = a[m x k] * b[k x n], operands holding small exact
// integers as float (see the file comment).
void int_gemm_exact(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                    int32_t* c, int64_t ldc, ThreadPool* pool) {
  for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0);
  if (m == 0 || n == 0 || k == 0) return;
  std::vector<float> part(static_cast<size_t>(m * n));
  for (int64_t p0 = 0; p0 < k; p0 += kExactChunk) {
    const int64_t kc = std::min(kExactChunk, k - p0);
    sgemm(false, false, m, n, kc, 1.f, a + p0, lda, b + p0 * ldb, ldb, 0.f, part.data(), n, pool);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] += static_cast<int32_t>(part[static_cast<size_t>(i * n + j)]);
  }
}

bool is_8bit(DType t) { return t == DType::kUInt8 || t == DType::kInt8; }

// Reads an integer tensor as float after subtracting zero points. `zp` has
// one value, or one per slice along `axis` of size zp.size().
template <class T>
void to_float_minus(const T* src, int64_t count, const std::vector<int32_t>& zp, int64_t inner, float* dst) {
  if (zp.size() <= 1) {
    const int32_t z = zp.empty() ? 0 : zp[0];
    for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(static_cast<int32_t>(src[i]) - z);
    return;
  }
  const int64_t groups = static_cast<int64_t>(zp.size());
  for (int64_t i = 0; i < count; ++i)
    dst[i] = static_cast<float>(static_cast<int32_t>(src[i]) - zp[static_cast<size_t>((i / inner) % groups)]);
}

std::vector<float> int8_to_float(const Tensor& t, const std::vector<int32_t>& zp, int64_t inner) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kUInt8) to_float_minus(t.data<uint8_t>(), t.numel(), zp, inner, out.data());
  else to_float_minus(t.data<int8_t>(), t.numel(), zp, inner, out.data());
  return out;
}

// Zero point input `index`: absent -> {0}; else its values, which must be
// `allowed` counts (1 or a per-axis count) and of the data's dtype.
Result<std::vector<int32_t>> read_zero_point(const KernelContext& ctx, size_t index, const char* name,
                                             DType data_dtype, std::initializer_list<int64_t> allowed) {
  if (!ctx.has_input(index)) return std::vector<int32_t>{0};
  const Tensor& z = ctx.input(index);
  if (z.dtype() != data_dtype) {
    return invalid_argument(input_label(index, name), " has dtype ", dtype_name(z.dtype()),
                            ", expected ", dtype_name(data_dtype), " like the data it belongs to");
  }
  bool ok = false;
  for (int64_t a : allowed) ok |= z.numel() == a;
  if (!ok || z.rank() > 1) {
    return invalid_argument(input_label(index, name), " has shape ", z.shape().to_string(),
                            ", expected a scalar or a 1-D tensor of ", *(allowed.end() - 1), " values");
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, to_int64_vector(z));
  return std::vector<int32_t>(v.begin(), v.end());
}

Result<std::vector<float>> read_scale(const KernelContext& ctx, size_t index, const char* name,
                                      std::initializer_list<int64_t> allowed) {
  if (!ctx.has_input(index)) return invalid_argument(input_label(index, name), " is missing");
  const Tensor& s = ctx.input(index);
  bool ok = false;
  for (int64_t a : allowed) ok |= s.numel() == a;
  if (!dtype_is_float(s.dtype()) || !ok || s.rank() > 1) {
    return invalid_argument(input_label(index, name), " is ", dtype_name(s.dtype()),
                            s.shape().to_string(), ", expected a float scalar or 1-D tensor of ",
                            *(allowed.end() - 1), " values");
  }
  return to_float_vector(s);
}

// Rounds half to even, adds the zero point, saturates: the zero point is
// added after rounding (25.5 + 153 rounds to 179, not 178).
// NaN (x / scale with x NaN, or a zero scale) has no integer value; it maps
// to the zero point, as converting it directly would be undefined behaviour.
template <class Q>
Q saturate_round(float v, int32_t zero_point = 0) {
  if (std::isnan(v)) v = 0.f;
  const float r = std::nearbyint(v) + static_cast<float>(zero_point);
  const float lo = static_cast<float>(std::numeric_limits<Q>::lowest());
  const float hi = static_cast<float>(std::numeric_limits<Q>::max());
  return static_cast<Q>(std::min(std::max(r, lo), hi));
}

// Writes float values `v` quantized with per-slice (scale, zero point) into
// an 8-bit tensor; slice of element i is (i / inner) % scale.size().
void requantize(const float* v, int64_t count, const std::vector<float>& scale, const std::vector<int32_t>& zp,
                int64_t inner, Tensor* out) {
  const int64_t groups = static_cast<int64_t>(std::max(scale.size(), zp.size()));
  auto run = [&](auto* dst) {
    using Q = std::remove_pointer_t<decltype(dst)>;
    for (int64_t i = 0; i < count; ++i) {
      const size_t g = groups > 1 ? static_cast<size_t>((i / inner) % groups) : 0;
      const float s = scale[scale.size() > 1 ? g : 0];
      const int32_t z = zp[zp.size() > 1 ? g : 0];
      dst[i] = saturate_round<Q>(v[i] / s, z);
    }
  };
  if (out->dtype() == DType::kUInt8) run(out->data<uint8_t>());
  else if (out->dtype() == DType::kInt8) run(out->data<int8_t>());
  else if (out->dtype() == DType::kUInt16) run(out->data<uint16_t>());
  else run(out->data<int16_t>());
}

// Per-axis layout of a tensor: `count` slices along `axis`, `inner` elements each.
Result<std::pair<int64_t, int64_t>> axis_layout(const Tensor& x, int64_t axis_attr,
                                               size_t scale_numel) {
  if (scale_numel <= 1) return std::make_pair(int64_t{1}, int64_t{1});
  KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_attr, static_cast<int64_t>(x.rank())));
  if (x.dim(static_cast<size_t>(axis)) != static_cast<int64_t>(scale_numel)) {
    return invalid_argument("input 1 (scale) has ", scale_numel, " values, expected ",
                            x.dim(static_cast<size_t>(axis)), " (dim ", axis, " of input 0 ", x.shape().to_string(), ")");
  }
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.rank(); ++d) inner *= x.dim(d);
  return std::make_pair(static_cast<int64_t>(scale_numel), inner);
}

// ---------------------------------------------------------------- QuantizeLinear

class QuantizeLinearKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 1);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (x) is missing");
    const Tensor& x = ctx.input(0);
    if (!dtype_is_float(x.dtype()) && x.dtype() != DType::kInt32)
      return invalid_argument("input 0 (x) has dtype ", dtype_name(x.dtype()), ", expected float or int32");
    const size_t per_axis = ctx.has_input(1) ? static_cast<size_t>(ctx.input(1).numel()) : 1;
    KILN_ASSIGN_OR_RETURN(auto layout, axis_layout(x, axis_, per_axis));
    KILN_ASSIGN_OR_RETURN(std::vector<float> scale, read_scale(ctx, 1, "y_scale", {1, layout.first}));
    const DType out_dtype = ctx.has_input(2) ? ctx.input(2).dtype() : DType::kUInt8;
    if (!is_8bit(out_dtype) && out_dtype != DType::kUInt16 && out_dtype != DType::kInt16)
      return invalid_argument("input 2 (y_zero_point) has dtype ", dtype_name(out_dtype),
                              ", expected uint8, int8, uint16 or int16");
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zp, read_zero_point(ctx, 2, "y_zero_point", out_dtype, {1, layout.first}));
    for (float s : scale)
      if (!(s != 0.f)) return invalid_argument("input 1 (y_scale) has a zero scale");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_dtype, x.shape()));
    std::vector<float> xf;
    if (x.dtype() == DType::kInt32) {
      xf.resize(static_cast<size_t>(x.numel()));
      for (int64_t i = 0; i < x.numel(); ++i) xf[static_cast<size_t>(i)] = static_cast<float>(x.data<int32_t>()[i]);
    } else {
      xf = to_float_vector(x);
    }
    requantize(xf.data(), x.numel(), scale, zp, layout.second, y);
    return Status::ok();
  }

 private:
  int64_t axis_ = 1;
};

// ---------------------------------------------------------------- DequantizeLinear

class DequantizeLinearKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 1);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (x) is missing");
    const Tensor& x = ctx.input(0);
    const DType t = x.dtype();
    if (!is_8bit(t) && t != DType::kInt32 && t != DType::kUInt16 && t != DType::kInt16)
      return invalid_argument("input 0 (x) has dtype ", dtype_name(t), ", expected an integer type");
    const size_t per_axis = ctx.has_input(1) ? static_cast<size_t>(ctx.input(1).numel()) : 1;
    KILN_ASSIGN_OR_RETURN(auto layout, axis_layout(x, axis_, per_axis));
    KILN_ASSIGN_OR_RETURN(std::vector<float> scale, read_scale(ctx, 1, "x_scale", {1, layout.first}));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zp, read_zero_point(ctx, 2, "x_zero_point", t, {1, layout.first}));
    if (t == DType::kInt32)
      for (int32_t z : zp)
        if (z != 0) return invalid_argument("input 2 (x_zero_point) must be 0 for int32 input");
    const DType out_dtype = ctx.input(1).dtype();
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_dtype, x.shape()));
    std::vector<float> out(static_cast<size_t>(x.numel()));
    const int64_t groups = layout.first, inner = layout.second;
    visit_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const T* xd = x.data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) {
          const size_t g = groups > 1 ? static_cast<size_t>((i / inner) % groups) : 0;
          const int64_t q = static_cast<int64_t>(xd[i]) - zp[zp.size() > 1 ? g : 0];
          out[static_cast<size_t>(i)] = static_cast<float>(q) * scale[scale.size() > 1 ? g : 0];
        }
      }
    });
    from_float_vector(out.data(), y);
    return Status::ok();
  }

 private:
  int64_t axis_ = 1;
};

// ---------------------------------------------------------------- DynamicQuantizeLinear

// y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point =
// round(-min / y_scale) saturated to [0, 255], y = saturate(round(x / y_scale) + zp).
class DynamicQuantizeLinearKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (x) is missing");
    const Tensor& x = ctx.input(0);
    if (!dtype_is_float(x.dtype()))
      return invalid_argument("input 0 (x) has dtype ", dtype_name(x.dtype()), ", expected float");
    const std::vector<float> xf = to_float_vector(x);
    float lo = 0.f, hi = 0.f;
    for (float v : xf) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const float scale = (hi - lo) / 255.f;
    const uint8_t zp = scale == 0.f ? 0 : saturate_round<uint8_t>(0.f - lo / scale);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kUInt8, x.shape()));
    KILN_ASSIGN_OR_RETURN(Tensor * ys, ctx.allocate_output(1, DType::kFloat32, Shape{}));
    KILN_ASSIGN_OR_RETURN(Tensor * yz, ctx.allocate_output(2, DType::kUInt8, Shape{}));
    ys->data<float>()[0] = scale;
    yz->data<uint8_t>()[0] = zp;
    if (scale == 0.f) {
      std::fill_n(y->data<uint8_t>(), x.numel(), uint8_t{0});
      return Status::ok();
    }
    requantize(xf.data(), x.numel(), {scale}, {static_cast<int32_t>(zp)}, 1, y);
    return Status::ok();
  }
};

// ---------------------------------------------------------------- MatMulInteger / QLinearMatMul

// (A - a_zero_point) x (B - b_zero_point) as int32 with numpy matmul shapes.
// a_zero_point may be per row (M values), b_zero_point per column (N).
Status integer_matmul(KernelContext& ctx, size_t a_in, size_t a_zp_in, size_t b_in, size_t b_zp_in, MatMulPlan* plan,
                      std::vector<int32_t>* acc) {
  for (size_t i : {a_in, b_in})
    if (!ctx.has_input(i)) return invalid_argument(input_label(i, i == a_in ? "A" : "B"), " is missing");
  const Tensor& a = ctx.input(a_in);
  const Tensor& b = ctx.input(b_in);
  if (!is_8bit(a.dtype()) || !is_8bit(b.dtype())) {
    return invalid_argument("inputs A and B are ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()),
                            ", expected uint8 or int8");
  }
  KILN_ASSIGN_OR_RETURN(*plan, plan_matmul(a.shape(), b.shape()));
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> azp, read_zero_point(ctx, a_zp_in, "a_zero_point", a.dtype(), {1, plan->m}));
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> bzp, read_zero_point(ctx, b_zp_in, "b_zero_point", b.dtype(), {1, plan->n}));
  const int64_t m = plan->m, n = plan->n, k = plan->k;
  // a: per-row zero point -> slice of element i is (i / k) % m.
  const std::vector<float> af = int8_to_float(a, azp, k);
  std::vector<float> bf(static_cast<size_t>(b.numel()));
  if (bzp.size() <= 1) {
    bf = int8_to_float(b, bzp, 1);
  } else {  // per column: element i of B is column i % n
    const std::vector<float> raw = int8_to_float(b, {0}, 1);
    for (size_t i = 0; i < raw.size(); ++i) bf[i] = raw[i] - static_cast<float>(bzp[i % static_cast<size_t>(n)]);
  }
  acc->assign(static_cast<size_t>(plan->batches * m * n), 0);
  for (int64_t t = 0; t < plan->batches; ++t) {
    const size_t ti = static_cast<size_t>(t);
    int_gemm_exact(m, n, k, af.data() + plan->a_offset[ti], k, bf.data() + plan->b_offset[ti], n,
                   acc->data() + t * m * n, n, ctx.pool());
  }
  return Status::ok();
}

class MatMulIntegerKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    MatMulPlan plan;
    std::vector<int32_t> acc;
    KILN_RETURN_IF_ERROR(integer_matmul(ctx, 0, 2, 1, 3, &plan, &acc));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kInt32, plan.out_shape));
    std::copy(acc.begin(), acc.end(), y->data<int32_t>());
    return Status::ok();
  }
};

// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
class QLinearMatMulKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    MatMulPlan plan;
    std::vector<int32_t> acc;
    KILN_RETURN_IF_ERROR(integer_matmul(ctx, 0, 2, 3, 5, &plan, &acc));
    KILN_ASSIGN_OR_RETURN(std::vector<float> a_scale, read_scale(ctx, 1, "a_scale", {1, plan.m}));
    KILN_ASSIGN_OR_RETURN(std::vector<float> b_scale, read_scale(ctx, 4, "b_scale", {1, plan.n}));
    KILN_ASSIGN_OR_RETURN(std::vector<float> y_scale, read_scale(ctx, 6, "y_scale", {1}));
    if (!ctx.has_input(7)) return invalid_argument("input 7 (y_zero_point) is missing");
    const DType out_dtype = ctx.input(7).dtype();
    if (!is_8bit(out_dtype))
      return invalid_argument("input 7 (y_zero_point) has dtype ", dtype_name(out_dtype), ", expected uint8 or int8");
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> y_zp, read_zero_point(ctx, 7, "y_zero_point", out_dtype, {1}));
    if (!(y_scale[0] != 0.f)) return invalid_argument("input 6 (y_scale) is zero");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_dtype, plan.out_shape));
    const int64_t m = plan.m, n = plan.n;
    std::vector<float> real(acc.size());
    for (size_t i = 0; i < acc.size(); ++i) {
      const size_t row = (i / static_cast<size_t>(n)) % static_cast<size_t>(m), col = i % static_cast<size_t>(n);
      const float mult = a_scale[a_scale.size() > 1 ? row : 0] * b_scale[b_scale.size() > 1 ? col : 0] / y_scale[0];
      real[i] = static_cast<float>(acc[i]) * mult;
    }
    requantize(real.data(), static_cast<int64_t>(real.size()), {1.f}, y_zp, 1, y);
    return Status::ok();
  }
};

// ---------------------------------------------------------------- ConvInteger / QLinearConv

struct IntConvResult {
  Shape y_shape;
  int64_t m = 0, out_size = 0;
  std::vector<int32_t> acc;  // N x M x out_size
};

// Integer convolution (X - x_zp) * (W - w_zp[m]) with Conv attributes.
Status integer_conv(KernelContext& ctx, const WindowAttrs& attrs, int64_t group, size_t x_in, size_t x_zp_in,
                    size_t w_in, size_t w_zp_in, IntConvResult* r) {
  for (size_t i : {x_in, w_in})
    if (!ctx.has_input(i)) return invalid_argument(input_label(i, i == x_in ? "x" : "w"), " is missing");
  const Tensor& x = ctx.input(x_in);
  const Tensor& w = ctx.input(w_in);
  if (!is_8bit(x.dtype()) || !is_8bit(w.dtype())) {
    return invalid_argument("inputs x and w are ", dtype_name(x.dtype()), " and ", dtype_name(w.dtype()),
                            ", expected uint8 or int8");
  }
  if (x.rank() < 3 || x.rank() > 10 || w.rank() != x.rank()) {
    return invalid_argument(input_label(x_in, "x"), " ", x.shape().to_string(), " and ",
                            input_label(w_in, "w"), " ", w.shape().to_string(),
                            " must both be [N or M, C, spatial...] of one rank");
  }
  const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0);
  if (group < 1 || w.dim(1) * group != c || m % group != 0) {
    return invalid_argument(input_label(w_in, "w"), " ", w.shape().to_string(), " with group ", group,
                            " does not match the ", c, " channels of ", input_label(x_in, "x"));
  }
  const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
  if (!attrs.kernel_shape.empty() &&
      !std::equal(kernel.begin(), kernel.end(), attrs.kernel_shape.begin(), attrs.kernel_shape.end())) {
    return invalid_argument("attribute kernel_shape does not match ", input_label(w_in, "w"), " ",
                            w.shape().to_string());
  }
  KILN_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(attrs, x.shape().dims().subspan(2), kernel));
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> xzp, read_zero_point(ctx, x_zp_in, "x_zero_point", x.dtype(), {1}));
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> wzp, read_zero_point(ctx, w_zp_in, "w_zero_point", w.dtype(), {1, m}));
  const int64_t cg = c / group, mg = m / group, ksize = g.kernel_size(), kg = cg * ksize;
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const std::vector<float> xf = int8_to_float(x, xzp, 1);
  const std::vector<float> wf = int8_to_float(w, wzp, w.numel() / std::max<int64_t>(1, m));
  r->m = m;
  r->out_size = out_size;
  r->y_shape = Shape{n, m};
  for (int64_t d : g.out) r->y_shape.push_back(d);
  r->acc.assign(static_cast<size_t>(n * m * out_size), 0);
  std::vector<float> col(static_cast<size_t>(kg * out_size));
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t grp = 0; grp < group; ++grp) {
      // Padding is zero after the zero point was subtracted.
      im2col_panels<float>(g, xf.data() + (img * c + grp * cg) * in_size, 0, kg, 0, out_size, out_size, 0.f,
                           col.data());
      int_gemm_exact(mg, out_size, kg, wf.data() + grp * mg * kg, kg, col.data(), out_size,
                     r->acc.data() + (img * m + grp * mg) * out_size, out_size, ctx.pool());
    }
  }
  return Status::ok();
}

class ConvIntegerKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(attrs_, WindowAttrs::parse(init));
    group_ = init.attr_int("group", 1);
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    IntConvResult r;
    KILN_RETURN_IF_ERROR(integer_conv(ctx, attrs_, group_, 0, 2, 1, 3, &r));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kInt32, r.y_shape));
    std::copy(r.acc.begin(), r.acc.end(), y->data<int32_t>());
    return Status::ok();
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
};

// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
// y_zero_point, B (int32, optional).
class QLinearConvKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(attrs_, WindowAttrs::parse(init));
    group_ = init.attr_int("group", 1);
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    IntConvResult r;
    KILN_RETURN_IF_ERROR(integer_conv(ctx, attrs_, group_, 0, 2, 3, 5, &r));
    KILN_ASSIGN_OR_RETURN(std::vector<float> x_scale, read_scale(ctx, 1, "x_scale", {1}));
    KILN_ASSIGN_OR_RETURN(std::vector<float> w_scale, read_scale(ctx, 4, "w_scale", {1, r.m}));
    KILN_ASSIGN_OR_RETURN(std::vector<float> y_scale, read_scale(ctx, 6, "y_scale", {1}));
    if (!ctx.has_input(7)) return invalid_argument("input 7 (y_zero_point) is missing");
    const DType out_dtype = ctx.input(7).dtype();
    if (!is_8bit(out_dtype))
      return invalid_argument("input 7 (y_zero_point) has dtype ", dtype_name(out_dtype), ", expected uint8 or int8");
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> y_zp, read_zero_point(ctx, 7, "y_zero_point", out_dtype, {1}));
    if (!(y_scale[0] != 0.f)) return invalid_argument("input 6 (y_scale) is zero");
    std::vector<int64_t> bias;
    if (ctx.has_input(8)) {
      const Tensor& b = ctx.input(8);
      if (b.dtype() != DType::kInt32 || b.numel() != r.m || b.rank() != 1)
        return invalid_argument("input 8 (B) is ", dtype_name(b.dtype()), b.shape().to_string(),
                                ", expected int32[", r.m, "]");
      KILN_ASSIGN_OR_RETURN(bias, to_int64_vector(b));
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_dtype, r.y_shape));
    std::vector<float> real(r.acc.size());
    for (size_t i = 0; i < r.acc.size(); ++i) {
      const size_t oc = (i / static_cast<size_t>(std::max<int64_t>(1, r.out_size))) % static_cast<size_t>(r.m);
      const int32_t a = r.acc[i] + (bias.empty() ? 0 : static_cast<int32_t>(bias[oc]));
      real[i] = static_cast<float>(a) * (x_scale[0] * w_scale[w_scale.size() > 1 ? oc : 0] / y_scale[0]);
    }
    requantize(real.data(), static_cast<int64_t>(real.size()), {1.f}, y_zp, 1, y);
    return Status::ok();
  }

 private:
  WindowAttrs attrs_;
  int64_t group_ = 1;
};

constexpr DTypeSet kQuantIn = kFloatDTypes | dtype_set(DType::kInt32);
constexpr DTypeSet kQuantized =
    dtype_set(DType::kUInt8, DType::kInt8, DType::kInt32, DType::kUInt16, DType::kInt16);
constexpr DTypeSet k8Bit = dtype_set(DType::kUInt8, DType::kInt8);

}  // namespace

void register_quantize_ops(KernelRegistry& r) {
  // Opsets 19 on (float8, int4, blocked scales): quantize_linear.cpp.
  r.add({.domain = "", .op_type = "QuantizeLinear", .since_version = 10, .until_version = 18, .dtypes = kQuantIn,
         .type_input = 0, .factory = make_kernel<QuantizeLinearKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "DequantizeLinear", .since_version = 10, .until_version = 18, .dtypes = kQuantized,
         .type_input = 0, .factory = make_kernel<DequantizeLinearKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "DynamicQuantizeLinear", .since_version = 11, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<DynamicQuantizeLinearKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "MatMulInteger", .since_version = 10, .until_version = 1000, .dtypes = k8Bit,
         .type_input = 0, .factory = make_kernel<MatMulIntegerKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "QLinearMatMul", .since_version = 10, .until_version = 1000, .dtypes = k8Bit,
         .type_input = 0, .factory = make_kernel<QLinearMatMulKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "ConvInteger", .since_version = 10, .until_version = 1000, .dtypes = k8Bit,
         .type_input = 0, .factory = make_kernel<ConvIntegerKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "QLinearConv", .since_version = 10, .until_version = 1000, .dtypes = k8Bit,
         .type_input = 0, .factory = make_kernel<QLinearConvKernel>, .flags = 0});
}

}  // namespace kiln::kernels
