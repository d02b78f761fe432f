// Binary arithmetic with numpy broadcasting: Add, Sub, Mul, Div, Pow, Mod,
// BitShift, PRelu. Opsets before 7 broadcast through the `broadcast` and
// `axis` attributes instead (LegacyBroadcast).
//
// Integer arithmetic wraps (two's complement), as ONNX Runtime does. Integer
// division or modulo by zero is reported as an error instead of trapping.
#include <cmath>
#include <limits>

#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/registry.h"
#include "kernels/static_call.h"

namespace kiln::kernels {
namespace {

using namespace ew;

// ---- Add, Sub, Mul, Div ----------------------------------------------------

struct AddOp {
  static constexpr simd::Arith kSimd = simd::Arith::kAdd;
  static constexpr bool kDivides = false;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (kIsInt<C>) {
      return static_cast<C>(static_cast<Wrap<C>>(a) + static_cast<Wrap<C>>(b));
    } else {
      return a + b;
    }
  }
};

struct SubOp {
  static constexpr simd::Arith kSimd = simd::Arith::kSub;
  static constexpr bool kDivides = false;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (kIsInt<C>) {
      return static_cast<C>(static_cast<Wrap<C>>(a) - static_cast<Wrap<C>>(b));
    } else {
      return a - b;
    }
  }
};

struct MulOp {
  static constexpr simd::Arith kSimd = simd::Arith::kMul;
  static constexpr bool kDivides = false;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (kIsInt<C>) {
      return static_cast<C>(static_cast<Wrap<C>>(a) * static_cast<Wrap<C>>(b));
    } else {
      return a * b;
    }
  }
};

struct DivOp {
  static constexpr simd::Arith kSimd = simd::Arith::kDiv;
  static constexpr bool kDivides = true;
  // Integer division truncates toward zero (C semantics, as the ONNX tests
  // expect). Zero divisors are rejected before the loop; -1 is special-cased
  // because INT_MIN / -1 traps.
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (kIsInt<C>) {
      if (b == 0) return C{0};
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return static_cast<C>(Wrap<C>{0} - static_cast<Wrap<C>>(a));
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};

/// Returns an error if the integer tensor `b` (input `index`) holds a zero.
template <class T>
Status check_no_zero(const Tensor& b, size_t index) {
  const T* p = b.data<T>();
  const int64_t n = b.numel();
  bool zero = false;
  for (int64_t i = 0; i < n; ++i) zero |= p[i] == 0;
  if (zero) return invalid_argument("input ", index, " holds an integer zero divisor");
  return Status::ok();
}

struct ArithF32Run {
  simd::Arith op;
  void operator()(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) const {
    simd::arith_f32(op, a, sa, b, sb, o, n);
  }
};

/// Add/Sub/Mul/Div on 16-bit floats: blocks converted to float32, the
/// float32 loop, and back (the same roundings as element by element).
template <class H>
struct HalfArithRun {
  simd::Arith op;
  void operator()(const H* a, int64_t sa, const H* b, int64_t sb, H* o, int64_t n) const {
    float ba[kHalfBlock], bb[kHalfBlock], bo[kHalfBlock];
    if (sa == 0) to_f32(a, ba, 1);
    if (sb == 0) to_f32(b, bb, 1);
    for (int64_t i = 0; i < n; i += kHalfBlock) {
      const int64_t m = std::min(kHalfBlock, n - i);
      if (sa != 0) to_f32(a + i, ba, m);
      if (sb != 0) to_f32(b + i, bb, m);
      simd::arith_f32(op, ba, sa, bb, sb, bo, m);
      from_f32(bo, o + i, m);
    }
  }
};

/// Applies legacy (opset < 7) broadcasting to input b: returns b itself or a
/// view of it reshaped to A's rank in `storage`.
Result<const Tensor*> legacy_b(const LegacyBroadcast& legacy, const Tensor& a,
                               const Tensor& b, Tensor* storage) {
  if (!legacy.active || !legacy.broadcast) return &b;
  KILN_ASSIGN_OR_RETURN(Shape s, legacy.b_shape(a.shape(), b.shape()));
  if (s == b.shape()) return &b;
  *storage = b.reshaped(s);
  return static_cast<const Tensor*>(storage);
}

// Static calls of float32 Add/Sub/Mul/Div where each input has every
// output element or one (binary_into_run's flat case): the loop, without
// the KernelContext (kernels/static_call.h).
struct ArithStaticParams {
  simd::Arith op;
  int64_t n, step_a, step_b;
};

void arith_static_serial(const StaticCall& call, const StaticArgs& args) {
  const auto& p = call.params_as<ArithStaticParams>();
  simd::arith_f32(p.op, static_cast<const float*>(args.inputs[0]), p.step_a, static_cast<const float*>(args.inputs[1]),
                  p.step_b, static_cast<float*>(args.outputs[0]), p.n);
}

void arith_static_parallel(const StaticCall& call, const StaticArgs& args) {
  const auto& p = call.params_as<ArithStaticParams>();
  const auto* a = static_cast<const float*>(args.inputs[0]);
  const auto* b = static_cast<const float*>(args.inputs[1]);
  auto* o = static_cast<float*>(args.outputs[0]);
  parallel_for(args.pool, p.n, kGrainCheap, [&](int64_t i0, int64_t i1) {
    simd::arith_f32(p.op, a + i0 * p.step_a, p.step_a, b + i0 * p.step_b, p.step_b, o + i0, i1 - i0);
  });
}

/// Binds a float32 arithmetic op to `sig` when compute() would take the flat
/// loop and produce exactly sig's output.
bool bind_arith_static(simd::Arith op, const StaticSignature& sig, StaticCall* out) {
  if (sig.inputs.size() != 2 || sig.outputs.size() != 1) return false;
  const TensorSig &a = sig.inputs[0], &b = sig.inputs[1], &o = sig.outputs[0];
  if (a.dtype != DType::kFloat32 || b.dtype != DType::kFloat32 || o.dtype != DType::kFloat32) return false;
  if (a.shape != b.shape) {
    Result<Shape> s = broadcast_shapes(a.shape, b.shape);
    if (!s.ok() || *s != o.shape) return false;
  } else if (a.shape != o.shape) {
    return false;
  }
  const int64_t n = o.shape.numel(), na = a.shape.numel(), nb = b.shape.numel();
  if (n <= 0 || (na != n && na != 1) || (nb != n && nb != 1)) return false;
  out->set_params(ArithStaticParams{op, n, na == n ? 1 : 0, nb == n ? 1 : 0});
  // Work that parallel_for would run inline never touches the pool.
  out->fn = n <= kGrainCheap ? arith_static_serial : arith_static_parallel;
  return true;
}

template <class Op>
class ArithKernel final : public Kernel, public StaticCallable {
 public:
  bool bind_static(const StaticSignature& sig, StaticCall* out) const override {
    return !legacy_.active && bind_arith_static(Op::kSimd, sig, out);
  }

  Status init(const KernelInit& init) {
    legacy_.init(init);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* a, tensor_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(const Tensor* b, tensor_input(ctx, 1));
    KILN_RETURN_IF_ERROR(check_same_dtype(*a, 0, *b, 1));
    Tensor b_view;
    if (legacy_.active) {
      KILN_ASSIGN_OR_RETURN(b, legacy_b(legacy_, *a, *b, &b_view));
    }
    const DType dt = a->dtype();
    if (dt == DType::kFloat32) {  // the hot case, ahead of the dtype switch
      return binary_apply_run<float, float, float>(ctx, *a, *b, dt, kGrainCheap, ArithF32Run{Op::kSimd});
    }
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float>) {
        return binary_apply_run<float, float, float>(ctx, *a, *b, dt, kGrainCheap, ArithF32Run{Op::kSimd});
      } else if constexpr (kIsHalf<T>) {
        return binary_apply_run<T, T, T>(ctx, *a, *b, dt, kGrainCheap, HalfArithRun<T>{Op::kSimd});
      } else if constexpr (kIsNumeric<T>) {
        if constexpr (Op::kDivides && kIsInt<T>) KILN_RETURN_IF_ERROR(check_no_zero<T>(*b, 1));
        return binary_apply<T, T, T>(ctx, *a, *b, dt, kGrainCheap, Op{});
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  LegacyBroadcast legacy_;
};

// ---- Pow -------------------------------------------------------------------

template <class I, class E>
I int_pow(I base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1) return I{1};
      if constexpr (std::is_signed_v<I>) {
        if (base == -1) return (exp & 1) ? I{-1} : I{1};
      }
      return I{0};  // |base| > 1: the real result is in (-1, 1), truncated
    }
  }
  Wrap<I> result = 1, b = static_cast<Wrap<I>>(base);
  auto e = static_cast<std::make_unsigned_t<E>>(exp);
  while (e != 0) {
    if (e & 1u) result = static_cast<Wrap<I>>(result * b);
    b = static_cast<Wrap<I>>(b * b);
    e >>= 1;
  }
  return static_cast<I>(result);
}

// Pow of compute types: the result has the base's type. Integer bases with
// integer exponents multiply exactly (wrapping); anything with a float goes
// through pow() and converts back.
struct PowOp {
  template <class CT, class CE>
  CT operator()(CT a, CE b) const {
    if constexpr (kIsInt<CT> && kIsInt<CE>) {
      return int_pow(a, b);
    } else if constexpr (std::is_same_v<CT, float> && std::is_same_v<CE, float>) {
      return std::pow(a, b);
    } else {
      const double r = std::pow(static_cast<double>(a), static_cast<double>(b));
      if constexpr (kIsInt<CT>) {
        return float_to_int<CT>(r);
      } else {
        return static_cast<CT>(r);
      }
    }
  }
};

/// Fast paths for a float32 base with one scalar exponent `e` (the exponent
/// input itself is not read again).
struct PowScalarF32Run {
  float e;
  template <class E>
  void operator()(const float* a, int64_t sa, const E* b, int64_t sb, float* o, int64_t n) const {
    (void)b;
    (void)sb;
    if (sa == 0) {
      const float v = std::pow(a[0], e);
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    } else if (e == 2.0f) {
      simd::square_f32(a, o, n);
    } else if (e == 1.0f) {
      for (int64_t i = 0; i < n; ++i) o[i] = a[i];
    } else if (e == 0.5f) {
      simd::pow_half_f32(a, o, n);
    } else if (e == 3.0f) {
      for (int64_t i = 0; i < n; ++i) {
        const double x = a[i];
        o[i] = static_cast<float>(x * x * x);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = std::pow(a[i], e);
    }
  }
};

class PowKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    legacy_.init(init);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* a, tensor_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(const Tensor* b, tensor_input(ctx, 1));
    Tensor b_view;
    KILN_ASSIGN_OR_RETURN(b, legacy_b(legacy_, *a, *b, &b_view));
    const DType dt = a->dtype();
    return visit_dtype(dt, [&](auto base_tag) -> Status {
      using T = decltype(base_tag);
      if constexpr (kIsNumeric<T>) {
        return visit_dtype(b->dtype(), [&](auto exp_tag) -> Status {
          using E = decltype(exp_tag);
          if constexpr (kIsNumeric<E>) {
            if constexpr (std::is_same_v<T, float>) {
              // One exponent for all: the float32 fast paths. An exponent of
              // another type goes there only for values where pow through
              // double rounds the same (0.5, 1, 2, 3).
              if (b->numel() == 1 && b->rank() <= a->rank()) {
                const double e = static_cast<double>(static_cast<Compute<E>>(b->data<E>()[0]));
                if (std::is_same_v<E, float> || e == 0.5 || e == 1.0 || e == 2.0 || e == 3.0) {
                  return binary_apply_run<float, E, float>(ctx, *a, *b, dt, kGrainMedium,
                                                           PowScalarF32Run{static_cast<float>(e)});
                }
              }
            }
            return binary_apply<T, E, T>(ctx, *a, *b, dt, kGrainHeavy, PowOp{});
          } else {
            return unsupported_dtype(1, b->dtype());
          }
        });
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  LegacyBroadcast legacy_;
};

// ---- Mod -------------------------------------------------------------------

// fmod=0: integer remainder with the divisor's sign (Python's %).
struct ModIntOp {
  template <class C>
  C operator()(C a, C b) const {
    if (b == 0) return C{0};
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return C{0};
      C r = static_cast<C>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<C>(r + b);
      return r;
    } else {
      return static_cast<C>(a % b);
    }
  }
};

// fmod=1: the remainder with the dividend's sign (C's fmod and %).
struct FmodOp {
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (kIsInt<C>) {
      if (b == 0) return C{0};
      if constexpr (std::is_signed_v<C>) {
        if (b == -1) return C{0};
      }
      return static_cast<C>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};

class ModKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const int64_t f = init.attr_int("fmod", 0);
    if (f != 0 && f != 1) return invalid_argument("attribute fmod is ", f, ", expected 0 or 1");
    fmod_ = f == 1;
    const DType dt = init.input_dtype(0);
    if (!fmod_ && dtype_is_float(dt)) {
      return invalid_argument("fmod=0 is not defined for ", dtype_name(dt),
                              " inputs; floating-point Mod requires fmod=1");
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* a, tensor_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(const Tensor* b, tensor_input(ctx, 1));
    KILN_RETURN_IF_ERROR(check_same_dtype(*a, 0, *b, 1));
    const DType dt = a->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr (kIsInt<T>) {
        KILN_RETURN_IF_ERROR(check_no_zero<T>(*b, 1));
        if (fmod_) return binary_apply<T, T, T>(ctx, *a, *b, dt, kGrainMedium, FmodOp{});
        return binary_apply<T, T, T>(ctx, *a, *b, dt, kGrainMedium, ModIntOp{});
      } else if constexpr (kIsFloat<T>) {
        if (!fmod_) {
          return invalid_argument("fmod=0 is not defined for ", dtype_name(dt),
                                  " inputs; floating-point Mod requires fmod=1");
        }
        return binary_apply<T, T, T>(ctx, *a, *b, dt, kGrainHeavy, FmodOp{});
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  bool fmod_ = false;
};

// ---- BitShift --------------------------------------------------------------

template <bool kLeft>
struct ShiftOp {
  template <class C>
  C operator()(C a, C b) const {
    // Shifting by the bit width or more is undefined in C++; the bits all
    // shift out, so the result is 0.
    if (b >= static_cast<C>(sizeof(C) * 8)) return C{0};
    if constexpr (kLeft) {
      return static_cast<C>(static_cast<Wrap<C>>(a) << b);
    } else {
      return static_cast<C>(a >> b);
    }
  }
};

class BitShiftKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const std::string dir = init.attr_string("direction", "");
    if (dir == "LEFT") {
      left_ = true;
    } else if (dir == "RIGHT") {
      left_ = false;
    } else {
      return invalid_argument("attribute direction is '", dir, "', expected LEFT or RIGHT");
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* a, tensor_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(const Tensor* b, tensor_input(ctx, 1));
    KILN_RETURN_IF_ERROR(check_same_dtype(*a, 0, *b, 1));
    const DType dt = a->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr (kIsInt<T> && std::is_unsigned_v<T>) {
        if (left_) return binary_apply<T, T, T>(ctx, *a, *b, dt, kGrainCheap, ShiftOp<true>{});
        return binary_apply<T, T, T>(ctx, *a, *b, dt, kGrainCheap, ShiftOp<false>{});
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  bool left_ = true;
};

// ---- PRelu -----------------------------------------------------------------

struct PReluOp {
  template <class C>
  C operator()(C x, C slope) const {
    if constexpr (kIsInt<C>) {
      return x < 0 ? static_cast<C>(static_cast<Wrap<C>>(x) * static_cast<Wrap<C>>(slope)) : x;
    } else {
      return x < 0 ? x * slope : x;
    }
  }
};

class PReluKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    legacy_ = init.opset < 7;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(const Tensor* slope, tensor_input(ctx, 1));
    KILN_RETURN_IF_ERROR(check_same_dtype(*x, 0, *slope, 1));
    Tensor view;
    // Before opset 7 a 1-D slope of X.shape[1] values is per channel (as
    // PyTorch exported it): read it as [C, 1, ..., 1].
    if (legacy_ && slope->rank() == 1 && x->rank() >= 2 && slope->dim(0) == x->dim(1) && slope->dim(0) != 1) {
      Shape s;
      s.resize(x->rank() - 1, 1);
      s[0] = slope->dim(0);
      view = slope->reshaped(s);
      slope = &view;
    }
    Result<Shape> out = broadcast_shapes(x->shape(), slope->shape());
    if (!out.ok() || *out != x->shape()) {
      return invalid_argument("input 1 (slope) has shape ", slope->shape().to_string(),
                              ", which does not broadcast to input 0 of shape ", x->shape().to_string());
    }
    const DType dt = x->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr (kIsNumeric<T>) {
        return binary_apply<T, T, T>(ctx, *x, *slope, dt, kGrainCheap, PReluOp{});
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  bool legacy_ = false;
};

}  // namespace

void register_binary_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Add", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<ArithKernel<AddOp>>, .flags = 0});
  r.add({.domain = "", .op_type = "Sub", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<ArithKernel<SubOp>>, .flags = 0});
  r.add({.domain = "", .op_type = "Mul", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<ArithKernel<MulOp>>, .flags = 0});
  r.add({.domain = "", .op_type = "Div", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<ArithKernel<DivOp>>, .flags = 0});
  r.add({.domain = "", .op_type = "Pow", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<PowKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Mod", .since_version = 10, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<ModKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "BitShift", .since_version = 11, .until_version = 1000, .dtypes = kUnsignedIntDTypes,
         .type_input = 0, .factory = make_kernel<BitShiftKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "PRelu", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<PReluKernel>, .flags = 0});
}

}  // namespace kiln::kernels
