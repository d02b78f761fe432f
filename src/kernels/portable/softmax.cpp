// Softmax, LogSoftmax, Hardmax.
//
// Before opset 13 the input is coerced to 2-D at `axis` (default 1):
// [prod(dims[:axis]), prod(dims[axis:])], and each row is normalized. From
// opset 13 the op normalizes along the single axis `axis` (default -1).
// Both reduce to [outer, n, inner] with normalization over n; inner == 1 is
// the contiguous row case that attention and classifiers hit.
//
// float32 uses a vectorizable exp (simd_math.h's exp_nonpositive, ~1 ulp for
// the arguments softmax needs: <= 0 after subtracting the max), compiled per
// x86-64 level (SSE2, AVX2+FMA, AVX-512; cpu/x86/isa.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/portable/cpu/x86/isa.h"
#include "kernels/portable/cpu/x86/simd_math.h"
#include "kernels/portable/util/strided_copy.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KILN_SOFTMAX_X86 1
#endif

namespace kiln::kernels {

namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

constexpr int64_t kParallelElems = 1 << 14;

#if defined(KILN_SOFTMAX_X86)
// The float loops below: selects the vectorizer may if-convert (no FP traps)
// and FMA contraction. Scoped to these functions (pop_options below).
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif

using simd::exp_nonpositive;

[[gnu::always_inline]] inline float row_max(const float* x, int64_t n) {
  float lanes[16];
  for (float& l : lanes) l = -__builtin_inff();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  float m = lanes[0];
  for (int j = 1; j < 16; ++j) m = lanes[j] > m ? lanes[j] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// y[i] = exp(x[i] - m) and their sum, in one pass (16 partial sums, so the
// loop vectorizes).
[[gnu::always_inline]] inline float exp_row_sum(const float* x, float* y, int64_t n, float m) {
  float lanes[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) {
      const float e = exp_nonpositive(x[i + j] - m);
      y[i + j] = e;
      lanes[j] += e;
    }
  float s = 0.f;
  for (int j = 0; j < 16; ++j) s += lanes[j];
  for (; i < n; ++i) {
    y[i] = exp_nonpositive(x[i] - m);
    s += y[i];
  }
  return s;
}

// `rows` contiguous float rows of n values each. Softmax or LogSoftmax.
KILN_ISA_BODY void rows_f32_body(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  for (int64_t row = 0; row < rows; ++row, x += n, y += n) {
    const float m = row_max(x, n);
    const float s = exp_row_sum(x, y, n, m);
    if (log) {
      const float lse = m + __builtin_logf(s);
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] - lse;
    } else {
      const float inv = 1.f / s;
      for (int64_t i = 0; i < n; ++i) y[i] *= inv;
    }
  }
}
KILN_ISA_DISPATCH(rows_f32, rows_f32_body);

// One float [n, inner] block normalized along n, vectorized across inner.
// `m` and `s` are scratch of `inner` floats.
KILN_ISA_BODY void block_f32_body(const float* x, float* y, int64_t n, int64_t inner, bool log, float* m,
                                   float* s) {
  for (int64_t i = 0; i < inner; ++i) {
    m[i] = -__builtin_inff();
    s[i] = 0.f;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < inner; ++i) m[i] = x[r * inner + i] > m[i] ? x[r * inner + i] : m[i];
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < inner; ++i) {
      const float e = exp_nonpositive(x[r * inner + i] - m[i]);
      s[i] += e;
      y[r * inner + i] = e;
    }
  }
  if (log) {
    for (int64_t i = 0; i < inner; ++i) s[i] = m[i] + __builtin_logf(s[i]);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < inner; ++i) y[r * inner + i] = x[r * inner + i] - s[i];
  } else {
    for (int64_t i = 0; i < inner; ++i) s[i] = 1.f / s[i];
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < inner; ++i) y[r * inner + i] *= s[i];
  }
}
KILN_ISA_DISPATCH(block_f32, block_f32_body);

#if defined(KILN_SOFTMAX_X86)
#pragma GCC pop_options
#endif

// Generic: [n] values at stride `inner`, computed in double (float64) or
// float (16-bit floats) with std::exp.
template <Kind K, class T>
void strided_generic(const T* x, T* y, int64_t n, int64_t stride) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  A m = -std::numeric_limits<A>::infinity();
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    const A v = static_cast<A>(x[i * stride]);
    if (v > m) {
      m = v;
      best = i;
    }
  }
  if constexpr (K == Kind::kHardmax) {
    for (int64_t i = 0; i < n; ++i) y[i * stride] = static_cast<T>(i == best ? A(1) : A(0));
  } else {
    A s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<A>(x[i * stride]) - m);
    if constexpr (K == Kind::kSoftmax) {
      for (int64_t i = 0; i < n; ++i) y[i * stride] = static_cast<T>(std::exp(static_cast<A>(x[i * stride]) - m) / s);
    } else {
      const A lse = m + std::log(s);
      for (int64_t i = 0; i < n; ++i) y[i * stride] = static_cast<T>(static_cast<A>(x[i * stride]) - lse);
    }
  }
}

template <Kind K>
class SoftmaxKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    coerce_2d_ = init.opset < 13;
    axis_ = init.attr_int("axis", coerce_2d_ ? 1 : -1);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(in.rank());
    int64_t outer = 1, n = 1, inner = 1;
    if (coerce_2d_) {
      if (axis_ < -rank || axis_ > rank) {
        return invalid_argument("axis ", axis_, " is out of range for rank ", rank);
      }
      const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
      for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : n) *= in.dim(static_cast<size_t>(d));
    } else {
      KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t v = in.dim(static_cast<size_t>(d));
        if (d < axis) outer *= v;
        else if (d == axis) n = v;
        else inner *= v;
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), in.shape()));
    if (in.numel() == 0) return Status::ok();
    ThreadPool* pool = in.numel() >= kParallelElems ? ctx.pool() : nullptr;
    const int64_t per = n * inner;
    Status st;
    visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float>) {
        const float* x = in.data<float>();
        float* y = out->data<float>();
        if constexpr (K == Kind::kHardmax) {
          for (int64_t w = 0; w < outer * inner; ++w) {
            const int64_t o = w / inner, i = w % inner;
            strided_generic<K, float>(x + o * per + i, y + o * per + i, n, inner);
          }
        } else if (inner == 1) {
          parallel_for(pool, outer, std::max<int64_t>(1, kParallelElems / 4 / n), [&](int64_t b, int64_t e) {
            rows_f32(x + b * n, y + b * n, e - b, n, K == Kind::kLogSoftmax);
          });
        } else {
          parallel_for(pool, outer, std::max<int64_t>(1, kParallelElems / 4 / per), [&](int64_t b, int64_t e) {
            std::vector<float> scratch(static_cast<size_t>(2 * inner));
            for (int64_t o = b; o < e; ++o)
              block_f32(x + o * per, y + o * per, n, inner, K == Kind::kLogSoftmax, scratch.data(),
                        scratch.data() + inner);
          });
        }
      } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        const T* x = in.data<T>();
        T* y = out->data<T>();
        parallel_for(pool, outer * inner, std::max<int64_t>(1, kParallelElems / 4 / n), [&](int64_t b, int64_t e) {
          for (int64_t w = b; w < e; ++w) {
            const int64_t o = w / inner, i = w % inner;
            strided_generic<K, T>(x + o * per + i, y + o * per + i, n, inner);
          }
        });
      } else {
        st = unsupported_dtype(0, in.dtype());
      }
    });
    return st;
  }

 private:
  bool coerce_2d_ = false;
  int64_t axis_ = -1;
};

}  // namespace

void register_softmax_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Softmax", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<SoftmaxKernel<Kind::kSoftmax>>, .flags = 0});
  r.add({.domain = "", .op_type = "LogSoftmax", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<SoftmaxKernel<Kind::kLogSoftmax>>, .flags = 0});
  r.add({.domain = "", .op_type = "Hardmax", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<SoftmaxKernel<Kind::kHardmax>>, .flags = 0});
}

}  // namespace kiln::kernels
