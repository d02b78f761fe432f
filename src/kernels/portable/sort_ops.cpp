// Order-dependent ops: TopK, Unique, CumSum.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/portable/util/strided_copy.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

// Comparable view of an element: float for 16-bit floats, T otherwise.
template <class T>
using Cmp = std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;

template <class T>
constexpr bool kOrdered = (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16> ||
                           std::is_same_v<T, std::string>);

// ---------------------------------------------------------------- TopK

class TopKKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    opset_ = init.opset;
    axis_ = init.attr_int("axis", -1);
    largest_ = init.attr_int("largest", 1) != 0;
    attr_k_ = init.attr_int("k", -1);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, opset_ >= 10 ? 2 : 1, 2));
    const Tensor& in = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(in.rank());
    if (rank == 0) return invalid_argument("input 0 must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    int64_t k = attr_k_;
    if (opset_ >= 10) {
      KILN_ASSIGN_OR_RETURN(k, read_int_scalar(ctx, 1, "K"));
    }
    const size_t ax = static_cast<size_t>(axis);
    const int64_t n = in.dim(ax);
    if (k < 0 || k > n) {
      return invalid_argument("k = ", k, " must be in [0, ", n, "] for axis ", axis);
    }
    Shape out_shape = in.shape();
    out_shape[ax] = k;
    KILN_ASSIGN_OR_RETURN(Tensor * values, ctx.allocate_output(0, in.dtype(), out_shape));
    KILN_ASSIGN_OR_RETURN(Tensor * indices, ctx.allocate_output(1, DType::kInt64, out_shape));
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < ax; ++d) outer *= in.dim(d);
    for (size_t d = ax + 1; d < in.rank(); ++d) inner *= in.dim(d);
    Status st;
    visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kOrdered<T> && !std::is_same_v<T, std::string> && !std::is_same_v<T, bool>) {
        using C = Cmp<T>;
        const T* x = in.data<T>();
        T* vo = values->data<T>();
        int64_t* io = indices->data<int64_t>();
        std::vector<std::pair<C, int64_t>> items(static_cast<size_t>(n));
        // Ties go to the lower index; NaN sorts as the largest value.
        auto greater = [](const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& b) {
          if (a.first != b.first) {
            if constexpr (std::is_floating_point_v<C>) {
              if (std::isnan(a.first)) return !std::isnan(b.first);
              if (std::isnan(b.first)) return false;
            }
            return a.first > b.first;
          }
          return a.second < b.second;
        };
        auto less = [](const std::pair<C, int64_t>& a, const std::pair<C, int64_t>& b) {
          if (a.first != b.first) {
            if constexpr (std::is_floating_point_v<C>) {
              if (std::isnan(a.first)) return false;
              if (std::isnan(b.first)) return true;
            }
            return a.first < b.first;
          }
          return a.second < b.second;
        };
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            const T* base = x + o * n * inner + i;
            for (int64_t j = 0; j < n; ++j) items[static_cast<size_t>(j)] = {static_cast<C>(base[j * inner]), j};
            if (largest_) {
              std::partial_sort(items.begin(), items.begin() + k, items.end(), greater);
            } else {
              std::partial_sort(items.begin(), items.begin() + k, items.end(), less);
            }
            for (int64_t j = 0; j < k; ++j) {
              const int64_t at = (o * k + j) * inner + i;
              vo[at] = base[items[static_cast<size_t>(j)].second * inner];
              io[at] = items[static_cast<size_t>(j)].second;
            }
          }
        }
      } else {
        st = unsupported_dtype(0, in.dtype());
      }
    });
    return st;
  }

 private:
  int opset_ = 11;
  int64_t axis_ = -1;
  bool largest_ = true;
  int64_t attr_k_ = -1;
};

// ---------------------------------------------------------------- Unique

class UniqueKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    has_axis_ = init.node.has_attr("axis");
    axis_ = init.attr_int("axis", 0);
    sorted_ = init.attr_int("sorted", 1) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    // Slices along the axis: [outer, n, inner]; without an axis, n elements.
    int64_t outer = 1, n = in.numel(), inner = 1;
    size_t ax = 0;
    if (has_axis_) {
      KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, static_cast<int64_t>(in.rank())));
      if (in.rank() == 0) return invalid_argument("axis needs an input of rank >= 1");
      ax = static_cast<size_t>(axis);
      n = in.dim(ax);
      for (size_t d = 0; d < ax; ++d) outer *= in.dim(d);
      for (size_t d = ax + 1; d < in.rank(); ++d) inner *= in.dim(d);
    }
    Status st;
    visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (kOrdered<T>) {
        st = run<T>(ctx, in, outer, n, inner, ax);
      } else {
        st = unsupported_dtype(0, in.dtype());
      }
    });
    return st;
  }

 private:
  template <class T>
  Status run(KernelContext& ctx, const Tensor& in, int64_t outer, int64_t n, int64_t inner, size_t ax) const {
    using C = Cmp<T>;
    const T* x = in.data<T>();
    // Slice s holds x[(o * n + s) * inner + i] for (o, i) in row-major order.
    auto cmp = [&](int64_t a, int64_t b) -> int {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const C va = static_cast<C>(x[(o * n + a) * inner + i]);
          const C vb = static_cast<C>(x[(o * n + b) * inner + i]);
          if constexpr (std::is_floating_point_v<C>) {
            // A total order: NaNs equal each other and sort last (as numpy).
            const bool na = std::isnan(va), nb = std::isnan(vb);
            if (na || nb) {
              if (na != nb) return na ? 1 : -1;
              continue;
            }
          }
          if (va < vb) return -1;
          if (vb < va) return 1;
        }
      }
      return 0;
    };
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
    // Groups of equal slices; the first member is the first occurrence.
    std::vector<int64_t> first, count, group_of(static_cast<size_t>(n));
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
        first.push_back(order[i]);
        count.push_back(0);
      }
      ++count.back();
      group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
    }
    const int64_t u = static_cast<int64_t>(first.size());
    // Output position of each group: sorted order, or order of first occurrence.
    std::vector<int64_t> rank_of(static_cast<size_t>(u));
    std::iota(rank_of.begin(), rank_of.end(), 0);
    if (!sorted_) {
      std::vector<int64_t> by_first(static_cast<size_t>(u));
      std::iota(by_first.begin(), by_first.end(), 0);
      std::sort(by_first.begin(), by_first.end(),
                [&](int64_t a, int64_t b) { return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)]; });
      for (int64_t p = 0; p < u; ++p) rank_of[static_cast<size_t>(by_first[static_cast<size_t>(p)])] = p;
    }
    Shape y_shape;
    if (has_axis_) {
      y_shape = in.shape();
      y_shape[ax] = u;
    } else {
      y_shape = Shape{u};
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, in.dtype(), y_shape));
    KILN_ASSIGN_OR_RETURN(Tensor * indices, ctx.allocate_output(1, DType::kInt64, Shape{u}));
    KILN_ASSIGN_OR_RETURN(Tensor * inverse, ctx.allocate_output(2, DType::kInt64, Shape{n}));
    KILN_ASSIGN_OR_RETURN(Tensor * counts, ctx.allocate_output(3, DType::kInt64, Shape{u}));
    T* yd = y->data<T>();
    for (int64_t g = 0; g < u; ++g) {
      const int64_t p = rank_of[static_cast<size_t>(g)];
      const int64_t s = first[static_cast<size_t>(g)];
      indices->data<int64_t>()[p] = s;
      counts->data<int64_t>()[p] = count[static_cast<size_t>(g)];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) yd[(o * u + p) * inner + i] = x[(o * n + s) * inner + i];
    }
    for (int64_t j = 0; j < n; ++j)
      inverse->data<int64_t>()[j] = rank_of[static_cast<size_t>(group_of[static_cast<size_t>(j)])];
    return Status::ok();
  }

  bool has_axis_ = false;
  int64_t axis_ = 0;
  bool sorted_ = true;
};

// ---------------------------------------------------------------- CumSum

class CumSumKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    exclusive_ = init.attr_int("exclusive", 0) != 0;
    reverse_ = init.attr_int("reverse", 0) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    const Tensor& in = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(const int64_t axis_in, read_int_scalar(ctx, 1, "axis"));
    const int64_t rank = static_cast<int64_t>(in.rank());
    if (rank == 0) return invalid_argument("input 0 must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_in, rank));
    const size_t ax = static_cast<size_t>(axis);
    int64_t outer = 1, inner = 1;
    const int64_t n = in.dim(ax);
    for (size_t d = 0; d < ax; ++d) outer *= in.dim(d);
    for (size_t d = ax + 1; d < in.rank(); ++d) inner *= in.dim(d);
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), in.shape()));
    Status st;
    visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr ((std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_same_v<T, Float16> ||
                    std::is_same_v<T, BFloat16>) {
        using A = Cmp<T>;
        const T* x = in.data<T>();
        T* y = out->data<T>();
        std::vector<A> acc(static_cast<size_t>(inner));
        for (int64_t o = 0; o < outer; ++o) {
          std::fill(acc.begin(), acc.end(), A(0));
          for (int64_t step = 0; step < n; ++step) {
            const int64_t j = reverse_ ? n - 1 - step : step;
            const T* xr = x + (o * n + j) * inner;
            T* yr = y + (o * n + j) * inner;
            for (int64_t i = 0; i < inner; ++i) {
              if (exclusive_) {
                yr[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
                acc[static_cast<size_t>(i)] = static_cast<A>(acc[static_cast<size_t>(i)] + static_cast<A>(xr[i]));
              } else {
                acc[static_cast<size_t>(i)] = static_cast<A>(acc[static_cast<size_t>(i)] + static_cast<A>(xr[i]));
                yr[i] = static_cast<T>(acc[static_cast<size_t>(i)]);
              }
            }
          }
        }
      } else {
        st = unsupported_dtype(0, in.dtype());
      }
    });
    return st;
  }

 private:
  bool exclusive_ = false;
  bool reverse_ = false;
};

}  // namespace

void register_sort_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "TopK", .since_version = 1, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<TopKKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Unique", .since_version = 11, .until_version = 1000,
         .dtypes = kNumericDTypes | dtype_bit(DType::kString) | dtype_bit(DType::kBool), .type_input = 0,
         .factory = make_kernel<UniqueKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "CumSum", .since_version = 11, .until_version = 1000, .dtypes = kNumericDTypes,
         .type_input = 0, .factory = make_kernel<CumSumKernel>, .flags = 0});
}

}  // namespace kiln::kernels
