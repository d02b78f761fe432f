// Activations: Relu, Sigmoid, Tanh, LeakyRelu, Elu, Selu, Celu,
// HardSigmoid, HardSwish, Softplus, Softsign, ThresholdedRelu, Shrink and
// Clip. Attributes are read once in init(); float32 Relu, LeakyRelu,
// Sigmoid, Tanh and Clip run the vectorized loops of elementwise_simd.h.
#include <cmath>
#include <limits>

#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/registry.h"

namespace kiln::kernels {
namespace {

using namespace ew;

struct ReluOp {
  static constexpr DTypeSet kTypes = kFloatDTypes | kSignedIntDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    return x < C{0} ? C{0} : x;
  }
  void f32(const float* x, float* y, int64_t n) const { simd::relu_f32(x, y, n); }
};

struct SigmoidOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainMedium;
  template <class C>
  C operator()(C x) const {
    // 1 / (1 + e^-x) for x >= 0; e^x / (1 + e^x) below keeps precision
    // where the result is tiny.
    if (x >= C{0}) return C{1} / (C{1} + std::exp(-x));
    const C e = std::exp(x);
    return e / (C{1} + e);
  }
  void f32(const float* x, float* y, int64_t n) const { simd::sigmoid_f32(x, y, n); }
};

struct TanhOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainMedium;
  template <class C>
  C operator()(C x) const {
    return std::tanh(x);
  }
  void f32(const float* x, float* y, int64_t n) const { simd::tanh_f32(x, y, n); }
};

struct LeakyReluOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  float alpha = 0.01f;
  Status init(const KernelInit& init) {
    alpha = init.attr_float("alpha", 0.01f);
    return Status::ok();
  }
  template <class C>
  C operator()(C x) const {
    return x < C{0} ? x * static_cast<C>(alpha) : x;
  }
  void f32(const float* x, float* y, int64_t n) const { simd::leaky_relu_f32(x, y, n, alpha); }
};

struct EluOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainHeavy;
  float alpha = 1.0f;
  Status init(const KernelInit& init) {
    alpha = init.attr_float("alpha", 1.0f);
    return Status::ok();
  }
  template <class C>
  C operator()(C x) const {
    return x < C{0} ? static_cast<C>(alpha) * std::expm1(x) : x;
  }
};

struct SeluOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainHeavy;
  float alpha = 1.67326319217681884765625f;
  float gamma = 1.05070102214813232421875f;
  Status init(const KernelInit& init) {
    alpha = init.attr_float("alpha", alpha);
    gamma = init.attr_float("gamma", gamma);
    return Status::ok();
  }
  template <class C>
  C operator()(C x) const {
    const C g = static_cast<C>(gamma);
    return x <= C{0} ? g * static_cast<C>(alpha) * std::expm1(x) : g * x;
  }
};

struct CeluOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainHeavy;
  float alpha = 1.0f;
  Status init(const KernelInit& init) {
    alpha = init.attr_float("alpha", 1.0f);
    if (alpha == 0.0f) return invalid_argument("attribute alpha must not be 0");
    return Status::ok();
  }
  template <class C>
  C operator()(C x) const {
    // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    const C a = static_cast<C>(alpha);
    const C neg = a * std::expm1(x / a);
    return (x > C{0} ? x : C{0}) + (neg < C{0} ? neg : C{0});
  }
};

struct HardSigmoidOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  float alpha = 0.2f, beta = 0.5f;
  Status init(const KernelInit& init) {
    alpha = init.attr_float("alpha", 0.2f);
    beta = init.attr_float("beta", 0.5f);
    return Status::ok();
  }
  template <class C>
  C operator()(C x) const {
    const C v = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return v < C{0} ? C{0} : (v > C{1} ? C{1} : v);
  }  void f32(const float* x, float* y, int64_t n) const { simd::hard_sigmoid_f32(x, y, n, alpha, beta); }
};

struct HardSwishOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    const C v = x * static_cast<C>(1.0 / 6.0) + static_cast<C>(0.5);
    return x * (v < C{0} ? C{0} : (v > C{1} ? C{1} : v));
  }  void f32(const float* x, float* y, int64_t n) const { simd::hard_swish_f32(x, y, n); }
};

struct SoftplusOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainHeavy;
  template <class C>
  C operator()(C x) const {
    // log(1 + e^x) without overflow: x + log1p(e^-x) for x > 0.
    return x > C{0} ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
};

struct SoftsignOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    return x / (C{1} + std::fabs(x));
  }
};

struct ThresholdedReluOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  float alpha = 1.0f;
  Status init(const KernelInit& init) {
    alpha = init.attr_float("alpha", 1.0f);
    return Status::ok();
  }
  template <class C>
  C operator()(C x) const {
    return x > static_cast<C>(alpha) ? x : C{0};
  }
};

struct ShrinkOp {
  static constexpr DTypeSet kTypes = kNumericDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  float lambd = 0.5f, bias = 0.0f;
  Status init(const KernelInit& init) {
    lambd = init.attr_float("lambd", 0.5f);
    bias = init.attr_float("bias", 0.0f);
    return Status::ok();
  }
  template <class C>
  C operator()(C x) const {
    if constexpr (kIsInt<C>) {
      const double v = static_cast<double>(x);
      if (v < -static_cast<double>(lambd)) return float_to_int<C>(v + bias);
      if (v > static_cast<double>(lambd)) return float_to_int<C>(v - bias);
      return C{0};
    } else {
      if (x < -static_cast<C>(lambd)) return x + static_cast<C>(bias);
      if (x > static_cast<C>(lambd)) return x - static_cast<C>(bias);
      return C{0};
    }
  }
};

// ---- Clip ------------------------------------------------------------------

// Opsets 1-10 take min and max as float attributes; 11 on as optional
// scalar inputs 1 and 2 of the input's dtype. When min > max every output is
// max (the spec's rule, and what min(max(x, lo), hi) gives).
// Reads Clip's optional min/max input i (a scalar of x's dtype) into *out.
template <class T>
Status read_clip_bound(const KernelContext& ctx, size_t i, const Tensor& x, Compute<T>* out) {
  if (!ctx.has_input(i)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(const Tensor* t, tensor_input(ctx, i));
  KILN_RETURN_IF_ERROR(check_same_dtype(x, 0, *t, i));
  if (t->numel() == 0) return Status::ok();  // an empty tensor reads as absent
  if (t->numel() != 1) {
    return invalid_argument("input ", i, " (", i == 1 ? "min" : "max", ") has shape ",
                            t->shape().to_string(), ", expected a scalar");
  }
  *out = static_cast<Compute<T>>(t->data<T>()[0]);
  return Status::ok();
}

class ClipKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    use_inputs_ = init.opset >= 11;
    attr_min_ = init.attr_float("min", -std::numeric_limits<float>::infinity());
    attr_max_ = init.attr_float("max", std::numeric_limits<float>::infinity());
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    const DType dt = x->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr (kIsNumeric<T>) {
        using C = Compute<T>;
        C lo, hi;
        if (use_inputs_) {
          if constexpr (kIsFloat<T>) {  // absent bounds leave +-inf alone
            lo = -std::numeric_limits<C>::infinity();
            hi = std::numeric_limits<C>::infinity();
          } else {
            lo = std::numeric_limits<C>::lowest();
            hi = std::numeric_limits<C>::max();
          }
          KILN_RETURN_IF_ERROR(read_clip_bound<T>(ctx, 1, *x, &lo));
          KILN_RETURN_IF_ERROR(read_clip_bound<T>(ctx, 2, *x, &hi));
        } else {
          if constexpr (kIsInt<T>) {
            lo = float_to_int<C>(attr_min_);
            hi = float_to_int<C>(attr_max_);
          } else {
            lo = static_cast<C>(attr_min_);
            hi = static_cast<C>(attr_max_);
          }
        }
        KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, x->shape()));
        const T* px = x->data<T>();
        T* py = y->data<T>();
        if constexpr (std::is_same_v<T, float>) {
          parallel_for(ctx.pool(), x->numel(), kGrainCheap,
                       [&](int64_t i0, int64_t i1) { simd::clip_f32(px + i0, py + i0, i1 - i0, lo, hi); });
        } else {
          unary_map(ctx.pool(), px, py, x->numel(), kGrainCheap, [lo, hi](C v) {
            v = v < lo ? lo : v;
            return v > hi ? hi : v;
          });
        }
        return Status::ok();
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  bool use_inputs_ = true;
  float attr_min_ = 0, attr_max_ = 0;
};

template <class Op>
void add_unary(KernelRegistry& r, const char* name, int since) {
  r.add({.domain = "", .op_type = name, .since_version = since, .until_version = 1000, .dtypes = Op::kTypes,
         .type_input = 0, .factory = make_kernel<UnaryKernel<Op>>, .flags = 0});
}

}  // namespace

void register_activation_ops(KernelRegistry& r) {
  add_unary<ReluOp>(r, "Relu", 1);
  add_unary<SigmoidOp>(r, "Sigmoid", 1);
  add_unary<TanhOp>(r, "Tanh", 1);
  add_unary<LeakyReluOp>(r, "LeakyRelu", 1);
  add_unary<EluOp>(r, "Elu", 1);
  add_unary<SeluOp>(r, "Selu", 1);
  add_unary<CeluOp>(r, "Celu", 12);
  add_unary<HardSigmoidOp>(r, "HardSigmoid", 1);
  add_unary<HardSwishOp>(r, "HardSwish", 14);
  add_unary<SoftplusOp>(r, "Softplus", 1);
  add_unary<SoftsignOp>(r, "Softsign", 1);
  add_unary<ThresholdedReluOp>(r, "ThresholdedRelu", 10);
  add_unary<ShrinkOp>(r, "Shrink", 9);
  r.add({.domain = "", .op_type = "Clip", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<ClipKernel>, .flags = 0});
}

}  // namespace kiln::kernels
