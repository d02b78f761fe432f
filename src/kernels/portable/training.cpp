// Training ops of domain ai.onnx.preview.training (opset 1): the optimizers
// Adagrad, Adam and Momentum (standard and Nesterov), each updating any
// number of tensors at once, and Gradient (reverse-mode differentiation of
// the part of the graph that computes y from xs and zs).
//
// Optimizer inputs are R (learning rate), T (update count), then the groups
// X..., G..., [V...], [H...] with one tensor per optimized input; outputs are
// the new X..., then the new state groups. Formulas are the ONNX reference's
// (onnx/backend/test/case/node/{adagrad,adam,momentum}.py), in double.
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

void register_gradient_op(KernelRegistry& r);  // training_gradient.cpp

namespace {

// Reads R and T and checks that the tensor groups after them match.
struct OptimizerArgs {
  double r = 0;
  int64_t t = 0;
  size_t n = 0;  // tensors per group
};

Result<OptimizerArgs> read_optimizer_args(const KernelContext& ctx, size_t groups, const char* group_names) {
  OptimizerArgs a;
  if (ctx.num_inputs() < 2 + groups || (ctx.num_inputs() - 2) % groups != 0) {
    return invalid_argument("expects R, T and ", groups, " equally long groups (", group_names,
                            "), got ", ctx.num_inputs(), " inputs");
  }
  a.n = (ctx.num_inputs() - 2) / groups;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
  }
  const Tensor& r = ctx.input(0);
  const Tensor& t = ctx.input(1);
  if (r.numel() != 1 || !dtype_is_float(r.dtype()))
    return invalid_argument("input 0 (R) must be a float scalar, got ", dtype_name(r.dtype()), r.shape().to_string());
  if (t.numel() != 1 || t.dtype() != DType::kInt64)
    return invalid_argument("input 1 (T) must be an int64 scalar, got ", dtype_name(t.dtype()), t.shape().to_string());
  KILN_ASSIGN_OR_RETURN(auto rv, to_double_vector(r));
  a.r = rv[0];
  a.t = t.data<int64_t>()[0];
  for (size_t i = 0; i < a.n; ++i) {
    const Tensor& x = ctx.input(2 + i);
    if (!dtype_is_float(x.dtype()))
      return invalid_argument("input ", 2 + i, " (X) must be float, got ", dtype_name(x.dtype()));
    for (size_t g = 1; g < groups; ++g) {
      const Tensor& other = ctx.input(2 + g * a.n + i);
      if (other.shape() != x.shape() || other.dtype() != x.dtype()) {
        return invalid_argument("input ", 2 + g * a.n + i, " has ", dtype_name(other.dtype()),
                                other.shape().to_string(), ", expected ", dtype_name(x.dtype()), x.shape().to_string(),
                                " like input ", 2 + i);
      }
    }
  }
  return a;
}

// Allocates output `index` like input `like` and writes `v` into it.
Status write_like(KernelContext& ctx, size_t index, const Tensor& like, const std::vector<double>& v) {
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(index, like.dtype(), like.shape()));
  visit_dtype(like.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      std::copy(v.begin(), v.end(), out->data<double>());
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      T* o = out->data<T>();
      for (size_t i = 0; i < v.size(); ++i) o[i] = static_cast<T>(static_cast<float>(v[i]));
    }
  });
  return Status::ok();
}

class Adagrad final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    decay_ = init.attr_float("decay_factor", 0.f);
    epsilon_ = init.attr_float("epsilon", 1e-6f);
    norm_ = init.attr_float("norm_coefficient", 0.f);
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(OptimizerArgs a, read_optimizer_args(ctx, 3, "X, G, H"));
    const double r = a.r / (1 + static_cast<double>(a.t) * decay_);
    for (size_t i = 0; i < a.n; ++i) {
      KILN_ASSIGN_OR_RETURN(auto x, to_double_vector(ctx.input(2 + i)));
      KILN_ASSIGN_OR_RETURN(auto g, to_double_vector(ctx.input(2 + a.n + i)));
      KILN_ASSIGN_OR_RETURN(auto h, to_double_vector(ctx.input(2 + 2 * a.n + i)));
      for (size_t k = 0; k < x.size(); ++k) {
        const double gr = norm_ * x[k] + g[k];
        h[k] += gr * gr;
        x[k] -= r * gr / (std::sqrt(h[k]) + epsilon_);
      }
      KILN_RETURN_IF_ERROR(write_like(ctx, i, ctx.input(2 + i), x));
      KILN_RETURN_IF_ERROR(write_like(ctx, a.n + i, ctx.input(2 + i), h));
    }
    return Status::ok();
  }

 private:
  double decay_ = 0, epsilon_ = 1e-6, norm_ = 0;
};

class Adam final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    alpha_ = init.attr_float("alpha", 0.9f);
    beta_ = init.attr_float("beta", 0.999f);
    epsilon_ = init.attr_float("epsilon", 1e-6f);
    norm_ = init.attr_float("norm_coefficient", 0.f);
    norm_post_ = init.attr_float("norm_coefficient_post", 0.f);
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(OptimizerArgs a, read_optimizer_args(ctx, 4, "X, G, V, H"));
    // Bias correction of both moments once T > 0.
    const double td = static_cast<double>(a.t);
    const double r = a.t > 0 ? a.r * std::sqrt(1 - std::pow(beta_, td)) / (1 - std::pow(alpha_, td)) : a.r;
    for (size_t i = 0; i < a.n; ++i) {
      KILN_ASSIGN_OR_RETURN(auto x, to_double_vector(ctx.input(2 + i)));
      KILN_ASSIGN_OR_RETURN(auto g, to_double_vector(ctx.input(2 + a.n + i)));
      KILN_ASSIGN_OR_RETURN(auto v, to_double_vector(ctx.input(2 + 2 * a.n + i)));
      KILN_ASSIGN_OR_RETURN(auto h, to_double_vector(ctx.input(2 + 3 * a.n + i)));
      for (size_t k = 0; k < x.size(); ++k) {
        const double gr = norm_ * x[k] + g[k];
        v[k] = alpha_ * v[k] + (1 - alpha_) * gr;
        h[k] = beta_ * h[k] + (1 - beta_) * gr * gr;
        x[k] = (1 - norm_post_) * (x[k] - r * v[k] / (std::sqrt(h[k]) + epsilon_));
      }
      KILN_RETURN_IF_ERROR(write_like(ctx, i, ctx.input(2 + i), x));
      KILN_RETURN_IF_ERROR(write_like(ctx, a.n + i, ctx.input(2 + i), v));
      KILN_RETURN_IF_ERROR(write_like(ctx, 2 * a.n + i, ctx.input(2 + i), h));
    }
    return Status::ok();
  }

 private:
  double alpha_ = 0.9, beta_ = 0.999, epsilon_ = 1e-6, norm_ = 0, norm_post_ = 0;
};

class Momentum final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const ir::Node& node = init.node;
    for (const char* a : {"alpha", "beta", "mode", "norm_coefficient"}) {
      if (!node.has_attr(a)) return invalid_argument("needs attribute ", a);
    }
    alpha_ = init.attr_float("alpha", 0.f);
    beta_ = init.attr_float("beta", 0.f);
    norm_ = init.attr_float("norm_coefficient", 0.f);
    const std::string mode = init.attr_string("mode", "");
    if (mode == "standard") nesterov_ = false;
    else if (mode == "nesterov") nesterov_ = true;
    else return invalid_argument("attribute mode must be standard or nesterov, got '", mode, "'");
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(OptimizerArgs a, read_optimizer_args(ctx, 3, "X, G, V"));
    // The gradient's coefficient is 1 on the first update (T == 0).
    const double beta = a.t > 0 ? beta_ : 1.0;
    for (size_t i = 0; i < a.n; ++i) {
      KILN_ASSIGN_OR_RETURN(auto x, to_double_vector(ctx.input(2 + i)));
      KILN_ASSIGN_OR_RETURN(auto g, to_double_vector(ctx.input(2 + a.n + i)));
      KILN_ASSIGN_OR_RETURN(auto v, to_double_vector(ctx.input(2 + 2 * a.n + i)));
      for (size_t k = 0; k < x.size(); ++k) {
        const double gr = norm_ * x[k] + g[k];
        v[k] = alpha_ * v[k] + beta * gr;
        x[k] -= nesterov_ ? a.r * (gr + alpha_ * v[k]) : a.r * v[k];
      }
      KILN_RETURN_IF_ERROR(write_like(ctx, i, ctx.input(2 + i), x));
      KILN_RETURN_IF_ERROR(write_like(ctx, a.n + i, ctx.input(2 + i), v));
    }
    return Status::ok();
  }

 private:
  double alpha_ = 0, beta_ = 0, norm_ = 0;
  bool nesterov_ = false;
};

}  // namespace

void register_training_ops(KernelRegistry& r) {
  const std::string d = "ai.onnx.preview.training";
  r.add({.domain = d, .op_type = "Adagrad", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<Adagrad>, .flags = 0});
  r.add({.domain = d, .op_type = "Adam", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<Adam>, .flags = 0});
  r.add({.domain = d, .op_type = "Momentum", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<Momentum>, .flags = 0});
  register_gradient_op(r);
}

}  // namespace kiln::kernels
