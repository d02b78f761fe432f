// Shared machinery of the element-wise kernel families (binary, unary,
// activation, compare/logic, variadic, cast): dtype traits, the contiguous
// run loops, numpy broadcasting drivers and the legacy (opset < 7)
// broadcast attribute.
//
// Every driver computes into an output that the caller allocated through the
// KernelContext; none allocates tensors. Loops over contiguous memory are
// written so the compiler vectorizes them; float32 hot paths go to
// elementwise_simd.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/static_call.h"
#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels::ew {

// ---- dtype traits ----------------------------------------------------------

template <class T>
inline constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsHalf<T>;
template <class T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T>
inline constexpr bool kIsNumeric = kIsFloat<T> || kIsInt<T>;

/// The type element values are handed to ops as: float for the 16-bit
/// floats, a const reference for strings (no copies), else T.
template <class T>
using Compute = std::conditional_t<kIsHalf<T>, float,
                                   std::conditional_t<std::is_same_v<T, std::string>, const std::string&, T>>;

/// Unsigned type wide enough that arithmetic on it never promotes to int
/// (integer ops wrap, as in ONNX Runtime, instead of signed overflow UB).
template <class T>
using Wrap = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;

inline constexpr DTypeSet kSignedIntDTypes =
    dtype_set(DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64);
inline constexpr DTypeSet kUnsignedIntDTypes =
    dtype_set(DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64);
inline constexpr DTypeSet kBoolDType = dtype_set(DType::kBool);
inline constexpr DTypeSet kStringDType = dtype_set(DType::kString);

// Parallel grain (elements per chunk) by cost per element: memory-bound
// arithmetic, polynomial approximations, libm calls.
inline constexpr int64_t kGrainCheap = int64_t{1} << 16;
inline constexpr int64_t kGrainMedium = int64_t{1} << 14;
inline constexpr int64_t kGrainHeavy = int64_t{1} << 12;

/// Float to integer conversion with defined results everywhere: NaN gives 0,
/// values are truncated toward zero to int64 (saturating) and then wrapped
/// to I, as numpy's astype does on x86 for in-range values (-1.0 -> 255 for
/// uint8).
template <class I>
inline I float_to_int(double v) {
  if (v != v) return I{0};
  if constexpr (std::is_same_v<I, uint64_t>) {
    if (v >= 9223372036854775808.0) return v >= 18446744073709551616.0 ? ~uint64_t{0} : static_cast<uint64_t>(v);
  }
  int64_t i;
  if (v <= -9223372036854775808.0) {
    i = INT64_MIN;
  } else if (v >= 9223372036854775808.0) {
    i = INT64_MAX;
  } else {
    i = static_cast<int64_t>(v);
  }
  return static_cast<I>(i);
}

// ---- 16-bit floats through float32 blocks ---------------------------------

/// Elements per stack block when 16-bit float data is computed in float32.
inline constexpr int64_t kHalfBlock = 512;

inline void to_f32(const Float16* x, float* y, int64_t n) {
  simd::f16_to_f32(reinterpret_cast<const uint16_t*>(x), y, n);
}
inline void to_f32(const BFloat16* x, float* y, int64_t n) {
  simd::bf16_to_f32(reinterpret_cast<const uint16_t*>(x), y, n);
}
inline void from_f32(const float* x, Float16* y, int64_t n) {
  simd::f32_to_f16(x, reinterpret_cast<uint16_t*>(y), n);
}
inline void from_f32(const float* x, BFloat16* y, int64_t n) {
  simd::f32_to_bf16(x, reinterpret_cast<uint16_t*>(y), n);
}

// ---- contiguous runs -------------------------------------------------------

/// o[i] = op(a[i*sa], b[i*sb]) for i < n, where sa and sb are 0 or 1. op
/// gets Compute<> values and its result converts to TO.
template <class TA, class TB, class TO, class Op>
inline void binary_run(const TA* a, int64_t sa, const TB* b, int64_t sb, TO* o, int64_t n, const Op& op) {
  using CA = Compute<TA>;
  using CB = Compute<TB>;
  if (sa != 0 && sb != 0) {
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<TO>(op(static_cast<CA>(a[i]), static_cast<CB>(b[i])));
  } else if (sa != 0) {
    const CB bv = static_cast<CB>(b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<TO>(op(static_cast<CA>(a[i]), bv));
  } else if (sb != 0) {
    const CA av = static_cast<CA>(a[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<TO>(op(av, static_cast<CB>(b[i])));
  } else {
    const TO v = static_cast<TO>(op(static_cast<CA>(a[0]), static_cast<CB>(b[0])));
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

/// Walks the runs of a BroadcastPlan from run r0 on, keeping the input
/// offsets incrementally (no division per run).
class PlanCursor {
 public:
  PlanCursor(const BroadcastPlan& plan, int64_t r0) : plan_(plan), idx_(plan.outer_dims.size(), 0) {
    int64_t r = r0;
    for (size_t i = idx_.size(); i-- > 0;) {
      idx_[i] = r % plan.outer_dims[i];
      r /= plan.outer_dims[i];
      off_a_ += idx_[i] * plan.outer_a[i];
      off_b_ += idx_[i] * plan.outer_b[i];
    }
  }
  int64_t off_a() const { return off_a_; }
  int64_t off_b() const { return off_b_; }
  void next() {
    for (size_t i = idx_.size(); i-- > 0;) {
      off_a_ += plan_.outer_a[i];
      off_b_ += plan_.outer_b[i];
      if (++idx_[i] < plan_.outer_dims[i]) return;
      off_a_ -= idx_[i] * plan_.outer_a[i];
      off_b_ -= idx_[i] * plan_.outer_b[i];
      idx_[i] = 0;
    }
  }

 private:
  const BroadcastPlan& plan_;
  std::vector<int64_t> idx_;
  int64_t off_a_ = 0, off_b_ = 0;
};

/// A run function: (a, step_a, b, step_b, out, n). The default one is
/// binary_run with an op; kernels with SIMD paths pass their own.
template <class TA, class TB, class TO, class Op>
struct DefaultRun {
  const Op& op;
  void operator()(const TA* a, int64_t sa, const TB* b, int64_t sb, TO* o, int64_t n) const {
    binary_run(a, sa, b, sb, o, n, op);
  }
};

/// Fills `out` (already allocated with shape broadcast(a, b)) by calling
/// run(...) over contiguous runs. When each input has either every output
/// element or just one, it is read flat (broadcasting never adds elements,
/// so an input with the output's numel has the output's layout): one
/// (parallel) loop. Anything else goes through a broadcast plan.
template <class TA, class TB, class TO, class Run>
Status binary_into_run(ThreadPool* pool, const TA* pa, const Shape& sa, const TB* pb, const Shape& sb, TO* po,
                       const Shape& so, int64_t grain, const Run& run) {
  const int64_t n = so.numel();
  if (n == 0) return Status::ok();
  const int64_t na = sa.numel(), nb = sb.numel();
  if ((na == n || na == 1) && (nb == n || nb == 1)) {
    const int64_t step_a = na == n ? 1 : 0, step_b = nb == n ? 1 : 0;
    parallel_for(pool, n, grain, [&](int64_t i0, int64_t i1) {
      run(pa + i0 * step_a, step_a, pb + i0 * step_b, step_b, po + i0, i1 - i0);
    });
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(BroadcastPlan plan, make_broadcast_plan(sa, sb));
  if (plan.out != so) return internal_error("broadcast of ", sa.to_string(), " and ", sb.to_string(), " is not ", so.to_string());
  const int64_t inner = plan.inner;
  const int64_t runs = plan.num_runs();
  const int64_t run_grain = std::max<int64_t>(1, grain / std::max<int64_t>(inner, 1));
  parallel_for(pool, runs, run_grain, [&](int64_t r0, int64_t r1) {
    PlanCursor cur(plan, r0);
    for (int64_t r = r0; r < r1; ++r, cur.next()) {
      run(pa + cur.off_a(), plan.step_a, pb + cur.off_b(), plan.step_b, po + r * inner, inner);
    }
  });
  return Status::ok();
}

/// binary_into_run with the default run loop of `op`.
template <class TA, class TB, class TO, class Op>
Status binary_into(ThreadPool* pool, const Tensor& a, const Tensor& b, Tensor* out, int64_t grain, const Op& op) {
  return binary_into_run(pool, a.data<TA>(), a.shape(), b.data<TB>(), b.shape(), out->data<TO>(), out->shape(),
                         grain, DefaultRun<TA, TB, TO, Op>{op});
}

/// Broadcasts a and b, allocates output 0 as `out_dtype` and fills it with
/// a run function (see DefaultRun).
template <class TA, class TB, class TO, class Run>
Status binary_apply_run(KernelContext& ctx, const Tensor& a, const Tensor& b, DType out_dtype, int64_t grain,
                        const Run& run) {
  const Shape* shape = &a.shape();
  Shape broadcast;
  if (a.shape() != b.shape()) {
    KILN_ASSIGN_OR_RETURN(broadcast, broadcast_inputs(a.shape(), 0, b.shape(), 1));
    shape = &broadcast;
  }
  KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, out_dtype, *shape));
  return binary_into_run(ctx.pool(), a.data<TA>(), a.shape(), b.data<TB>(), b.shape(), out->data<TO>(),
                         out->shape(), grain, run);
}

/// Broadcasts a and b, allocates output 0 as `out_dtype` and fills it with
/// op applied element-wise.
template <class TA, class TB, class TO, class Op>
Status binary_apply(KernelContext& ctx, const Tensor& a, const Tensor& b, DType out_dtype, int64_t grain,
                    const Op& op) {
  return binary_apply_run<TA, TB, TO>(ctx, a, b, out_dtype, grain, DefaultRun<TA, TB, TO, Op>{op});
}

/// y[i] = op(x[i]) over a flat tensor, in parallel chunks.
template <class TI, class TO, class Op>
void unary_map(ThreadPool* pool, const TI* x, TO* y, int64_t n, int64_t grain, const Op& op) {
  using C = Compute<TI>;
  parallel_for(pool, n, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = static_cast<TO>(op(static_cast<C>(x[i])));
  });
}

/// The DTypeSet bit of a C++ element type (0 for types Kiln has no dtype for).
template <class T>
constexpr DTypeSet bit_of() {
  if constexpr (requires { DTypeOf<T>::value; }) {
    return dtype_bit(DTypeOf<T>::value);
  } else {
    return 0;
  }
}

/// A one-input, one-output kernel whose output has the input's dtype and
/// shape. Op provides:
///   static constexpr DTypeSet kTypes;     accepted dtypes
///   static constexpr int64_t kGrain;      parallel grain
///   template <class C> C operator()(C x) const;   on Compute<T> values
/// and optionally `Status init(const KernelInit&)` (attributes) and
/// `void f32(const float* x, float* y, int64_t n) const` (a float32 loop).
/// Ops with a vectorized float32 loop `f32(const float* x, float* y, int64_t n)`.
template <class Op>
concept HasF32Loop = requires(const Op& o, const float* x, float* y, int64_t n) { o.f32(x, y, n); };
/// Calls o.f32 through a template parameter `Dep`, so that inside a generic
/// lambda the call stays dependent (clang 14 otherwise looks f32 up even in a
/// discarded `if constexpr` branch).
template <class Dep, class Op>
inline void call_f32(const Op& o, const float* x, float* y, int64_t n) {
  o.f32(x, y, n);
}

template <class Op>
class UnaryKernel final : public Kernel, public StaticCallable {
 public:
  /// Static calls of the float32 loop (kernels/static_call.h): same shape in
  /// and out.
  bool bind_static(const StaticSignature& sig, StaticCall* out) const override {
    if constexpr (HasF32Loop<Op> && (Op::kTypes & bit_of<float>()) != 0) {
      if (sig.inputs.size() != 1 || sig.outputs.size() != 1) return false;
      const TensorSig &x = sig.inputs[0], &y = sig.outputs[0];
      if (x.dtype != DType::kFloat32 || y.dtype != DType::kFloat32 || x.shape != y.shape) return false;
      const int64_t n = x.shape.numel();
      if (n <= 0) return false;
      out->set_params(StaticParams{this, n});
      // Work that parallel_for would run inline never touches the pool.
      out->fn = n <= Op::kGrain ? &static_serial<float> : &static_parallel<float>;
      return true;
    } else {
      (void)sig;
      (void)out;
      return false;
    }
  }

  Status init(const KernelInit& init) {
    if constexpr (requires(Op& o) { o.init(init); }) {
      return op_.init(init);
    } else {
      (void)init;
      return Status::ok();
    }
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    const DType dt = x->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr ((Op::kTypes & bit_of<T>()) != 0) {
        KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, x->shape()));
        const T* px = x->data<T>();
        T* py = y->data<T>();
        const int64_t n = x->numel();
        if constexpr (std::is_same_v<T, float> && HasF32Loop<Op>) {
          parallel_for(ctx.pool(), n, Op::kGrain, [&](int64_t i0, int64_t i1) { call_f32<T>(op_, px + i0, py + i0, i1 - i0); });
        } else if constexpr (kIsHalf<T> && HasF32Loop<Op>) {
          // 16-bit floats: convert a block, run the float32 loop, convert back.
          parallel_for(ctx.pool(), n, Op::kGrain, [&](int64_t i0, int64_t i1) {
            float buf[kHalfBlock];
            for (int64_t i = i0; i < i1; i += kHalfBlock) {
              const int64_t m = std::min(kHalfBlock, i1 - i);
              to_f32(px + i, buf, m);
              call_f32<T>(op_, buf, buf, m);
              from_f32(buf, py + i, m);
            }
          });
        } else {
          unary_map(ctx.pool(), px, py, n, Op::kGrain, op_);
        }
        return Status::ok();
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  struct StaticParams {
    const UnaryKernel* kernel;
    int64_t n;
  };
  template <class Dep>
  static void static_serial(const StaticCall& call, const StaticArgs& args) {
    const auto& p = call.params_as<StaticParams>();
    call_f32<Dep>(p.kernel->op_, static_cast<const float*>(args.inputs[0]), static_cast<float*>(args.outputs[0]), p.n);
  }
  template <class Dep>
  static void static_parallel(const StaticCall& call, const StaticArgs& args) {
    const auto& p = call.params_as<StaticParams>();
    const auto* x = static_cast<const float*>(args.inputs[0]);
    auto* y = static_cast<float*>(args.outputs[0]);
    parallel_for(args.pool, p.n, Op::kGrain,
                 [&](int64_t i0, int64_t i1) { call_f32<Dep>(p.kernel->op_, x + i0, y + i0, i1 - i0); });
  }

  Op op_;
};

// ---- n-ary broadcasting ----------------------------------------------------

/// Broadcasting of several inputs to one output, with adjacent dims merged
/// where every input walks them the same way. The last dim is the inner run;
/// an input's stride on it is 0 or 1.
struct NaryPlan {
  Shape out;
  std::vector<int64_t> dims;                  // merged dims, at least one
  std::vector<std::vector<int64_t>> strides;  // [input][dim]
  int64_t inner() const { return dims.back(); }
  int64_t num_runs() const { return dims.back() ? out.numel() / dims.back() : 0; }
  /// Element offsets of every input at the start of run r.
  void run_offsets(int64_t r, int64_t* offsets) const;
};

/// Plans the broadcast of `shapes` to `out` (which must be their broadcast).
NaryPlan make_nary_plan(std::span<const Shape* const> shapes, const Shape& out);

// ---- legacy broadcast (opset < 7) ------------------------------------------

/// The `broadcast` and `axis` attributes of binary ops before opset 7.
struct LegacyBroadcast {
  bool active = false;     // opset < 7
  bool broadcast = false;  // broadcast=1
  bool has_axis = false;
  int64_t axis = 0;

  void init(const KernelInit& init) {
    active = init.opset < 7;
    if (!active) return;
    broadcast = init.attr_int("broadcast", 0) != 0;
    has_axis = init.node.has_attr("axis");
    axis = init.attr_int("axis", 0);
  }
  /// With broadcast=1, B's shape matches a contiguous run of A's dims
  /// starting at `axis` (or its suffix when axis is absent), dims of 1
  /// broadcasting. Returns the shape B is read with (A's rank), or an error.
  /// Without broadcast, numpy rules apply (a superset of the spec's "same
  /// shape", so valid models run unchanged).
  Result<Shape> b_shape(const Shape& a, const Shape& b) const;
};

}  // namespace kiln::kernels::ew
