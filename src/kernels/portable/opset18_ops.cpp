// Small op versions from opsets 18-26 that earlier opsets lack:
// BitwiseAnd/Or/Xor/Not-18, BitCast-26, CumProd-26, Gelu-20, Swish-24, Mish-18,
// LpNormalization (all versions), RMSNormalization-23 and TensorScatter-24.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

constexpr DTypeSet kBitwiseTypes = kIntDTypes;

// ------------------------------------------------------------ Bitwise ops

enum class BitOp { kAnd, kOr, kXor };

template <BitOp OP>
class BitwiseKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1))
      return invalid_argument("needs two inputs");
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype())
      return invalid_argument("inputs have dtypes ", dtype_name(a.dtype()), " and ",
                              dtype_name(b.dtype()));
    if (!(kBitwiseTypes & dtype_bit(a.dtype())))
      return unsupported_dtype(0, a.dtype());
    KILN_ASSIGN_OR_RETURN(BroadcastPlan plan, make_broadcast_plan(a.shape(), b.shape()));
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, a.dtype(), plan.out));
    visit_dtype(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const T* x = a.data<T>();
        const T* y = b.data<T>();
        T* z = out->data<T>();
        for (int64_t r = 0; r < plan.num_runs(); ++r) {
          int64_t oa = 0, ob = 0;
          plan.run_offsets(r, &oa, &ob);
          T* zr = z + r * plan.inner;
          for (int64_t i = 0; i < plan.inner; ++i) {
            const T u = x[oa + i * plan.step_a], v = y[ob + i * plan.step_b];
            if constexpr (OP == BitOp::kAnd) zr[i] = static_cast<T>(u & v);
            else if constexpr (OP == BitOp::kOr) zr[i] = static_cast<T>(u | v);
            else zr[i] = static_cast<T>(u ^ v);
          }
        }
      }
    });
    return Status::ok();
  }
};

class BitwiseNotKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& a = ctx.input(0);
    if (!(kBitwiseTypes & dtype_bit(a.dtype())))
      return unsupported_dtype(0, a.dtype());
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, a.dtype(), a.shape()));
    visit_dtype(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const T* x = a.data<T>();
        T* y = out->data<T>();
        for (int64_t i = 0; i < a.numel(); ++i) y[i] = static_cast<T>(~x[i]);
      }
    });
    return Status::ok();
  }
};

// ------------------------------------------------------------ BitCast

class BitCastKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const int64_t to = init.attr_int("to", 0);
    to_ = static_cast<DType>(to);
    if (to <= 0 || to >= kNumDTypes || to_ == DType::kString)
      return invalid_argument("attribute 'to' is ", to, ", not a fixed-size element type");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (input) is missing");
    const Tensor& x = ctx.input(0);
    const size_t from_size = dtype_size(x.dtype()), to_size = dtype_size(to_);
    if (x.dtype() == DType::kString)
      return invalid_argument("cannot reinterpret string elements");
    Shape shape = x.shape();
    if (from_size != to_size) {
      // A wider source gains a last dim of from/to elements; a narrower one
      // needs a last dim of exactly to/from elements, which it loses.
      if (from_size > to_size) {
        shape.push_back(static_cast<int64_t>(from_size / to_size));
      } else if (x.rank() > 0 && static_cast<size_t>(x.dim(x.rank() - 1)) * from_size == to_size) {
        shape = Shape(std::vector<int64_t>(x.shape().begin(), x.shape().end() - 1));
      } else {
        return invalid_argument("cannot reinterpret ", dtype_name(x.dtype()), " as ",
                                dtype_name(to_), ": the last dim must hold ", to_size / from_size, " elements");
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, to_, shape));
    if (x.nbytes()) std::memcpy(out->raw_data(), x.raw_data(), x.nbytes());
    if (to_ == DType::kBool) {  // only 0 and 1 are valid bools
      auto* b = static_cast<uint8_t*>(out->raw_data());
      for (int64_t i = 0; i < out->numel(); ++i) b[i] = b[i] != 0;
    }
    return Status::ok();
  }

 private:
  DType to_ = DType::kUndefined;
};

// ------------------------------------------------------------ CumProd

class CumProdKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    exclusive_ = init.attr_int("exclusive", 0) != 0;
    reverse_ = init.attr_int("reverse", 0) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1))
      return invalid_argument("needs inputs x and axis");
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, to_int64_vector(ctx.input(1)));
    if (axes.size() != 1) return invalid_argument("axis must hold one value");
    const int64_t rank = static_cast<int64_t>(x.rank());
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axes[0], rank == 0 ? 1 : rank));
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t v = x.dim(static_cast<size_t>(d));
      if (d < axis) outer *= v;
      else if (d == axis) n = v;
      else inner *= v;
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), x.shape()));
    Status st;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        scan<T>(x.data<T>(), out->data<T>(), outer, n, inner);
      } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        std::vector<float> in = to_float_vector(x), res(in.size());
        scan<float>(in.data(), res.data(), outer, n, inner);
        from_float_vector(res.data(), out);
      } else {
        st = unsupported_dtype(0, x.dtype());
      }
    });
    return st;
  }

 private:
  template <class T>
  void scan(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) const {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        T acc = T(1);
        for (int64_t k = 0; k < n; ++k) {
          const int64_t j = reverse_ ? n - 1 - k : k;
          const int64_t at = (o * n + j) * inner + i;
          if (exclusive_) {
            y[at] = acc;
            acc = static_cast<T>(acc * x[at]);
          } else {
            acc = static_cast<T>(acc * x[at]);
            y[at] = acc;
          }
        }
      }
    }
  }

  bool exclusive_ = false;
  bool reverse_ = false;
};

// ------------------------------------------------------------ Gelu, Swish

enum class Act { kGelu, kGeluTanh, kSwish, kMish };

// Gelu (erf or tanh form) through the vectorized one-pass loops, in parallel
// blocks (the optimizer makes Gelu of BERT's Erf pattern and GPT-2's Tanh
// pattern: it must not be slower than the nodes it replaces).
void gelu_f32(const float* x, float* y, int64_t n, bool tanh_form, ThreadPool* pool) {
  parallel_for(pool, n, 16384, [&](int64_t b, int64_t e) {
    if (tanh_form) simd::gelu_tanh_f32(x + b, y + b, e - b);
    else simd::gelu_f32(x + b, y + b, e - b);
  });
}

class ActivationKernel final : public Kernel {
 public:
  explicit ActivationKernel(Act act, float alpha) : act_(act), alpha_(alpha) {}

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    if (!dtype_is_float(x.dtype()))
      return unsupported_dtype(0, x.dtype());
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), x.shape()));
    if (x.dtype() == DType::kFloat64) {
      apply(x.data<double>(), out->data<double>(), x.numel());
      return Status::ok();
    }
    if (x.dtype() == DType::kFloat32 && (act_ == Act::kGelu || act_ == Act::kGeluTanh)) {
      gelu_f32(x.data<float>(), out->data<float>(), x.numel(), act_ == Act::kGeluTanh, ctx.pool());
      return Status::ok();
    }
    std::vector<float> v = to_float_vector(x);
    apply(v.data(), v.data(), x.numel());
    from_float_vector(v.data(), out);
    return Status::ok();
  }

 private:
  template <class T>
  void apply(const T* x, T* y, int64_t n) const {
    const T k = static_cast<T>(std::sqrt(2.0 / M_PI));
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i];
      switch (act_) {
        case Act::kGelu: y[i] = T(0.5) * v * (T(1) + std::erf(v / static_cast<T>(M_SQRT2))); break;
        case Act::kGeluTanh:
          y[i] = T(0.5) * v * (T(1) + std::tanh(k * (v + T(0.044715) * v * v * v)));
          break;
        case Act::kSwish: y[i] = v / (T(1) + std::exp(-static_cast<T>(alpha_) * v)); break;
        case Act::kMish: y[i] = v * std::tanh(std::log1p(std::exp(v))); break;
      }
    }
  }

  Act act_;
  float alpha_;
};

Result<std::unique_ptr<Kernel>> make_gelu(const KernelInit& init) {
  const std::string mode = init.attr_string("approximate", "none");
  if (mode != "none" && mode != "tanh")
    return invalid_argument("approximate is '", mode, "'; expected 'none' or 'tanh'");
  return std::unique_ptr<Kernel>(new ActivationKernel(mode == "tanh" ? Act::kGeluTanh : Act::kGelu, 0.f));
}

Result<std::unique_ptr<Kernel>> make_mish(const KernelInit&) {
  return std::unique_ptr<Kernel>(new ActivationKernel(Act::kMish, 0.f));
}

Result<std::unique_ptr<Kernel>> make_swish(const KernelInit& init) {
  return std::unique_ptr<Kernel>(new ActivationKernel(Act::kSwish, init.attr_float("alpha", 1.f)));
}

// ------------------------------------------------------------ LpNormalization, RMSNormalization

// Splits `shape` at `axis` into [outer, n, inner] (inner = dims after axis).
void split_at(const Shape& shape, int64_t axis, int64_t* outer, int64_t* n, int64_t* inner) {
  *outer = *n = *inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const int64_t v = shape[static_cast<size_t>(d)];
    if (d < axis) *outer *= v;
    else if (d == axis) *n = v;
    else *inner *= v;
  }
}

class LpNormKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", -1);
    p_ = init.attr_int("p", 2);
    if (p_ != 1 && p_ != 2) return invalid_argument("p is ", p_, "; expected 1 or 2");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (input) is missing");
    const Tensor& x = ctx.input(0);
    if (!dtype_is_float(x.dtype()))
      return unsupported_dtype(0, x.dtype());
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    int64_t outer, n, inner;
    split_at(x.shape(), axis, &outer, &n, &inner);
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), x.shape()));
    if (x.numel() == 0) return Status::ok();  // (a zero-length axis left base pointing into no data)
    std::vector<float> v = to_float_vector(x);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        float* base = v.data() + o * n * inner + i;
        double norm = 0;
        for (int64_t k = 0; k < n; ++k) {
          const double e = base[k * inner];
          norm += p_ == 1 ? std::fabs(e) : e * e;
        }
        if (p_ == 2) norm = std::sqrt(norm);
        for (int64_t k = 0; k < n; ++k)
          base[k * inner] = norm == 0 ? 0.f : static_cast<float>(base[k * inner] / norm);
      }
    }
    from_float_vector(v.data(), out);
    return Status::ok();
  }

 private:
  int64_t axis_ = -1;
  int64_t p_ = 2;
};

class RmsNormKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", -1);
    epsilon_ = init.attr_float("epsilon", 1e-5f);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1))
      return invalid_argument("needs inputs X and scale");
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    if (!dtype_is_float(x.dtype()) || !dtype_is_float(scale.dtype()))
      return unsupported_dtype(0, x.dtype());
    const int64_t rank = static_cast<int64_t>(x.rank());
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    int64_t outer = 1, row = 1;
    for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : row) *= x.dim(static_cast<size_t>(d));
    // scale broadcasts to the normalized dims X[axis:].
    const Shape norm_shape(std::vector<int64_t>(x.shape().begin() + axis, x.shape().end()));
    KILN_ASSIGN_OR_RETURN(Shape b, broadcast_shapes(norm_shape, scale.shape()));
    if (b != norm_shape)
      return invalid_argument("scale of shape ", scale.shape().to_string(),
                              " does not broadcast to the normalized shape ", norm_shape.to_string());
    const std::vector<float> s = to_float_vector(scale);
    const std::vector<int64_t> sstride = broadcast_strides(scale.shape(), norm_shape);
    std::vector<float> full(static_cast<size_t>(row));
    for (int64_t i = 0; i < row; ++i) {
      int64_t rem = i, off = 0;
      for (size_t d = norm_shape.size(); d-- > 0;) {
        off += (rem % norm_shape[d]) * sstride[d];
        rem /= norm_shape[d];
      }
      full[static_cast<size_t>(i)] = s[static_cast<size_t>(off)];
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), x.shape()));
    std::vector<float> v = to_float_vector(x);
    for (int64_t o = 0; o < outer; ++o) {
      float* r = v.data() + o * row;
      double ss = 0;
      for (int64_t i = 0; i < row; ++i) ss += static_cast<double>(r[i]) * r[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(row ? row : 1) + epsilon_));
      for (int64_t i = 0; i < row; ++i) r[i] = r[i] * inv * full[static_cast<size_t>(i)];
    }
    from_float_vector(v.data(), out);
    return Status::ok();
  }

 private:
  int64_t axis_ = -1;
  float epsilon_ = 1e-5f;
};

// ------------------------------------------------------------ TensorScatter

// TensorScatter-24: a KV-cache write. Output = past_cache with update[b]
// written along `axis` at write_indices[b] + i (mode "circular": modulo the
// cache length).
class TensorScatterKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", -2);
    const std::string mode = init.attr_string("mode", "linear");
    if (mode != "linear" && mode != "circular")
      return invalid_argument("mode '", mode, "' is not linear or circular");
    circular_ = mode == "circular";
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return invalid_argument("needs past_cache and update");
    const Tensor& cache = ctx.input(0);
    const Tensor& upd = ctx.input(1);
    const auto rank = static_cast<int64_t>(cache.rank());
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    if (axis == 0 || upd.dtype() != cache.dtype() || upd.rank() != cache.rank() || cache.dtype() == DType::kString)
      return invalid_argument("update ", upd.shape().to_string(), " does not fit past_cache ",
                              cache.shape().to_string(), " on axis ", axis);
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && upd.dim(static_cast<size_t>(d)) != cache.dim(static_cast<size_t>(d)))
        return invalid_argument("update ", upd.shape().to_string(), " and past_cache ",
                                cache.shape().to_string(), " differ off axis ", axis);
    const int64_t batch = cache.dim(0), len = cache.dim(static_cast<size_t>(axis)),
                  n = upd.dim(static_cast<size_t>(axis));
    std::vector<int64_t> where(static_cast<size_t>(batch), 0);
    if (ctx.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(where, to_int64_vector(ctx.input(2)));
      if (static_cast<int64_t>(where.size()) != batch)
        return invalid_argument("write_indices has ", where.size(), " values for batch ", batch);
    }
    int64_t mid = 1, inner = 1;  // dims between batch and axis, after axis
    for (int64_t d = 1; d < rank; ++d)
      if (d < axis) mid *= cache.dim(static_cast<size_t>(d));
      else if (d > axis) inner *= cache.dim(static_cast<size_t>(d));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, cache.dtype(), cache.shape()));
    const size_t e = dtype_size(cache.dtype());
    if (cache.nbytes()) std::memcpy(y->raw_data(), cache.raw_data(), cache.nbytes());
    auto* dst = static_cast<uint8_t*>(y->raw_data());
    const auto* src = static_cast<const uint8_t*>(upd.raw_data());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t m = 0; m < mid; ++m)
        for (int64_t i = 0; i < n; ++i) {
          int64_t at = where[static_cast<size_t>(b)] + i;
          if (circular_) at = ((at % len) + len) % len;
          if (at < 0 || at >= len)
            return invalid_argument("write position ", at, " is outside the cache of ", len);
          std::memcpy(dst + static_cast<size_t>(((b * mid + m) * len + at) * inner) * e,
                      src + static_cast<size_t>(((b * mid + m) * n + i) * inner) * e, static_cast<size_t>(inner) * e);
        }
    return Status::ok();
  }

 private:
  int64_t axis_ = -2;
  bool circular_ = false;
};

}  // namespace

void register_opset18_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "TensorScatter", .since_version = 24, .until_version = 1000,
         .dtypes = kAllDTypes & ~dtype_bit(DType::kString), .type_input = 0, .factory = make_kernel<TensorScatterKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "BitwiseAnd", .since_version = 18, .until_version = 1000,
         .dtypes = kBitwiseTypes, .type_input = 0, .factory = make_kernel<BitwiseKernel<BitOp::kAnd>>, .flags = 0});
  r.add({.domain = "", .op_type = "BitwiseOr", .since_version = 18, .until_version = 1000,
         .dtypes = kBitwiseTypes, .type_input = 0, .factory = make_kernel<BitwiseKernel<BitOp::kOr>>, .flags = 0});
  r.add({.domain = "", .op_type = "BitwiseXor", .since_version = 18, .until_version = 1000,
         .dtypes = kBitwiseTypes, .type_input = 0, .factory = make_kernel<BitwiseKernel<BitOp::kXor>>, .flags = 0});
  r.add({.domain = "", .op_type = "BitwiseNot", .since_version = 18, .until_version = 1000,
         .dtypes = kBitwiseTypes, .type_input = 0, .factory = make_kernel<BitwiseNotKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "BitCast", .since_version = 26, .until_version = 1000,
         .dtypes = kAllDTypes & ~dtype_bit(DType::kString), .type_input = 0, .factory = make_kernel<BitCastKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "CumProd", .since_version = 26, .until_version = 1000,
         .dtypes = kNumericDTypes, .type_input = 0, .factory = make_kernel<CumProdKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Gelu", .since_version = 20, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_gelu, .flags = 0});
  r.add({.domain = "", .op_type = "Swish", .since_version = 24, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_swish, .flags = 0});
  r.add({.domain = "", .op_type = "Mish", .since_version = 18, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_mish, .flags = 0});
  r.add({.domain = "", .op_type = "LpNormalization", .since_version = 1, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<LpNormKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "RMSNormalization", .since_version = 23, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<RmsNormKernel>, .flags = 0});
}

}  // namespace kiln::kernels
