// Unary math: Abs, Neg, Sign, Sqrt, Reciprocal, Exp, Log, Erf, Floor, Ceil,
// Round and the trigonometric/hyperbolic functions. Each op is a small
// functor run by ew::UnaryKernel; float32 Exp, Sqrt and Erf use the
// vectorized loops of elementwise_simd.h.
#include <cmath>

#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/registry.h"

namespace kiln::kernels {
namespace {

using namespace ew;

constexpr DTypeSet kSignedNumeric = kFloatDTypes | kSignedIntDTypes;

struct AbsOp {
  static constexpr DTypeSet kTypes = kNumericDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    if constexpr (kIsInt<C> && std::is_signed_v<C>) {
      return x < 0 ? static_cast<C>(Wrap<C>{0} - static_cast<Wrap<C>>(x)) : x;  // INT_MIN wraps
    } else if constexpr (kIsInt<C>) {
      return x;
    } else {
      return std::fabs(x);
    }
  }
};

struct NegOp {
  static constexpr DTypeSet kTypes = kSignedNumeric;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    if constexpr (kIsInt<C>) {
      return static_cast<C>(Wrap<C>{0} - static_cast<Wrap<C>>(x));
    } else {
      return -x;
    }
  }
};

struct SignOp {
  static constexpr DTypeSet kTypes = kNumericDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    if constexpr (kIsInt<C> && std::is_unsigned_v<C>) {
      return x > 0 ? C{1} : C{0};
    } else if constexpr (kIsInt<C>) {
      return x > 0 ? C{1} : (x < 0 ? C{-1} : C{0});
    } else {
      return x > 0 ? C{1} : (x < 0 ? C{-1} : (x == 0 ? C{0} : x));  // NaN stays NaN
    }
  }
};

struct SqrtOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
  void f32(const float* x, float* y, int64_t n) const { simd::sqrt_f32(x, y, n); }
};

struct ReciprocalOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    return C{1} / x;
  }
};

struct ExpOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainMedium;
  template <class C>
  C operator()(C x) const {
    return std::exp(x);
  }
  void f32(const float* x, float* y, int64_t n) const { simd::exp_f32(x, y, n); }
};

struct LogOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainHeavy;
  template <class C>
  C operator()(C x) const {
    return std::log(x);
  }
};

struct ErfOp {
  static constexpr DTypeSet kTypes = kNumericDTypes;
  static constexpr int64_t kGrain = kGrainMedium;
  template <class C>
  C operator()(C x) const {
    if constexpr (kIsInt<C>) {
      return float_to_int<C>(std::erf(static_cast<double>(x)));
    } else {
      return std::erf(x);
    }
  }
  void f32(const float* x, float* y, int64_t n) const { simd::erf_f32(x, y, n); }
};

struct FloorOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    return std::floor(x);
  }
};

struct CeilOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    return std::ceil(x);
  }
};

// Round half to even: nearbyint in the default rounding mode.
struct RoundOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr int64_t kGrain = kGrainCheap;
  template <class C>
  C operator()(C x) const {
    return std::nearbyint(x);
  }
};

#define KILN_LIBM_UNARY_(Name, fn)                     \
  struct Name {                                        \
    static constexpr DTypeSet kTypes = kFloatDTypes;   \
    static constexpr int64_t kGrain = kGrainHeavy;     \
    template <class C>                                 \
    C operator()(C x) const {                          \
      return std::fn(x);                               \
    }                                                  \
  }
KILN_LIBM_UNARY_(SinOp, sin);
KILN_LIBM_UNARY_(CosOp, cos);
KILN_LIBM_UNARY_(TanOp, tan);
KILN_LIBM_UNARY_(AsinOp, asin);
KILN_LIBM_UNARY_(AcosOp, acos);
KILN_LIBM_UNARY_(AtanOp, atan);
KILN_LIBM_UNARY_(SinhOp, sinh);
KILN_LIBM_UNARY_(CoshOp, cosh);
KILN_LIBM_UNARY_(AsinhOp, asinh);
KILN_LIBM_UNARY_(AcoshOp, acosh);
KILN_LIBM_UNARY_(AtanhOp, atanh);
#undef KILN_LIBM_UNARY_

template <class Op>
void add_unary(KernelRegistry& r, const char* name, int since) {
  r.add({.domain = "", .op_type = name, .since_version = since, .until_version = 1000, .dtypes = Op::kTypes,
         .type_input = 0, .factory = make_kernel<UnaryKernel<Op>>, .flags = 0});
}

}  // namespace

void register_unary_ops(KernelRegistry& r) {
  add_unary<AbsOp>(r, "Abs", 1);
  add_unary<NegOp>(r, "Neg", 1);
  add_unary<SignOp>(r, "Sign", 9);
  add_unary<SqrtOp>(r, "Sqrt", 1);
  add_unary<ReciprocalOp>(r, "Reciprocal", 1);
  add_unary<ExpOp>(r, "Exp", 1);
  add_unary<LogOp>(r, "Log", 1);
  add_unary<ErfOp>(r, "Erf", 9);
  add_unary<FloorOp>(r, "Floor", 1);
  add_unary<CeilOp>(r, "Ceil", 1);
  add_unary<RoundOp>(r, "Round", 11);
  add_unary<SinOp>(r, "Sin", 7);
  add_unary<CosOp>(r, "Cos", 7);
  add_unary<TanOp>(r, "Tan", 7);
  add_unary<AsinOp>(r, "Asin", 7);
  add_unary<AcosOp>(r, "Acos", 7);
  add_unary<AtanOp>(r, "Atan", 7);
  add_unary<SinhOp>(r, "Sinh", 9);
  add_unary<CoshOp>(r, "Cosh", 9);
  add_unary<AsinhOp>(r, "Asinh", 9);
  add_unary<AcoshOp>(r, "Acosh", 9);
  add_unary<AtanhOp>(r, "Atanh", 9);
}

}  // namespace kiln::kernels
