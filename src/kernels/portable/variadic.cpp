// Variadic element-wise ops: Sum, Mean, Max, Min over 1..N inputs with numpy
// broadcasting (opsets before 8 require equal shapes, a special case).
// The output is filled from the first inputs, then every further input is
// folded into it in place.
#include <cmath>

#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/registry.h"

namespace kiln::kernels {
namespace {

using namespace ew;

struct SumOp {
  static constexpr DTypeSet kTypes = kFloatDTypes;
  static constexpr bool kMean = false;
  template <class C>
  C operator()(C a, C b) const {
    return a + b;
  }
};

struct MeanOp : SumOp {
  static constexpr bool kMean = true;
};

// Max and Min propagate NaN, like numpy's maximum/minimum.
struct MaxOp {
  static constexpr DTypeSet kTypes = kNumericDTypes;
  static constexpr bool kMean = false;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return a < b ? b : a;
  }
};

struct MinOp {
  static constexpr DTypeSet kTypes = kNumericDTypes;
  static constexpr bool kMean = false;
  template <class C>
  C operator()(C a, C b) const {
    if constexpr (kIsFloat<C>) {
      if (a != a) return a;
      if (b != b) return b;
    }
    return b < a ? b : a;
  }
};

/// Copies b (broadcast) into the output; a is not read.
template <class T>
struct CopyBRun {
  void operator()(const T*, int64_t, const T* b, int64_t sb, T* o, int64_t n) const {
    if (sb != 0) {
      for (int64_t i = 0; i < n; ++i) o[i] = b[i];
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = b[0];
    }
  }
};

struct AddF32Run {
  void operator()(const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) const {
    simd::arith_f32(simd::Arith::kAdd, a, sa, b, sb, o, n);
  }
};

template <class Op>
class VariadicKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    if (n == 0) return invalid_argument("expected at least one input");
    std::vector<const Tensor*> ins(n);
    for (size_t i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(ins[i], tensor_input(ctx, i));
      if (i > 0) KILN_RETURN_IF_ERROR(check_same_dtype(*ins[0], 0, *ins[i], i));
    }
    Shape shape = ins[0]->shape();
    for (size_t i = 1; i < n; ++i) {
      if (ins[i]->shape() == shape) continue;
      Result<Shape> s = broadcast_shapes(shape, ins[i]->shape());
      if (!s.ok()) {
        return invalid_argument("input ", i, " has shape ", ins[i]->shape().to_string(),
                                ", which does not broadcast with inputs 0..", i - 1, " (", shape.to_string(), ")");
      }
      shape = *s;
    }
    const DType dt = ins[0]->dtype();
    return visit_dtype(dt, [&](auto tag) -> Status {
      using T = decltype(tag);
      if constexpr ((Op::kTypes & bit_of<T>()) != 0) {
        KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, shape));
        return fold<T>(ctx, ins, out);
      } else {
        return unsupported_dtype(0, dt);
      }
    });
  }

 private:
  template <class T>
  static Status fold(KernelContext& ctx, const std::vector<const Tensor*>& ins, Tensor* out) {
    ThreadPool* pool = ctx.pool();
    T* po = out->data<T>();
    const Shape& so = out->shape();
    const size_t n = ins.size();
    size_t next = 1;
    Result<Shape> first_two = n >= 2 ? broadcast_shapes(ins[0]->shape(), ins[1]->shape()) : Result<Shape>(so);
    if (n >= 2 && first_two.ok() && *first_two == so) {
      KILN_RETURN_IF_ERROR(fold_step<T>(pool, ins[0]->data<T>(), ins[0]->shape(), *ins[1], po, so));
      next = 2;
    } else {
      KILN_RETURN_IF_ERROR(binary_into_run(pool, po, so, ins[0]->data<T>(), ins[0]->shape(), po, so, kGrainCheap,
                                           CopyBRun<T>{}));
    }
    for (size_t i = next; i < n; ++i) KILN_RETURN_IF_ERROR(fold_step<T>(pool, po, so, *ins[i], po, so));
    if constexpr (Op::kMean) {
      using C = Compute<T>;
      const C scale = static_cast<C>(n);
      unary_map(pool, po, po, out->numel(), kGrainCheap, [scale](C v) { return v / scale; });
    }
    return Status::ok();
  }

  // o = op(a, b) where a has o's shape (or broadcasts with b to it).
  template <class T>
  static Status fold_step(ThreadPool* pool, const T* a, const Shape& sa, const Tensor& b, T* o, const Shape& so) {
    if constexpr (std::is_same_v<T, float> && std::is_base_of_v<SumOp, Op>) {
      return binary_into_run(pool, a, sa, b.data<float>(), b.shape(), o, so, kGrainCheap, AddF32Run{});
    } else {
      const Op op{};
      return binary_into_run(pool, a, sa, b.data<T>(), b.shape(), o, so, kGrainCheap, DefaultRun<T, T, T, Op>{op});
    }
  }
};

}  // namespace

void register_variadic_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Sum", .since_version = 1, .until_version = 1000, .dtypes = SumOp::kTypes,
         .type_input = 0, .factory = make_kernel<VariadicKernel<SumOp>>, .flags = 0});
  r.add({.domain = "", .op_type = "Mean", .since_version = 1, .until_version = 1000, .dtypes = MeanOp::kTypes,
         .type_input = 0, .factory = make_kernel<VariadicKernel<MeanOp>>, .flags = 0});
  r.add({.domain = "", .op_type = "Max", .since_version = 1, .until_version = 1000, .dtypes = MaxOp::kTypes,
         .type_input = 0, .factory = make_kernel<VariadicKernel<MaxOp>>, .flags = 0});
  r.add({.domain = "", .op_type = "Min", .since_version = 1, .until_version = 1000, .dtypes = MinOp::kTypes,
         .type_input = 0, .factory = make_kernel<VariadicKernel<MinOp>>, .flags = 0});
}

}  // namespace kiln::kernels
