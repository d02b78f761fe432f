// Normalization ops: BatchNormalization (inference, and training mode with
// batch statistics and running-mean outputs; opsets 1-15 incl. `spatial` and
// consumed_inputs), LayerNormalization (axis, epsilon, optional Mean and
// InvStdDev outputs), InstanceNormalization, LRN and
// MeanVarianceNormalization.
//
// The float32 loops are the fast path (vectorized, parallel over channels or
// rows); float16/bfloat16/double are staged through float32.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

// y[i] = x[i] * a + b
KILN_ISA_BODY
void scale_shift_body(const float* x, float* y, int64_t n, float a, float b) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
}
KILN_ISA_DISPATCH(scale_shift, scale_shift_body);

// y[i] = (x[i] - mean) * inv * scale[i] + bias[i] (bias may be null)
KILN_ISA_BODY
void normalize_row_body(const float* x, float* y, int64_t n, float mean, float inv, const float* scale, const float* bias) {
  if (bias) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i] + bias[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * scale[i];
  }
}
KILN_ISA_DISPATCH(normalize_row, normalize_row_body);

// Mean and (biased) variance of n values, two passes with eight partial
// sums each (vectorizes; more accurate than E[x^2] - E[x]^2).
KILN_ISA_BODY
void mean_var_body(const float* x, int64_t n, double* mean_out, double* var_out) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[i + j];
  double s = 0;
  for (; i < n; ++i) s += x[i];
  for (int j = 0; j < 8; ++j) s += acc[j];
  const double mean = n > 0 ? s / static_cast<double>(n) : 0.0;
  const float m = static_cast<float>(mean);
  float sq[8] = {};
  i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const float d = x[i + j] - m;
      sq[j] += d * d;
    }
  double v = 0;
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    v += d * d;
  }
  for (int j = 0; j < 8; ++j) v += sq[j];
  *mean_out = mean;
  *var_out = n > 0 ? v / static_cast<double>(n) : 0.0;
}
KILN_ISA_DISPATCH(mean_var, mean_var_body);

// float32 view of an input: borrows float32 data, stages other float types.
class FloatInput {
 public:
  explicit FloatInput(const Tensor& t) {
    if (t.dtype() == DType::kFloat32) {
      ptr_ = t.data<float>();
    } else {
      staged_ = to_float_vector(t);
      ptr_ = staged_.data();
    }
  }
  const float* data() const { return ptr_; }

 private:
  const float* ptr_ = nullptr;
  std::vector<float> staged_;
};

// float32 output buffer: writes in place for float32, else stages and
// converts on finish().
class FloatOutput {
 public:
  explicit FloatOutput(Tensor* t) : t_(t) {
    if (t->dtype() == DType::kFloat32) {
      ptr_ = t->data<float>();
    } else {
      staged_.resize(static_cast<size_t>(t->numel()));
      ptr_ = staged_.data();
    }
  }
  float* data() { return ptr_; }
  void finish() {
    if (t_->dtype() != DType::kFloat32) from_float_vector(ptr_, t_);
  }

 private:
  Tensor* t_;
  float* ptr_ = nullptr;
  std::vector<float> staged_;
};

Status check_float(const Tensor& t, size_t index, const char* name) {
  if (!dtype_is_float(t.dtype())) {
    return invalid_argument(input_label(index, name), " has dtype ", dtype_name(t.dtype()),
                            ", expected a float type");
  }
  return Status::ok();
}

Status require_inputs(const KernelContext& ctx, std::initializer_list<const char*> names) {
  size_t i = 0;
  for (const char* n : names) {
    if (!ctx.has_input(i)) return invalid_argument(input_label(i, n), " is missing");
    KILN_RETURN_IF_ERROR(check_float(ctx.input(i), i, n));
    ++i;
  }
  return Status::ok();
}

// ---------------------------------------------------------------- BatchNormalization

class BatchNormKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    epsilon_ = init.attr_float("epsilon", 1e-5f);
    momentum_ = init.attr_float("momentum", 0.9f);
    opset_ = init.opset;
    training_mode_ = init.opset >= 14 && init.attr_int("training_mode", 0) != 0;
    spatial_ = init.opset >= 9 || init.attr_int("spatial", 1) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(require_inputs(ctx, {"X", "scale", "B", "mean", "var"}));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 1) return invalid_argument("input 0 (X) must have rank >= 1");
    const int64_t n = x.dim(0), c = x.rank() > 1 ? x.dim(1) : 1;
    int64_t spatial = 1;
    for (size_t i = 2; i < x.rank(); ++i) spatial *= x.dim(i);
    // Per-channel parameters, or (spatial = 0, opset < 9) one per element of an image.
    const int64_t per = spatial_ ? c : c * spatial;
    const char* names[] = {"X", "scale", "B", "mean", "var"};
    for (size_t i = 1; i < 5; ++i) {
      if (ctx.input(i).numel() != per) {
        return invalid_argument(input_label(i, names[i]), " has shape ",
                                ctx.input(i).shape().to_string(), ", expected ", per, " values for input 0 (X) ",
                                x.shape().to_string());
      }
    }
    const bool training = opset_ >= 14 ? training_mode_
                                       : (ctx.wants_output(1) || ctx.wants_output(2) || ctx.wants_output(3) ||
                                          ctx.wants_output(4));
    KILN_ASSIGN_OR_RETURN(std::vector<double> scale, to_double_vector(ctx.input(1)));
    KILN_ASSIGN_OR_RETURN(std::vector<double> bias, to_double_vector(ctx.input(2)));
    KILN_ASSIGN_OR_RETURN(std::vector<double> mean, to_double_vector(ctx.input(3)));
    KILN_ASSIGN_OR_RETURN(std::vector<double> var, to_double_vector(ctx.input(4)));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    FloatInput xf(x);
    FloatOutput yf(y);
    const int64_t inner = spatial_ ? spatial : 1;  // elements sharing one parameter, per image
    const int64_t groups = per;                    // parameters per image

    std::vector<double> batch_mean, batch_var;
    if (training) {
      if (!spatial_) return unimplemented("training mode with spatial = 0 is not supported");
      batch_mean.assign(static_cast<size_t>(c), 0.0);
      batch_var.assign(static_cast<size_t>(c), 0.0);
      parallel_for(ctx.pool(), c, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t ch = c0; ch < c1; ++ch) {
          // Combine per-image (mean, M2) pairs (Chan et al.).
          double m = 0, m2 = 0, count = 0;
          for (int64_t img = 0; img < n; ++img) {
            double pm, pv;
            mean_var(xf.data() + (img * c + ch) * spatial, spatial, &pm, &pv);
            const double pc = static_cast<double>(spatial), total = count + pc;
            if (total == 0) continue;
            const double delta = pm - m;
            m += delta * pc / total;
            m2 += pv * pc + delta * delta * count * pc / total;
            count = total;
          }
          batch_mean[static_cast<size_t>(ch)] = m;
          batch_var[static_cast<size_t>(ch)] = count > 0 ? m2 / count : 0.0;
        }
      });
    }
    const std::vector<double>& use_mean = training ? batch_mean : mean;
    const std::vector<double>& use_var = training ? batch_var : var;
    std::vector<float> a(static_cast<size_t>(groups)), b(static_cast<size_t>(groups));
    for (size_t i = 0; i < a.size(); ++i) {
      const double inv = 1.0 / std::sqrt(use_var[i] + static_cast<double>(epsilon_));
      a[i] = static_cast<float>(scale[i] * inv);
      b[i] = static_cast<float>(bias[i] - use_mean[i] * scale[i] * inv);
    }
    const int64_t planes = n * groups;
    parallel_for(ctx.pool(), planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, inner)),
                 [&](int64_t p0, int64_t p1) {
                   for (int64_t p = p0; p < p1; ++p) {
                     const size_t g = static_cast<size_t>(p % groups);
                     scale_shift(xf.data() + p * inner, yf.data() + p * inner, inner, a[g], b[g]);
                   }
                 });
    yf.finish();
    if (training) {
      // Running statistics: input * momentum + batch * (1 - momentum).
      const double mom = momentum_;
      auto write = [&](size_t out, const std::vector<double>& v, const Tensor& like) -> Status {
        if (!ctx.wants_output(out)) return Status::ok();
        KILN_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(out, like.dtype(), like.shape()));
        std::vector<float> f(v.begin(), v.end());
        from_float_vector(f.data(), t);
        return Status::ok();
      };
      std::vector<double> run_mean(mean.size()), run_var(var.size());
      for (size_t i = 0; i < run_mean.size(); ++i) {
        run_mean[i] = mean[i] * mom + batch_mean[i] * (1 - mom);
        run_var[i] = var[i] * mom + batch_var[i] * (1 - mom);
      }
      KILN_RETURN_IF_ERROR(write(1, run_mean, ctx.input(3)));
      KILN_RETURN_IF_ERROR(write(2, run_var, ctx.input(4)));
      if (opset_ < 14) {  // saved_mean, saved_var (the batch statistics)
        KILN_RETURN_IF_ERROR(write(3, batch_mean, ctx.input(3)));
        KILN_RETURN_IF_ERROR(write(4, batch_var, ctx.input(4)));
      }
    }
    return Status::ok();
  }

 private:
  float epsilon_ = 1e-5f, momentum_ = 0.9f;
  int opset_ = 15;
  bool training_mode_ = false, spatial_ = true;
};

// ---------------------------------------------------------------- LayerNormalization

class LayerNormKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", -1);
    epsilon_ = init.attr_float("epsilon", 1e-5f);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(require_inputs(ctx, {"X", "Scale"}));
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (bias) KILN_RETURN_IF_ERROR(check_float(*bias, 2, "B"));
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    Shape norm_shape;
    int64_t rows = 1, cols = 1;
    for (size_t i = 0; i < x.rank(); ++i) {
      if (static_cast<int64_t>(i) < axis) {
        rows *= x.dim(i);
      } else {
        cols *= x.dim(i);
        norm_shape.push_back(x.dim(i));
      }
    }
    // Scale and B broadcast (unidirectionally) to X[axis:].
    auto expand = [&](const Tensor& t, size_t index, const char* name, std::vector<float>* out) -> Status {
      auto bs = broadcast_shapes(t.shape(), norm_shape);
      if (t.rank() > norm_shape.rank() || !bs.ok() || *bs != norm_shape) {
        return invalid_argument(input_label(index, name), " has shape ", t.shape().to_string(),
                                ", expected one that broadcasts to ", norm_shape.to_string());
      }
      const std::vector<float> v = to_float_vector(t);
      if (t.numel() == cols) {
        *out = v;
        return Status::ok();
      }
      const std::vector<int64_t> st = broadcast_strides(t.shape(), norm_shape);
      out->resize(static_cast<size_t>(cols));
      for (int64_t i = 0; i < cols; ++i) {
        int64_t rem = i, off = 0;
        for (size_t d = norm_shape.rank(); d-- > 0;) {
          off += (rem % norm_shape[d]) * st[d];
          rem /= norm_shape[d];
        }
        (*out)[static_cast<size_t>(i)] = v[static_cast<size_t>(off)];
      }
      return Status::ok();
    };
    std::vector<float> sc, bi;
    KILN_RETURN_IF_ERROR(expand(scale, 1, "Scale", &sc));
    if (bias) KILN_RETURN_IF_ERROR(expand(*bias, 2, "B", &bi));

    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    Shape stat_shape;
    for (size_t i = 0; i < x.rank(); ++i) stat_shape.push_back(static_cast<int64_t>(i) < axis ? x.dim(i) : 1);
    Tensor* mean_t = nullptr;
    Tensor* inv_t = nullptr;
    if (ctx.wants_output(1)) {
      KILN_ASSIGN_OR_RETURN(mean_t, ctx.allocate_output(1, DType::kFloat32, stat_shape));
    }
    if (ctx.wants_output(2)) {
      KILN_ASSIGN_OR_RETURN(inv_t, ctx.allocate_output(2, DType::kFloat32, stat_shape));
    }
    FloatInput xf(x);
    FloatOutput yf(y);
    const float eps = epsilon_;
    parallel_for(ctx.pool(), rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, cols)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        double mean, var;
        mean_var(xf.data() + r * cols, cols, &mean, &var);
        const float inv = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
        normalize_row(xf.data() + r * cols, yf.data() + r * cols, cols, static_cast<float>(mean), inv, sc.data(),
                      bias ? bi.data() : nullptr);
        if (mean_t) mean_t->data<float>()[r] = static_cast<float>(mean);
        if (inv_t) inv_t->data<float>()[r] = inv;
      }
    });
    yf.finish();
    return Status::ok();
  }

 private:
  int64_t axis_ = -1;
  float epsilon_ = 1e-5f;
};

// ---------------------------------------------------------------- InstanceNormalization

class InstanceNormKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    epsilon_ = init.attr_float("epsilon", 1e-5f);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(require_inputs(ctx, {"input", "scale", "B"}));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) {
      return invalid_argument("input 0 (input) has shape ", x.shape().to_string(),
                              ", expected [N, C, ...]");
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    int64_t spatial = 1;
    for (size_t i = 2; i < x.rank(); ++i) spatial *= x.dim(i);
    for (size_t i = 1; i < 3; ++i) {
      if (ctx.input(i).numel() != c) {
        return invalid_argument(input_label(i, i == 1 ? "scale" : "B"), " has shape ",
                                ctx.input(i).shape().to_string(), ", expected [", c, "]");
      }
    }
    const std::vector<float> scale = to_float_vector(ctx.input(1)), bias = to_float_vector(ctx.input(2));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    FloatInput xf(x);
    FloatOutput yf(y);
    parallel_for(ctx.pool(), n * c, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, spatial)),
                 [&](int64_t p0, int64_t p1) {
                   for (int64_t p = p0; p < p1; ++p) {
                     double mean, var;
                     mean_var(xf.data() + p * spatial, spatial, &mean, &var);
                     const size_t ch = static_cast<size_t>(p % c);
                     const double inv = 1.0 / std::sqrt(var + static_cast<double>(epsilon_));
                     const float a = static_cast<float>(scale[ch] * inv);
                     const float b = static_cast<float>(bias[ch] - mean * scale[ch] * inv);
                     scale_shift(xf.data() + p * spatial, yf.data() + p * spatial, spatial, a, b);
                   }
                 });
    yf.finish();
    return Status::ok();
  }

 private:
  float epsilon_ = 1e-5f;
};

// ---------------------------------------------------------------- LRN

// y = x / (bias + alpha / size * sum_{c' in window(c)} x[c']^2) ^ beta, the
// window spanning channels [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)].
class LrnKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    alpha_ = init.attr_float("alpha", 1e-4f);
    beta_ = init.attr_float("beta", 0.75f);
    bias_ = init.attr_float("bias", 1.f);
    size_ = init.attr_int("size", 0);
    if (size_ < 1) return invalid_argument("attribute size is ", size_, ", expected >= 1");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(require_inputs(ctx, {"X"}));
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) {
      return invalid_argument("input 0 (X) has shape ", x.shape().to_string(), ", expected [N, C, ...]");
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    int64_t spatial = 1;
    for (size_t i = 2; i < x.rank(); ++i) spatial *= x.dim(i);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    FloatInput xf(x);
    FloatOutput yf(y);
    const int64_t before = (size_ - 1) / 2, after = size_ - 1 - before;
    const float scale = alpha_ / static_cast<float>(size_);
    parallel_for(ctx.pool(), n * c, 1, [&](int64_t p0, int64_t p1) {
      std::vector<float> sq(static_cast<size_t>(spatial));
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t img = p / c, ch = p % c;
        std::fill(sq.begin(), sq.end(), 0.f);
        for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
          const float* xk = xf.data() + (img * c + k) * spatial;
          for (int64_t i = 0; i < spatial; ++i) sq[static_cast<size_t>(i)] += xk[i] * xk[i];
        }
        const float* xp = xf.data() + p * spatial;
        float* yp = yf.data() + p * spatial;
        for (int64_t i = 0; i < spatial; ++i)
          yp[i] = xp[i] / std::pow(bias_ + scale * sq[static_cast<size_t>(i)], beta_);
      }
    });
    yf.finish();
    return Status::ok();
  }

 private:
  float alpha_ = 1e-4f, beta_ = 0.75f, bias_ = 1.f;
  int64_t size_ = 0;
};

// ---------------------------------------------------------------- MeanVarianceNormalization

// y = (x - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]), as the
// ONNX function body computes it.
class MvnKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axes_ = init.node.has_attr("axes") ? init.attr_ints("axes") : std::vector<int64_t>{0, 2, 3};
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(require_inputs(ctx, {"X"}));
    const Tensor& x = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(x.rank());
    std::vector<bool> reduced(x.rank(), false);
    for (int64_t a : axes_) {
      KILN_ASSIGN_OR_RETURN(const int64_t ax, normalize_axis(a, rank));
      reduced[static_cast<size_t>(ax)] = true;
    }
    // Group index of each element: its coordinates on the kept axes.
    std::vector<int64_t> group_stride(x.rank(), 0);
    int64_t groups = 1;
    for (size_t d = x.rank(); d-- > 0;) {
      if (reduced[d]) continue;
      group_stride[d] = groups;
      groups *= x.dim(d);
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    const int64_t total = x.numel();
    if (total == 0) return Status::ok();
    FloatInput xf(x);
    FloatOutput yf(y);
    std::vector<int64_t> group_of(static_cast<size_t>(total));
    {
      std::vector<int64_t> idx(x.rank(), 0);
      int64_t g = 0;
      for (int64_t i = 0; i < total; ++i) {
        group_of[static_cast<size_t>(i)] = g;
        for (size_t d = x.rank(); d-- > 0;) {
          g += group_stride[d];
          if (++idx[d] < x.dim(d)) break;
          g -= group_stride[d] * x.dim(d);
          idx[d] = 0;
        }
      }
    }
    std::vector<double> sum(static_cast<size_t>(groups), 0.0), sq(static_cast<size_t>(groups), 0.0);
    std::vector<int64_t> count(static_cast<size_t>(groups), 0);
    for (int64_t i = 0; i < total; ++i) {
      const size_t g = static_cast<size_t>(group_of[static_cast<size_t>(i)]);
      sum[g] += xf.data()[i];
      ++count[g];
    }
    for (size_t g = 0; g < sum.size(); ++g) sum[g] /= static_cast<double>(std::max<int64_t>(1, count[g]));
    for (int64_t i = 0; i < total; ++i) {
      const size_t g = static_cast<size_t>(group_of[static_cast<size_t>(i)]);
      const double d = xf.data()[i] - sum[g];
      sq[g] += d * d;
    }
    for (size_t g = 0; g < sq.size(); ++g)
      sq[g] = std::sqrt(sq[g] / static_cast<double>(std::max<int64_t>(1, count[g]))) + 1e-9;
    for (int64_t i = 0; i < total; ++i) {
      const size_t g = static_cast<size_t>(group_of[static_cast<size_t>(i)]);
      yf.data()[i] = static_cast<float>((xf.data()[i] - sum[g]) / sq[g]);
    }
    yf.finish();
    return Status::ok();
  }

 private:
  std::vector<int64_t> axes_;
};

}  // namespace

void register_normalization_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "BatchNormalization", .since_version = 1, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<BatchNormKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "LayerNormalization", .since_version = 17, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<LayerNormKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "InstanceNormalization", .since_version = 1, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<InstanceNormKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "LRN", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<LrnKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "MeanVarianceNormalization", .since_version = 9, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<MvnKernel>, .flags = 0});
}

}  // namespace kiln::kernels
