// Comparison and logic: Equal, Less, LessOrEqual, Greater, GreaterOrEqual,
// And, Or, Xor, Not, Where, IsNaN, IsInf. Comparisons broadcast like the
// arithmetic ops (opsets before 7 through `broadcast`/`axis`) and produce
// bool; Where broadcasts three ways.
#include <cmath>

#include "kernels/portable/util/elementwise.h"
#include "kernels/registry.h"

namespace kiln::kernels {
namespace {

using namespace ew;

struct EqualOp {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a == b;
  }
};
struct LessOp {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a < b;
  }
};
struct LessOrEqualOp {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a <= b;
  }
};
struct GreaterOp {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a > b;
  }
};
struct GreaterOrEqualOp {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a >= b;
  }
};
struct AndOp {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct OrOp {
  bool operator()(bool a, bool b) const { return a || b; }
};
struct XorOp {
  bool operator()(bool a, bool b) const { return a != b; }
};

/// A binary op with a bool output over inputs of one dtype from `kTypes`.
template <class Op, DTypeSet kTypes>
class PredicateKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    legacy_.init(init);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* a, tensor_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(const Tensor* b, tensor_input(ctx, 1));
    KILN_RETURN_IF_ERROR(check_same_dtype(*a, 0, *b, 1));
    Tensor b_view;
    if (legacy_.active && legacy_.broadcast) {
      KILN_ASSIGN_OR_RETURN(Shape s, legacy_.b_shape(a->shape(), b->shape()));
      if (s != b->shape()) {
        b_view = b->reshaped(s);
        b = &b_view;
      }
    }
    const DType dt = a->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr ((kTypes & bit_of<T>()) != 0) {
        return binary_apply<T, T, bool>(ctx, *a, *b, DType::kBool, kGrainCheap, Op{});
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  LegacyBroadcast legacy_;
};

// ---- Not, IsNaN, IsInf -----------------------------------------------------

class NotKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    if (x->dtype() != DType::kBool) return unsupported_dtype(0, x->dtype());
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kBool, x->shape()));
    unary_map(ctx.pool(), x->data<bool>(), y->data<bool>(), x->numel(), kGrainCheap, [](bool v) { return !v; });
    return Status::ok();
  }
};

/// IsNaN, and IsInf with its detect_negative / detect_positive attributes.
template <bool kIsNaN>
class FloatClassKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    detect_negative_ = init.attr_int("detect_negative", 1) != 0;
    detect_positive_ = init.attr_int("detect_positive", 1) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    const DType dt = x->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr (kIsFloat<T>) {
        KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kBool, x->shape()));
        using C = Compute<T>;
        if constexpr (kIsNaN) {
          unary_map(ctx.pool(), x->data<T>(), y->data<bool>(), x->numel(), kGrainCheap, [](C v) { return v != v; });
        } else {
          const C inf = std::numeric_limits<C>::infinity();
          const bool neg = detect_negative_, pos = detect_positive_;
          unary_map(ctx.pool(), x->data<T>(), y->data<bool>(), x->numel(), kGrainCheap,
                    [=](C v) { return (pos && v == inf) || (neg && v == -inf); });
        }
        return Status::ok();
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  bool detect_negative_ = true, detect_positive_ = true;
};

// ---- Where -----------------------------------------------------------------

template <class T>
void where_run(const bool* c, int64_t sc, const T* x, int64_t sx, const T* y, int64_t sy, T* o, int64_t n) {
  if (sc != 0 && sx != 0 && sy != 0) {
    for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = c[i * sc] ? x[i * sx] : y[i * sy];
  }
}

class WhereKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* c, tensor_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 1));
    KILN_ASSIGN_OR_RETURN(const Tensor* y, tensor_input(ctx, 2));
    if (c->dtype() != DType::kBool) {
      return invalid_argument("input 0 (condition) has dtype ", dtype_name(c->dtype()),
                              ", expected bool");
    }
    KILN_RETURN_IF_ERROR(check_same_dtype(*x, 1, *y, 2));
    Shape shape = c->shape();
    if (c->shape() != x->shape() || c->shape() != y->shape()) {
      KILN_ASSIGN_OR_RETURN(shape, broadcast_inputs(c->shape(), 0, x->shape(), 1));
      Result<Shape> s = broadcast_shapes(shape, y->shape());
      if (!s.ok()) {
        return invalid_argument("input 2 has shape ", y->shape().to_string(),
                                ", which does not broadcast with inputs 0 and 1 (", shape.to_string(), ")");
      }
      shape = *s;
    }
    const DType dt = x->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr ((kAllDTypes & bit_of<T>()) != 0) {
        KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, shape));
        const bool* pc = c->data<bool>();
        const T* px = x->data<T>();
        const T* py = y->data<T>();
        T* po = out->data<T>();
        const int64_t n = shape.numel();
        const int64_t grain = std::is_same_v<T, std::string> ? kGrainHeavy : kGrainCheap;
        if (c->shape() == shape && x->shape() == shape && y->shape() == shape) {
          parallel_for(ctx.pool(), n, grain, [&](int64_t i0, int64_t i1) {
            where_run(pc + i0, 1, px + i0, 1, py + i0, 1, po + i0, i1 - i0);
          });
          return Status::ok();
        }
        const Shape* shapes[3] = {&c->shape(), &x->shape(), &y->shape()};
        const NaryPlan plan = make_nary_plan(shapes, shape);
        const int64_t inner = plan.inner();
        const int64_t sc = plan.strides[0].back(), sx = plan.strides[1].back(), sy = plan.strides[2].back();
        parallel_for(ctx.pool(), plan.num_runs(), std::max<int64_t>(1, grain / std::max<int64_t>(inner, 1)),
                     [&](int64_t r0, int64_t r1) {
                       int64_t off[3];
                       for (int64_t r = r0; r < r1; ++r) {
                         plan.run_offsets(r, off);
                         where_run(pc + off[0], sc, px + off[1], sx, py + off[2], sy, po + r * inner, inner);
                       }
                     });
        return Status::ok();
      } else {
        return unsupported_dtype(1, dt);
      }
    });
  }
};

constexpr DTypeSet kEqualTypes = kNumericDTypes | kBoolDType | kStringDType;

}  // namespace

void register_compare_logic_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Equal", .since_version = 1, .until_version = 1000, .dtypes = kEqualTypes,
         .type_input = 0, .factory = make_kernel<PredicateKernel<EqualOp, kEqualTypes>>, .flags = 0});
  r.add({.domain = "", .op_type = "Less", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<PredicateKernel<LessOp, kNumericDTypes>>, .flags = 0});
  r.add({.domain = "", .op_type = "LessOrEqual", .since_version = 12, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<PredicateKernel<LessOrEqualOp, kNumericDTypes>>, .flags = 0});
  r.add({.domain = "", .op_type = "Greater", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<PredicateKernel<GreaterOp, kNumericDTypes>>, .flags = 0});
  r.add({.domain = "", .op_type = "GreaterOrEqual", .since_version = 12, .until_version = 1000,
         .dtypes = kNumericDTypes, .type_input = 0,
         .factory = make_kernel<PredicateKernel<GreaterOrEqualOp, kNumericDTypes>>, .flags = 0});
  r.add({.domain = "", .op_type = "And", .since_version = 1, .until_version = 1000, .dtypes = kBoolDType,
         .type_input = 0, .factory = make_kernel<PredicateKernel<AndOp, kBoolDType>>, .flags = 0});
  r.add({.domain = "", .op_type = "Or", .since_version = 1, .until_version = 1000, .dtypes = kBoolDType,
         .type_input = 0, .factory = make_kernel<PredicateKernel<OrOp, kBoolDType>>, .flags = 0});
  r.add({.domain = "", .op_type = "Xor", .since_version = 1, .until_version = 1000, .dtypes = kBoolDType,
         .type_input = 0, .factory = make_kernel<PredicateKernel<XorOp, kBoolDType>>, .flags = 0});
  r.add({.domain = "", .op_type = "Not", .since_version = 1, .until_version = 1000, .dtypes = kBoolDType,
         .type_input = 0, .factory = make_kernel<NotKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "IsNaN", .since_version = 9, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<FloatClassKernel<true>>, .flags = 0});
  r.add({.domain = "", .op_type = "IsInf", .since_version = 10, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<FloatClassKernel<false>>, .flags = 0});
  r.add({.domain = "", .op_type = "Where", .since_version = 9, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = 1, .factory = make_kernel<WhereKernel>, .flags = 0});
}

}  // namespace kiln::kernels
