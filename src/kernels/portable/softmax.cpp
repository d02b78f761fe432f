// Softmax, LogSoftmax, Hardmax.
//
// Before opset 13 the input is coerced to 2-D at `axis` (default 1):
// [prod(dims[:axis]), prod(dims[axis:])], and each row is normalized. From
// opset 13 the op normalizes along the single axis `axis` (default -1).
// Both reduce to [outer, n, inner] with normalization over n; inner == 1 is
// the contiguous row case that attention and classifiers hit.
//
// float32 rows use a vectorizable exp (Cephes-style polynomial, ~1 ulp in
// the range softmax uses: arguments <= 0 after subtracting the row max).
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/registry.h"
#include "kernels/util.h"

namespace kiln::kernels {

namespace {

enum class Kind { kSoftmax, kLogSoftmax, kHardmax };

constexpr int64_t kParallelElems = 1 << 14;

// exp(x) for float, branch-free so loops over it vectorize.
inline float exp_fast(float x) {
  x = std::min(std::max(x, -87.33654f), 88.72283f);
  // n = round(x / ln2) via the 1.5 * 2^23 trick (no floor call).
  const float kShift = 12582912.f;
  float fn = x * 1.44269504088896341f + kShift;
  const int32_t n = static_cast<int32_t>(std::bit_cast<uint32_t>(fn) - std::bit_cast<uint32_t>(kShift));
  fn -= kShift;
  float r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.f;
  // 2^n with n in [-126, 128]: split in two factors so neither overflows.
  const int32_t n1 = n >> 1, n2 = n - n1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  return y * s1 * s2;
}

inline float row_max(const float* x, int64_t n) {
  float lanes[8];
  for (float& l : lanes) l = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lanes[j] = x[i + j] > lanes[j] ? x[i + j] : lanes[j];
  float m = lanes[0];
  for (int j = 1; j < 8; ++j) m = lanes[j] > m ? lanes[j] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

inline float row_sum(const float* x, int64_t n) {
  float lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lanes[j] += x[i + j];
  float s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i) s += x[i];
  return s;
}

// One contiguous float row.
template <Kind K>
void row_f32(const float* x, float* y, int64_t n) {
  const float m = row_max(x, n);
  if constexpr (K == Kind::kHardmax) {
    int64_t best = 0;
    for (int64_t i = 0; i < n; ++i)
      if (x[i] == m) {
        best = i;
        break;
      }
    std::fill_n(y, n, 0.f);
    if (n) y[best] = 1.f;
  } else if constexpr (K == Kind::kSoftmax) {
    for (int64_t i = 0; i < n; ++i) y[i] = exp_fast(x[i] - m);
    const float inv = 1.f / row_sum(y, n);
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = exp_fast(x[i] - m);
    const float lse = m + std::log(row_sum(y, n));
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] - lse;
  }
}

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

// float [n, inner] block normalized along n, vectorized across inner.
template <Kind K>
void block_f32(const float* x, float* y, int64_t n, int64_t inner) {
  if constexpr (K == Kind::kHardmax) {
    for (int64_t i = 0; i < inner; ++i) strided_generic<K, float>(x + i, y + i, n, inner);
  } else {
    std::vector<float> m(static_cast<size_t>(inner), -std::numeric_limits<float>::infinity());
    std::vector<float> s(static_cast<size_t>(inner), 0.f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < inner; ++i) m[i] = x[r * inner + i] > m[i] ? x[r * inner + i] : m[i];
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < inner; ++i) {
        const float e = exp_fast(x[r * inner + i] - m[i]);
        s[i] += e;
        if constexpr (K == Kind::kSoftmax) y[r * inner + i] = e;
      }
    }
    if constexpr (K == Kind::kSoftmax) {
      for (int64_t i = 0; i < inner; ++i) s[i] = 1.f / s[i];
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < inner; ++i) y[r * inner + i] *= s[i];
    } else {
      for (int64_t i = 0; i < inner; ++i) s[i] = m[i] + std::log(s[i]);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t i = 0; i < inner; ++i) y[r * inner + i] = x[r * inner + i] - s[i];
    }
  }
}

template <Kind K>
class SoftmaxKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    coerce_2d_ = init.opset < 13;
    axis_ = init.node.attr_int("axis", coerce_2d_ ? 1 : -1);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const Tensor& in = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(in.rank());
    int64_t outer = 1, n = 1, inner = 1;
    if (coerce_2d_) {
      if (axis_ < -rank || axis_ > rank) {
        return invalid_argument(ctx.node().label(), ": axis ", axis_, " is out of range for rank ", rank);
      }
      const int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
      for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : n) *= in.dim(static_cast<size_t>(d));
    } else {
      KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank, ctx.node()));
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
        if (inner == 1) {
          parallel_for(pool, outer, std::max<int64_t>(1, kParallelElems / 4 / n), [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) row_f32<K>(x + o * n, y + o * n, n);
          });
        } else {
          parallel_for(pool, outer, std::max<int64_t>(1, kParallelElems / 4 / per), [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) block_f32<K>(x + o * per, y + o * per, n, inner);
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
        st = invalid_argument(ctx.node().label(), ": unsupported dtype ", dtype_name(in.dtype()));
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
  r.add(KernelDef{"", "Softmax", 1, 1000, kFloatDTypes, 0, make_kernel<SoftmaxKernel<Kind::kSoftmax>>, 0});
  r.add(KernelDef{"", "LogSoftmax", 1, 1000, kFloatDTypes, 0, make_kernel<SoftmaxKernel<Kind::kLogSoftmax>>, 0});
  r.add(KernelDef{"", "Hardmax", 1, 1000, kFloatDTypes, 0, make_kernel<SoftmaxKernel<Kind::kHardmax>>, 0});
}

}  // namespace kiln::kernels
