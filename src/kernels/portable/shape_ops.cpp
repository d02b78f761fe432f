// Shape-only and constant-producing ops: Reshape, Flatten, Squeeze,
// Unsqueeze, Identity and inference Dropout return views of their input
// (kAliasesInput0, no copy); Shape, Size, Expand, ConstantOfShape, Constant,
// Range and EyeLike produce new tensors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/strided_copy.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/dtype_attr.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {


const Tensor* tensor_input0(const KernelContext& ctx, Status* st) {
  if (!ctx.has_input(0) || !ctx.input_value(0)->is_tensor()) {
    *st = invalid_argument("input 0 must be a tensor");
    return nullptr;
  }
  return &ctx.input(0);
}

// ---------------------------------------------------------------- Reshape

class ReshapeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    allowzero_ = init.attr_int("allowzero", 0) != 0;
    if (init.opset < 5) {
      if (!init.node.has_attr("shape")) return invalid_argument("attribute 'shape' is missing");
      attr_shape_ = init.attr_ints("shape");
      use_attr_ = true;
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, use_attr_ ? 1 : 2, 2));
    const Tensor& in = ctx.input(0);
    std::vector<int64_t> spec;
    if (use_attr_) {
      spec = attr_shape_;
    } else {
      if (!ctx.has_input(1)) return invalid_argument("input 1 (shape) is missing");
      KILN_ASSIGN_OR_RETURN(spec, read_ints_input(ctx, 1, "shape"));
    }
    Shape out;
    out.resize(spec.size());
    int infer = -1;
    int64_t known = 1;
    for (size_t i = 0; i < spec.size(); ++i) {
      int64_t d = spec[i];
      if (d == 0 && !allowzero_) {
        if (i >= in.rank()) {
          return invalid_argument("input 1 (shape) ", Shape(spec).to_string(),
                                  " copies dim ", i, " (0) but the data has rank ", in.rank());
        }
        d = in.dim(i);
      } else if (d == -1) {
        if (infer >= 0) {
          return invalid_argument("input 1 (shape) ", Shape(spec).to_string(),
                                  " has more than one -1");
        }
        infer = static_cast<int>(i);
        continue;
      } else if (d < 0) {
        return invalid_argument("input 1 (shape) ", Shape(spec).to_string(),
                                " has an invalid dim ", d);
      }
      out[i] = d;
      if (__builtin_mul_overflow(known, d, &known)) {
        return invalid_argument("input 1 (shape) ", Shape(spec).to_string(), " overflows");
      }
    }
    if (infer >= 0) {
      if (known == 0) {
        if (in.numel() != 0) {
          return invalid_argument("input 1 (shape) ", Shape(spec).to_string(),
                                  " cannot infer -1 for data of shape ", in.shape().to_string());
        }
        out[static_cast<size_t>(infer)] = 0;
        known = 0;
      } else {
        out[static_cast<size_t>(infer)] = in.numel() / known;
        known *= out[static_cast<size_t>(infer)];
      }
    }
    if (known != in.numel()) {
      return invalid_argument("cannot reshape data of shape ", in.shape().to_string(),
                              " to ", Shape(spec).to_string());
    }
    ctx.set_output_alias(0, in.reshaped(std::move(out)));
    return Status::ok();
  }

 private:
  bool allowzero_ = false;
  bool use_attr_ = false;
  std::vector<int64_t> attr_shape_;
};

// ---------------------------------------------------------------- Flatten

class FlattenKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 1);
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    const int64_t r = static_cast<int64_t>(in.rank());
    if (axis_ < -r || axis_ > r) {
      return invalid_argument("axis ", axis_, " is out of range for rank ", r);
    }
    const int64_t axis = axis_ < 0 ? axis_ + r : axis_;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < r; ++i) (i < axis ? outer : inner) *= in.dim(static_cast<size_t>(i));
    ctx.set_output_alias(0, in.reshaped(Shape{outer, inner}));
    return Status::ok();
  }

 private:
  int64_t axis_ = 1;
};

// ---------------------------------------------------------- Squeeze/Unsqueeze

// Axes come from the 'axes' attribute before opset 13 and input 1 after.
class AxesKernelBase : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axes_from_input_ = init.opset >= 13;
    has_attr_axes_ = init.node.has_attr("axes");
    attr_axes_ = init.attr_ints("axes");
    return Status::ok();
  }

 protected:
  Result<std::vector<int64_t>> axes(const KernelContext& ctx, bool* given) const {
    if (axes_from_input_) return read_ints_input(ctx, 1, "axes", given);
    *given = has_attr_axes_;
    return attr_axes_;
  }

 private:
  bool axes_from_input_ = false;
  bool has_attr_axes_ = false;
  std::vector<int64_t> attr_axes_;
};

class SqueezeKernel final : public AxesKernelBase {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
    const Tensor& in = ctx.input(0);
    bool given = false;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ax, axes(ctx, &given));
    const int64_t r = static_cast<int64_t>(in.rank());
    std::vector<bool> drop(in.rank(), false);
    if (!given || ax.empty()) {
      for (size_t i = 0; i < in.rank(); ++i) drop[i] = in.dim(i) == 1;
    } else {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalize_axes(ax, r));
      for (int64_t a : norm) {
        if (in.dim(static_cast<size_t>(a)) != 1) {
          return invalid_argument("cannot squeeze axis ", a, " of size ",
                                  in.dim(static_cast<size_t>(a)), " (shape ", in.shape().to_string(), ")");
        }
        drop[static_cast<size_t>(a)] = true;
      }
    }
    Shape out;
    for (size_t i = 0; i < in.rank(); ++i)
      if (!drop[i]) out.push_back(in.dim(i));
    ctx.set_output_alias(0, in.reshaped(std::move(out)));
    return Status::ok();
  }
};

class UnsqueezeKernel final : public AxesKernelBase {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
    const Tensor& in = ctx.input(0);
    bool given = false;
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ax, axes(ctx, &given));
    if (!given) return invalid_argument("axes are missing");
    const int64_t out_rank = static_cast<int64_t>(in.rank() + ax.size());
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalize_axes(ax, out_rank));
    std::vector<bool> is_new(static_cast<size_t>(out_rank), false);
    for (int64_t a : norm) is_new[static_cast<size_t>(a)] = true;
    Shape out;
    out.resize(static_cast<size_t>(out_rank));
    size_t j = 0;
    for (size_t i = 0; i < static_cast<size_t>(out_rank); ++i) out[i] = is_new[i] ? 1 : in.dim(j++);
    ctx.set_output_alias(0, in.reshaped(std::move(out)));
    return Status::ok();
  }
};

// ---------------------------------------------------------------- Shape, Size

class ShapeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    start_ = init.attr_int("start", 0);
    end_ = init.attr_int("end", INT64_MAX);
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    Status st;
    const Tensor* in = tensor_input0(ctx, &st);
    if (!in) return st;
    const int64_t r = static_cast<int64_t>(in->rank());
    auto clamp = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
    const int64_t b = clamp(start_), e = std::max(clamp(end_), b);
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kInt64, Shape{e - b}));
    for (int64_t i = b; i < e; ++i) out->data<int64_t>()[i - b] = in->dim(static_cast<size_t>(i));
    return Status::ok();
  }

 private:
  int64_t start_ = 0, end_ = INT64_MAX;
};

class SizeKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    Status st;
    const Tensor* in = tensor_input0(ctx, &st);
    if (!in) return st;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kInt64, Shape{}));
    *out->data<int64_t>() = in->numel();
    return Status::ok();
  }
};

// ---------------------------------------------------------- Identity, Dropout

class IdentityKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    const Value* v = ctx.input_value(0);
    if (!v || v->is_none()) {
      ctx.set_output_value(0, Value::none());
    } else if (v->is_tensor()) {
      ctx.set_output_alias(0, v->tensor());
    } else {
      // Sequences: the items are immutable once made, so sharing them is safe.
      ctx.set_output_value(0, *v);
    }
    return Status::ok();
  }
};

class DropoutKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    opset_ = init.opset;
    attr_ratio_ = init.attr_float("ratio", 0.5f);
    has_seed_ = init.node.has_attr("seed");
    seed_ = init.attr_int("seed", 0);
    // Opsets 1-6: is_test=0 (the default) means training; nobody runs ONNX
    // models that way for inference, and ONNX Runtime ignores it too.
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 3));
    const Tensor& x = ctx.input(0);
    bool training = false;
    float ratio = attr_ratio_;
    if (opset_ >= 12) {
      ratio = 0.5f;
      if (ctx.has_input(1)) {
        KILN_ASSIGN_OR_RETURN(std::vector<double> r, to_double_vector(ctx.input(1)));
        if (r.size() != 1) return invalid_argument("input 1 (ratio) must be a scalar");
        ratio = static_cast<float>(r[0]);
      }
      if (ctx.has_input(2)) {
        const Tensor& t = ctx.input(2);
        if (t.dtype() != DType::kBool || t.numel() != 1) {
          return invalid_argument("input 2 (training_mode) must be a bool scalar");
        }
        training = *t.data<bool>();
      }
    }
    if (training && !(ratio >= 0.f && ratio < 1.f)) {
      return invalid_argument("input 1 (ratio) must be in [0, 1), got ", ratio);
    }
    const DType mask_type = opset_ >= 10 ? DType::kBool : x.dtype();
    const bool want_mask = ctx.wants_output(1);
    if (!training || ratio == 0.f) {
      ctx.set_output_alias(0, x);
      if (want_mask) {
        KILN_ASSIGN_OR_RETURN(Tensor * mask, ctx.allocate_output(1, mask_type, x.shape()));
        KILN_RETURN_IF_ERROR(fill_ones(mask));
      }
      return Status::ok();
    }
    // Training mode: a random mask, kept values scaled by 1 / (1 - ratio).
    if (!dtype_is_float(x.dtype())) {
      return invalid_argument("training mode needs a float input, got ",
                              dtype_name(x.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    KILN_ASSIGN_OR_RETURN(Tensor * mask, ctx.allocate_output(1, DType::kBool, x.shape()));
    bool* keep = mask->data<bool>();
    // With a seed, draw exactly as numpy's legacy RandomState(seed).uniform
    // does (the ONNX reference): MT19937 seeded by init_genrand, and 53-bit
    // doubles from two 32-bit draws. std::mt19937 seeds the same way.
    std::mt19937 rng(has_seed_ ? static_cast<uint32_t>(seed_) : std::random_device{}());
    auto uniform = [&rng]() {
      const uint32_t a = static_cast<uint32_t>(rng()) >> 5, b = static_cast<uint32_t>(rng()) >> 6;
      return (a * 67108864.0 + b) / 9007199254740992.0;
    };
    const float scale = 1.f / (1.f - ratio);
    const int64_t n = x.numel();
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Float16> ||
                    std::is_same_v<T, BFloat16>) {
        const T* xd = x.data<T>();
        T* yd = y->data<T>();
        for (int64_t i = 0; i < n; ++i) {
          keep[i] = uniform() >= static_cast<double>(ratio);
          yd[i] = keep[i] ? static_cast<T>(static_cast<float>(xd[i]) * scale) : static_cast<T>(0.f);
        }
      }
    });
    return Status::ok();
  }

 private:
  static Status fill_ones(Tensor* t) {
    Status st;
    visit_dtype(t->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        std::fill_n(t->data<T>(), t->numel(), static_cast<T>(1));
      } else {
        st = invalid_argument("cannot make a mask of type ", dtype_name(t->dtype()));
      }
    });
    return st;
  }

  int opset_ = 13;
  float attr_ratio_ = 0.5f;
  bool has_seed_ = false;
  int64_t seed_ = 0;
};

// ---------------------------------------------------------------- Expand

class ExpandKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    const Tensor& in = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> spec, read_ints_input(ctx, 1, "shape"));
    for (int64_t d : spec)
      if (d < 0) return invalid_argument("input 1 (shape) has a negative dim ", d);
    KILN_ASSIGN_OR_RETURN(const Shape out_shape, broadcast_shapes(in.shape(), Shape(spec)));
    KILN_RETURN_IF_ERROR(checked_numel(out_shape).status());
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), out_shape));
    std::vector<int64_t> src = broadcast_strides(in.shape(), out_shape);
    std::vector<int64_t> dst = contiguous_strides(out_shape);
    layout::strided_copy(in.dtype(), out->raw_data(), dst, in.raw_data(), src, out_shape.dims(), ctx.pool());
    return Status::ok();
  }
};

// ---------------------------------------------------------- ConstantOfShape

class ConstantOfShapeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const Tensor* v = init.attr_tensor("value");
    if (v) {
      if (v->numel() != 1) {
        return invalid_argument("attribute 'value' must hold one element, got shape ",
                                v->shape().to_string());
      }
      value_ = v->clone();
    } else {
      value_ = Tensor::scalar(0.f);
    }
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    if (!ctx.has_input(0)) return invalid_argument("input 0 (input) is missing");
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> spec, read_ints_input(ctx, 0, "input"));
    KILN_RETURN_IF_ERROR(checked_numel(Shape(spec)).status());
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, value_.dtype(), Shape(spec)));
    layout::fill_elements(value_.dtype(), out->raw_data(), value_.raw_data(), out->numel());
    return Status::ok();
  }

 private:
  Tensor value_;
};

// ---------------------------------------------------------------- Constant

class ConstantKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const ir::Node& n = init.node;
    int found = 0;
    for (const ir::Attribute& a : n.attributes) {
      if (a.name == "value" || a.name == "sparse_value") {
        if (!a.t.defined()) {
          return unimplemented("attribute '", a.name, "' holds no dense tensor");
        }
        value_ = a.t.clone();
      } else if (a.name == "value_float") {
        value_ = Tensor::scalar(init.attr_float("value_float", 0.f));
      } else if (a.name == "value_floats") {
        value_ = Tensor::from_vector(a.floats);
      } else if (a.name == "value_int") {
        value_ = Tensor::scalar(a.i);
      } else if (a.name == "value_ints") {
        value_ = Tensor::from_vector(a.ints);
      } else if (a.name == "value_string") {
        value_ = Tensor::scalar(a.s);
      } else if (a.name == "value_strings") {
        value_ = Tensor::from_vector(a.strings);
      } else {
        continue;
      }
      ++found;
    }
    if (found != 1) {
      return invalid_argument("exactly one value attribute must be set, got ", found);
    }
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, value_.dtype(), value_.shape()));
    layout::copy_elements(value_.dtype(), out->raw_data(), value_.raw_data(), value_.numel());
    return Status::ok();
  }

 private:
  Tensor value_;
};

// ---------------------------------------------------------------- Range

class RangeKernel final : public Kernel {
 public:
  // float16/bfloat16 (Range-27): start + i * delta in float32, rounded to dt.
  static Status half_range(KernelContext& ctx, DType dt) {
    const float start = to_float_vector(ctx.input(0))[0], limit = to_float_vector(ctx.input(1))[0],
                delta = to_float_vector(ctx.input(2))[0];
    if (delta == 0.f) return invalid_argument("input 2 (delta) must not be zero");
    const double count = std::ceil((static_cast<double>(limit) - start) / delta);
    if (!(count < static_cast<double>(kMaxElements)))
      return invalid_argument("range would have ", count, " elements");
    const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, Shape{n}));
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i) * delta;
    from_float_vector(v.data(), out);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
    for (size_t i = 0; i < 3; ++i) {
      if (!ctx.has_input(i) || ctx.input(i).numel() != 1) {
        static const char* kNames[] = {"start", "limit", "delta"};
        return invalid_argument("input ", i, " (", kNames[i], ") must be a scalar");
      }
      if (ctx.input(i).dtype() != ctx.input(0).dtype()) {
        return invalid_argument("inputs must have one dtype, got ",
                                dtype_name(ctx.input(0).dtype()), " and ", dtype_name(ctx.input(i).dtype()));
      }
    }
    const DType dt = ctx.input(0).dtype();
    if (dt == DType::kFloat16 || dt == DType::kBFloat16) return half_range(ctx, dt);
    Status st;
    visit_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        const T start = *ctx.input(0).data<T>(), limit = *ctx.input(1).data<T>(), delta = *ctx.input(2).data<T>();
        if (delta == T(0)) {
          st = invalid_argument("input 2 (delta) must not be zero");
          return;
        }
        double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
        if (!(count < static_cast<double>(kMaxElements))) {
          st = invalid_argument("range would have ", count, " elements");
          return;
        }
        if constexpr (std::is_integral_v<T>) {
          // Exact for large int64 values, where the double above may round.
          const __int128 span = static_cast<__int128>(limit) - static_cast<__int128>(start);
          const __int128 d = static_cast<__int128>(delta);
          __int128 q = span / d;
          if (q * d != span && ((span > 0) == (d > 0))) ++q;
          count = static_cast<double>(q);
        }
        const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
        Result<Tensor*> out = ctx.allocate_output(0, dt, Shape{n});
        if (!out.ok()) {
          st = std::move(out).status();
          return;
        }
        T* o = (*out)->template data<T>();
        if constexpr (std::is_integral_v<T>) {
          // Wrapping arithmetic: i * delta may overflow although every value fits.
          const uint64_t s0 = static_cast<uint64_t>(static_cast<int64_t>(start));
          const uint64_t d = static_cast<uint64_t>(static_cast<int64_t>(delta));
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(static_cast<int64_t>(s0 + static_cast<uint64_t>(i) * d));
        } else {
          for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(start + static_cast<T>(i) * delta);
        }
      } else {
        st = unsupported_dtype(0, dt);
      }
    });
    return st;
  }
};

// ---------------------------------------------------------------- EyeLike

class EyeLikeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    k_ = init.attr_int("k", 0);
    KILN_ASSIGN_OR_RETURN(dtype_, dtype_attr(init, "dtype", DType::kUndefined));
    if (init.node.has_attr("dtype") && (dtype_ == DType::kString || dtype_size(dtype_) == 0)) {
      return invalid_argument("attribute 'dtype' ", init.attr_int("dtype", 0),
                              " is not a supported type");
    }
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    if (in.rank() != 2) {
      return invalid_argument("input 0 must be 2-D, got shape ", in.shape().to_string());
    }
    const DType dt = dtype_ == DType::kUndefined ? in.dtype() : dtype_;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, in.shape()));
    const int64_t rows = in.dim(0), cols = in.dim(1);
    Status st;
    visit_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        T* o = out->data<T>();
        std::fill_n(o, rows * cols, static_cast<T>(0));
        const int64_t k = std::clamp<int64_t>(k_, -rows, cols);  // avoids overflow; same result
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t j = i + k;
          if (j >= 0 && j < cols) o[i * cols + j] = static_cast<T>(1);
        }
      } else {
        st = unsupported_dtype(0, dt);
      }
    });
    return st;
  }

 private:
  int64_t k_ = 0;
  DType dtype_ = DType::kUndefined;
};

constexpr DTypeSet kRangeTypes = dtype_set(DType::kFloat32, DType::kFloat64, DType::kInt16, DType::kInt32,
                                           DType::kInt64, DType::kFloat16, DType::kBFloat16);

}  // namespace

void register_shape_ops(KernelRegistry& r) {
  auto add = [&r](const char* op, int since, int until, KernelFactory f, uint32_t flags = 0,
                  DTypeSet dtypes = kAllDTypes, int type_input = 0) {
    r.add({.domain = "", .op_type = op, .since_version = since, .until_version = until, .dtypes = dtypes,
           .type_input = type_input, .factory = f, .flags = flags});
  };
  add("Reshape", 1, 1000, make_kernel<ReshapeKernel>, kAliasesInput0);
  add("Flatten", 1, 1000, make_kernel<FlattenKernel>, kAliasesInput0);
  add("Squeeze", 1, 1000, make_kernel<SqueezeKernel>, kAliasesInput0);
  add("Unsqueeze", 1, 1000, make_kernel<UnsqueezeKernel>, kAliasesInput0);
  add("Identity", 1, 1000, make_kernel<IdentityKernel>, kAliasesInput0);
  add("Dropout", 1, 1000, make_kernel<DropoutKernel>, kAliasesInput0);
  add("Shape", 1, 1000, make_kernel<ShapeKernel>);
  add("Size", 1, 1000, make_kernel<SizeKernel>);
  add("Expand", 8, 1000, make_kernel<ExpandKernel>);
  add("ConstantOfShape", 9, 1000, make_kernel<ConstantOfShapeKernel>, 0, kIntDTypes);
  add("Constant", 1, 1000, make_kernel<ConstantKernel>, 0, kAllDTypes, -1);
  add("Range", 11, 1000, make_kernel<RangeKernel>, 0, kRangeTypes);
  add("EyeLike", 9, 1000, make_kernel<EyeLikeKernel>, 0, kNumericDTypes | dtype_bit(DType::kBool));
}

}  // namespace kiln::kernels
