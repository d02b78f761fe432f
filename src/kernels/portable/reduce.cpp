// Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd,
// ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare, and
// ArgMax/ArgMin.
//
// After the reduced axes are known, neighbouring dims of the same kind are
// merged, which turns almost every real reduction into one of two layouts:
//   rows:    [O, K] reduce K      (last axes: LayerNorm-style ReduceMean)
//   columns: [A, K, B] reduce K   (leading or middle axes: accumulate rows of B)
// Anything else (reduced axes interleaved with kept ones) is first transposed
// so the reduced axes come last.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/util/strided_copy.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

enum class Op { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

constexpr int64_t kParallelElems = 1 << 15;

// Accumulator type: float for 16-bit floats, int64/uint64 for integers (the
// result wraps into T like numpy's), T otherwise.
template <class T>
using Acc = std::conditional_t<
    std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float,
    std::conditional_t<std::is_integral_v<T> && !std::is_same_v<T, bool>,
                       std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>, T>>;

template <Op OP, class A>
constexpr A init_value() {
  if constexpr (OP == Op::kProd) {
    return A(1);
  } else if constexpr (OP == Op::kMax || OP == Op::kLogSumExp) {
    if constexpr (std::numeric_limits<A>::has_infinity) return -std::numeric_limits<A>::infinity();
    return std::numeric_limits<A>::lowest();
  } else if constexpr (OP == Op::kMin) {
    if constexpr (std::numeric_limits<A>::has_infinity) return std::numeric_limits<A>::infinity();
    return std::numeric_limits<A>::max();
  } else {
    return A(0);
  }
}

template <Op OP, class A>
inline A pre(A x) {
  if constexpr (OP == Op::kL1) {
    if constexpr (std::is_unsigned_v<A>) return x;
    return x < A(0) ? A(-x) : x;
  } else if constexpr (OP == Op::kL2 || OP == Op::kSumSquare) {
    return x * x;
  } else {
    return x;
  }
}

template <Op OP, class A>
inline A combine(A acc, A v) {
  if constexpr (OP == Op::kMax) {
    return v > acc ? v : acc;
  } else if constexpr (OP == Op::kMin) {
    return v < acc ? v : acc;
  } else if constexpr (OP == Op::kProd) {
    return acc * v;
  } else {
    return acc + v;
  }
}

// A libm result back in the accumulator type: integer accumulators saturate
// (log(0) is -inf, and a float outside the integer's range is UB to cast).
template <class A>
inline A from_double(double v) {
  if constexpr (std::is_integral_v<A>) return ew::float_to_int<A>(v);
  else return static_cast<A>(v);
}

template <Op OP, class A>
inline A post(A acc, int64_t k) {
  if constexpr (OP == Op::kMean) {
    // An integer mean over no elements is 0 (the empty sum); floats give NaN.
    if constexpr (std::is_integral_v<A>)
      if (k == 0) return A(0);
    return acc / static_cast<A>(k);
  } else if constexpr (OP == Op::kL2) {
    return from_double<A>(std::sqrt(static_cast<double>(acc)));
  } else if constexpr (OP == Op::kLogSum) {
    return from_double<A>(std::log(static_cast<double>(acc)));
  } else {
    return acc;
  }
}

// One reduction of K strided values (the general case and the row case).
template <Op OP, class T>
Acc<T> reduce_run(const T* x, int64_t k, int64_t stride) {
  using A = Acc<T>;
  if constexpr (OP == Op::kLogSumExp) {
    A m = init_value<Op::kMax, A>();
    for (int64_t i = 0; i < k; ++i) m = std::max<A>(m, static_cast<A>(x[i * stride]));
    if (!(m > init_value<Op::kMax, A>())) return m;  // empty, or every value -inf
    double s = 0;
    for (int64_t i = 0; i < k; ++i) s += std::exp(static_cast<double>(static_cast<A>(x[i * stride]) - m));
    return from_double<A>(static_cast<double>(m) + std::log(s));
  } else {
    if (stride == 1 && k >= 16) {
      // Eight independent accumulators let the compiler vectorize without
      // reassociating a single sum.
      A lanes[8];
      for (A& l : lanes) l = init_value<OP, A>();
      int64_t i = 0;
      for (; i + 8 <= k; i += 8)
        for (int j = 0; j < 8; ++j) lanes[j] = combine<OP, A>(lanes[j], pre<OP, A>(static_cast<A>(x[i + j])));
      A acc = lanes[0];
      for (int j = 1; j < 8; ++j) acc = combine<OP, A>(acc, lanes[j]);
      for (; i < k; ++i) acc = combine<OP, A>(acc, pre<OP, A>(static_cast<A>(x[i])));
      return post<OP, A>(acc, k);
    }
    A acc = init_value<OP, A>();
    for (int64_t i = 0; i < k; ++i) acc = combine<OP, A>(acc, pre<OP, A>(static_cast<A>(x[i * stride])));
    return post<OP, A>(acc, k);
  }
}

// [O, K] -> [O].
template <Op OP, class T>
void reduce_rows(const T* in, T* out, int64_t o, int64_t k, ThreadPool* pool) {
  ThreadPool* p = o * k >= kParallelElems ? pool : nullptr;
  parallel_for(p, o, std::max<int64_t>(1, kParallelElems / 4 / std::max<int64_t>(k, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) out[r] = static_cast<T>(reduce_run<OP, T>(in + r * k, k, 1));
  });
}

// [A, K, B] -> [A, B]: accumulate K rows of B contiguous values.
template <Op OP, class T>
void reduce_cols(const T* in, T* out, int64_t a, int64_t k, int64_t b, ThreadPool* pool) {
  using A = Acc<T>;
  ThreadPool* p = a * k * b >= kParallelElems ? pool : nullptr;
  // Parallel over (a, chunk of b) so a single [K, B] block still splits.
  constexpr int64_t kChunk = 256;
  const int64_t chunks = (b + kChunk - 1) / kChunk;
  parallel_for(p, a * chunks, 1, [&](int64_t lo, int64_t hi) {
    A acc[kChunk], mx[kChunk];
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t ai = w / chunks, j0 = (w % chunks) * kChunk, n = std::min(kChunk, b - j0);
      const T* src = in + ai * k * b + j0;
      T* dst = out + ai * b + j0;
      if constexpr (OP == Op::kLogSumExp) {
        for (int64_t j = 0; j < n; ++j) mx[j] = init_value<Op::kMax, A>();
        for (int64_t r = 0; r < k; ++r)
          for (int64_t j = 0; j < n; ++j) mx[j] = std::max<A>(mx[j], static_cast<A>(src[r * b + j]));
        for (int64_t j = 0; j < n; ++j) acc[j] = A(0);
        for (int64_t r = 0; r < k; ++r)
          for (int64_t j = 0; j < n; ++j)
            if (mx[j] > init_value<Op::kMax, A>())
              acc[j] += static_cast<A>(std::exp(static_cast<double>(static_cast<A>(src[r * b + j]) - mx[j])));
        for (int64_t j = 0; j < n; ++j)
          dst[j] = static_cast<T>(mx[j] > init_value<Op::kMax, A>()
                                      ? from_double<A>(static_cast<double>(mx[j]) + std::log(static_cast<double>(acc[j])))
                                      : mx[j]);
      } else {
        for (int64_t j = 0; j < n; ++j) acc[j] = init_value<OP, A>();
        for (int64_t r = 0; r < k; ++r) {
          const T* row = src + r * b;
          for (int64_t j = 0; j < n; ++j) acc[j] = combine<OP, A>(acc[j], pre<OP, A>(static_cast<A>(row[j])));
        }
        for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(post<OP, A>(acc[j], k));
      }
    }
  });
}

template <Op OP>
Status run_reduce(const KernelContext& ctx, const Tensor& in, Tensor* out, const std::vector<bool>& reduced) {
  // Merge non-unit dims into groups of one kind: (size, reduced?).
  std::vector<std::pair<int64_t, bool>> groups;
  for (size_t d = 0; d < in.rank(); ++d) {
    const int64_t n = in.dim(d);
    if (n == 1) continue;
    if (!groups.empty() && groups.back().second == reduced[d]) {
      groups.back().first *= n;
    } else {
      groups.emplace_back(n, reduced[d]);
    }
  }
  Status st;
  visit_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // bool: ReduceMax/ReduceMin-20 (any / all).
    constexpr bool kBoolMinMax = std::is_same_v<T, bool> && (OP == Op::kMax || OP == Op::kMin);
    if constexpr ((std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_same_v<T, Float16> ||
                  std::is_same_v<T, BFloat16> || kBoolMinMax) {
      const T* x = in.data<T>();
      T* y = out->data<T>();
      const int64_t total_out = out->numel();
      if (total_out == 0) return;
      if (groups.empty() || (groups.size() == 1 && !groups[0].second)) {  // nothing of size > 1 is reduced
        reduce_rows<OP, T>(x, y, total_out, 1, ctx.pool());
      } else if (groups.size() == 1) {
        reduce_rows<OP, T>(x, y, 1, groups[0].first, ctx.pool());
      } else if (groups.size() == 2 && groups[1].second) {
        reduce_rows<OP, T>(x, y, groups[0].first, groups[1].first, ctx.pool());
      } else if (groups.size() == 2) {
        reduce_cols<OP, T>(x, y, 1, groups[0].first, groups[1].first, ctx.pool());
      } else if (groups.size() == 3 && groups[1].second) {
        reduce_cols<OP, T>(x, y, groups[0].first, groups[1].first, groups[2].first, ctx.pool());
      } else {
        // Interleaved: transpose kept dims first, reduced dims last, then rows.
        std::vector<int64_t> dims, src;
        const std::vector<int64_t> strides = contiguous_strides(in.shape());
        int64_t k = 1;
        for (int pass = 0; pass < 2; ++pass) {
          for (size_t d = 0; d < in.rank(); ++d) {
            if (reduced[d] != (pass == 1)) continue;
            dims.push_back(in.dim(d));
            src.push_back(strides[d]);
            if (pass == 1) k *= in.dim(d);
          }
        }
        // (bytes for bool: std::vector<bool> has no data())
        using Elem = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
        std::vector<Elem> tmp_store(static_cast<size_t>(in.numel()));
        T* tmp = reinterpret_cast<T*>(tmp_store.data());
        std::vector<int64_t> dst(dims.size());
        int64_t acc = 1;
        for (size_t i = dims.size(); i-- > 0;) {
          dst[i] = acc;
          acc *= dims[i];
        }
        layout::strided_copy(in.dtype(), tmp, dst, x, src, dims, ctx.pool());
        reduce_rows<OP, T>(tmp, y, total_out, k, ctx.pool());
      }
    } else {
      st = unsupported_dtype(0, in.dtype());
    }
  });
  return st;
}

template <Op OP>
class ReduceKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    keepdims_ = init.attr_int("keepdims", 1) != 0;
    noop_ = init.attr_int("noop_with_empty_axes", 0) != 0;
    attr_axes_ = init.attr_ints("axes");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 2));
    const Tensor& in = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(in.rank());
    std::vector<int64_t> axes = attr_axes_;
    bool from_input = false;
    std::vector<int64_t> in_axes;
    KILN_ASSIGN_OR_RETURN(in_axes, read_ints_input(ctx, 1, "axes", &from_input));
    if (from_input) axes = std::move(in_axes);
    std::vector<bool> reduced(in.rank(), false);
    if (axes.empty()) {
      if (noop_) {
        KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), in.shape()));
        layout::copy_elements(in.dtype(), out->raw_data(), in.raw_data(), in.numel());
        return Status::ok();
      }
      reduced.assign(in.rank(), true);
    } else {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalize_axes(axes, rank));
      for (int64_t a : norm) reduced[static_cast<size_t>(a)] = true;
    }
    Shape out_shape;
    for (size_t d = 0; d < in.rank(); ++d) {
      if (!reduced[d]) {
        out_shape.push_back(in.dim(d));
      } else if (keepdims_) {
        out_shape.push_back(1);
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), out_shape));
    return run_reduce<OP>(ctx, in, out, reduced);
  }

 private:
  bool keepdims_ = true;
  bool noop_ = false;
  std::vector<int64_t> attr_axes_;
};

// ---------------------------------------------------------------- ArgMax, ArgMin

template <bool kMax>
class ArgKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 0);
    keepdims_ = init.attr_int("keepdims", 1) != 0;
    last_ = init.attr_int("select_last_index", 0) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(in.rank());
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    const size_t ax = static_cast<size_t>(axis);
    const int64_t k = rank ? in.dim(ax) : 1;
    if (k == 0) return invalid_argument("cannot take the arg of empty axis ", axis);
    Shape out_shape;
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < in.rank(); ++d) {
      if (d != ax) out_shape.push_back(in.dim(d));
      else if (keepdims_) out_shape.push_back(1);
      if (d < ax) outer *= in.dim(d);
      if (d > ax) inner *= in.dim(d);
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kInt64, out_shape));
    int64_t* y = out->data<int64_t>();
    Status st;
    visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr ((std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_same_v<T, Float16> ||
                    std::is_same_v<T, BFloat16>) {
        using A = std::conditional_t<std::is_arithmetic_v<T>, T, float>;
        const T* x = in.data<T>();
        // Strictly better wins, so ties keep the first index; with
        // select_last_index an equal value also wins.
        auto better = [this](A v, A best) {
          if constexpr (kMax) return last_ ? v >= best : v > best;
          return last_ ? v <= best : v < best;
        };
        for (int64_t o = 0; o < outer; ++o) {
          const T* base = x + o * k * inner;
          for (int64_t i = 0; i < inner; ++i) {
            A best = static_cast<A>(base[i]);
            int64_t bi = 0;
            for (int64_t j = 1; j < k; ++j) {
              const A v = static_cast<A>(base[j * inner + i]);
              if (better(v, best)) {
                best = v;
                bi = j;
              }
            }
            y[o * inner + i] = bi;
          }
        }
      } else {
        st = unsupported_dtype(0, in.dtype());
      }
    });
    return st;
  }

 private:
  int64_t axis_ = 0;
  bool keepdims_ = true;
  bool last_ = false;
};

constexpr DTypeSet kReduceTypes = kNumericDTypes;

}  // namespace

void register_reduce_ops(KernelRegistry& r) {
  auto add = [&r](const char* op, KernelFactory f) {
    r.add({.domain = "", .op_type = op, .since_version = 1, .until_version = 1000, .dtypes = kReduceTypes,
           .type_input = 0, .factory = f, .flags = 0});
  };
  add("ReduceSum", make_kernel<ReduceKernel<Op::kSum>>);
  add("ReduceMean", make_kernel<ReduceKernel<Op::kMean>>);
  add("ReduceMax", make_kernel<ReduceKernel<Op::kMax>>);
  add("ReduceMin", make_kernel<ReduceKernel<Op::kMin>>);
  add("ReduceProd", make_kernel<ReduceKernel<Op::kProd>>);
  add("ReduceL1", make_kernel<ReduceKernel<Op::kL1>>);
  add("ReduceL2", make_kernel<ReduceKernel<Op::kL2>>);
  add("ReduceLogSum", make_kernel<ReduceKernel<Op::kLogSum>>);
  add("ReduceLogSumExp", make_kernel<ReduceKernel<Op::kLogSumExp>>);
  add("ReduceSumSquare", make_kernel<ReduceKernel<Op::kSumSquare>>);
  r.add({.domain = "", .op_type = "ReduceMax", .since_version = 20, .until_version = 1000,
         .dtypes = dtype_bit(DType::kBool), .type_input = 0, .factory = make_kernel<ReduceKernel<Op::kMax>>, .flags = 0});
  r.add({.domain = "", .op_type = "ReduceMin", .since_version = 20, .until_version = 1000,
         .dtypes = dtype_bit(DType::kBool), .type_input = 0, .factory = make_kernel<ReduceKernel<Op::kMin>>, .flags = 0});
  add("ArgMax", make_kernel<ArgKernel<true>>);
  add("ArgMin", make_kernel<ArgKernel<false>>);
}

}  // namespace kiln::kernels
