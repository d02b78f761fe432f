// Indexed data movement: Gather, GatherElements, GatherND, Scatter,
// ScatterElements, ScatterND, Compress, OneHot, NonZero. Indices are
// validated before anything is written: an index outside its axis is an
// error naming the node, never an out-of-bounds access. Negative indices
// count from the end of their axis.
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/portable/util/strided_copy.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

using layout::advance;
using layout::copy_elements;

constexpr int64_t kParallelElems = 1 << 15;

struct Bytes16 {
  uint64_t lo, hi;
};

// Calls f(E{}) with an element type of the byte size of `dt` (strings as std::string).
template <class F>
void visit_elem(DType dt, F&& f) {
  if (dt == DType::kString) return f(std::string{});
  switch (dtype_size(dt)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    default: return f(Bytes16{});
  }
}

// Reads an index tensor into int64, normalizing negatives against `dim` and
// rejecting values outside [-dim, dim).
Result<std::vector<int64_t>> read_indices(const KernelContext& ctx, size_t input, int64_t dim) {
  const Tensor& t = ctx.input(input);
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) {
    return invalid_argument("input ", input, " (indices) must be int32 or int64, got ",
                            dtype_name(t.dtype()));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, to_int64_vector(t));
  for (int64_t& i : v) {
    if (i < -dim || i >= dim) {
      return invalid_argument("input ", input, " (indices) has index ", i,
                              ", outside [", -dim, ", ", dim - 1, "]");
    }
    if (i < 0) i += dim;
  }
  return v;
}

// ---------------------------------------------------------------- Gather

class GatherKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 0);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    const Tensor& data = ctx.input(0);
    if (!ctx.has_input(1)) return invalid_argument("input 1 (indices) is missing");
    const Tensor& ind = ctx.input(1);
    const int64_t rank = static_cast<int64_t>(data.rank());
    if (rank == 0) return invalid_argument("input 0 (data) must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    const int64_t n = data.dim(static_cast<size_t>(axis));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, read_indices(ctx, 1, n));
    Shape out_shape;
    for (int64_t d = 0; d < axis; ++d) out_shape.push_back(data.dim(static_cast<size_t>(d)));
    for (int64_t d : ind.shape()) out_shape.push_back(d);
    for (int64_t d = axis + 1; d < rank; ++d) out_shape.push_back(data.dim(static_cast<size_t>(d)));
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, data.dtype(), out_shape));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= data.dim(static_cast<size_t>(d));
    for (int64_t d = axis + 1; d < rank; ++d) inner *= data.dim(static_cast<size_t>(d));
    const int64_t m = static_cast<int64_t>(idx.size());
    const int64_t rows = outer * m;
    if (rows == 0 || inner == 0) return Status::ok();
    ThreadPool* pool = rows * inner >= kParallelElems ? ctx.pool() : nullptr;
    const int64_t grain = std::max<int64_t>(1, kParallelElems / 4 / inner);
    const DType dt = data.dtype();
    visit_elem(dt, [&](auto tag) {
      using E = decltype(tag);
      const E* src = data.data<E>();
      E* dst = out->data<E>();
      parallel_for(pool, rows, grain, [&](int64_t b, int64_t e) {
        int64_t o = b / m, j = b % m;
        for (int64_t r = b; r < e; ++r, ++j) {
          if (j == m) {
            j = 0;
            ++o;
          }
          const E* s = src + (o * n + idx[static_cast<size_t>(j)]) * inner;
          E* d = dst + r * inner;
          if (inner == 1) {
            *d = *s;
          } else if constexpr (std::is_same_v<E, std::string>) {
            std::copy_n(s, inner, d);
          } else {
            std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(E));
          }
        }
      });
    });
    return Status::ok();
  }

 private:
  int64_t axis_ = 0;
};

// ---------------------------------------------------------------- GatherElements

// Walks every element of `shape` in row-major order, calling f(linear, base)
// where base is the offset in a tensor with `strides`, excluding `axis`.
template <class F>
void for_each_excluding_axis(const Shape& shape, const std::vector<int64_t>& strides, size_t axis, F&& f) {
  const size_t r = shape.rank();
  const int64_t total = shape.numel();
  std::vector<int64_t> ix(r, 0);
  int64_t base = 0;
  for (int64_t lin = 0; lin < total; ++lin) {
    f(lin, base);
    for (size_t k = r; k-- > 0;) {
      if (k != axis) base += strides[k];
      if (++ix[k] < shape[k]) break;
      if (k != axis) base -= strides[k] * shape[k];
      ix[k] = 0;
    }
  }
}

Status check_same_rank_fits(const Tensor& data, const Tensor& ind, size_t axis,
                            const char* what) {
  if (ind.rank() != data.rank()) {
    return invalid_argument("input 1 (indices) has rank ", ind.rank(), ", expected ",
                            data.rank(), " like input 0 (", what, ")");
  }
  for (size_t d = 0; d < data.rank(); ++d) {
    if (d != axis && ind.dim(d) > data.dim(d)) {
      return invalid_argument("input 1 (indices) shape ", ind.shape().to_string(),
                              " exceeds input 0 shape ", data.shape().to_string(), " on axis ", d);
    }
  }
  return Status::ok();
}

class GatherElementsKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 0);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    const Tensor& data = ctx.input(0);
    if (!ctx.has_input(1)) return invalid_argument("input 1 (indices) is missing");
    const Tensor& ind = ctx.input(1);
    const int64_t rank = static_cast<int64_t>(data.rank());
    if (rank == 0) return invalid_argument("input 0 (data) must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    const size_t ax = static_cast<size_t>(axis);
    KILN_RETURN_IF_ERROR(check_same_rank_fits(data, ind, ax, "data"));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, read_indices(ctx, 1, data.dim(ax)));
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, data.dtype(), ind.shape()));
    const std::vector<int64_t> strides = contiguous_strides(data.shape());
    const int64_t axis_stride = strides[ax];
    visit_elem(data.dtype(), [&](auto tag) {
      using E = decltype(tag);
      const E* src = data.data<E>();
      E* dst = out->data<E>();
      for_each_excluding_axis(ind.shape(), strides, ax, [&](int64_t lin, int64_t base) {
        dst[lin] = src[base + idx[static_cast<size_t>(lin)] * axis_stride];
      });
    });
    return Status::ok();
  }

 private:
  int64_t axis_ = 0;
};

// ---------------------------------------------------------------- GatherND

class GatherNDKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    batch_dims_ = init.attr_int("batch_dims", 0);
    if (batch_dims_ < 0) return invalid_argument("attribute 'batch_dims' must be >= 0");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    const Tensor& data = ctx.input(0);
    if (!ctx.has_input(1)) return invalid_argument("input 1 (indices) is missing");
    const Tensor& ind = ctx.input(1);
    const size_t b = static_cast<size_t>(batch_dims_);
    if (ind.rank() < 1 || data.rank() < 1 || b >= ind.rank() || b >= data.rank()) {
      return invalid_argument("batch_dims ", b, " needs inputs of higher rank, got ",
                              data.shape().to_string(), " and ", ind.shape().to_string());
    }
    const int64_t k = ind.dim(ind.rank() - 1);
    if (k < 1 || static_cast<size_t>(k) > data.rank() - b) {
      return invalid_argument("input 1 (indices) last dim ", k, " must be in [1, ",
                              data.rank() - b, "]");
    }
    for (size_t d = 0; d < b; ++d) {
      if (ind.dim(d) != data.dim(d)) {
        return invalid_argument("batch dim ", d, " differs: ", data.shape().to_string(),
                                " vs ", ind.shape().to_string());
      }
    }
    if (ind.dtype() != DType::kInt64 && ind.dtype() != DType::kInt32) {
      return invalid_argument("input 1 (indices) must be int32 or int64");
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, to_int64_vector(ind));
    Shape out_shape;
    for (size_t d = 0; d + 1 < ind.rank(); ++d) out_shape.push_back(ind.dim(d));
    for (size_t d = b + static_cast<size_t>(k); d < data.rank(); ++d) out_shape.push_back(data.dim(d));
    int64_t batches = 1, slice = 1;
    for (size_t d = 0; d < b; ++d) batches *= data.dim(d);
    for (size_t d = b + static_cast<size_t>(k); d < data.rank(); ++d) slice *= data.dim(d);
    const std::vector<int64_t> strides = contiguous_strides(data.shape());
    const int64_t batch_stride = b ? strides[b - 1] : data.numel();
    const int64_t tuples = batches ? static_cast<int64_t>(idx.size()) / k : 0;
    const int64_t per_batch = batches ? tuples / batches : 0;
    std::vector<int64_t> offsets(static_cast<size_t>(tuples));
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = (t / std::max<int64_t>(per_batch, 1)) * batch_stride;
      for (int64_t j = 0; j < k; ++j) {
        const size_t dd = b + static_cast<size_t>(j);
        int64_t i = idx[static_cast<size_t>(t * k + j)];
        if (i < -data.dim(dd) || i >= data.dim(dd)) {
          return invalid_argument("input 1 (indices) has index ", i, " for axis ", dd,
                                  " of size ", data.dim(dd));
        }
        if (i < 0) i += data.dim(dd);
        off += i * strides[dd];
      }
      offsets[static_cast<size_t>(t)] = off;
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, data.dtype(), out_shape));
    const DType dt = data.dtype();
    for (int64_t t = 0; t < tuples; ++t) {
      copy_elements(dt, advance(out->raw_data(), t * slice, dt),
                    advance(data.raw_data(), offsets[static_cast<size_t>(t)], dt), slice);
    }
    return Status::ok();
  }

 private:
  int64_t batch_dims_ = 0;
};

// ---------------------------------------------------- Scatter, ScatterElements

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> parse_reduction(const KernelInit& init) {
  const std::string r = init.attr_string("reduction", "none");
  KILN_RETURN_IF_ERROR(init.attr_status());
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return invalid_argument("unknown reduction '", r, "'");
}

template <class T>
void combine(T& dst, const T& v, Reduction red) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (red) {
      case Reduction::kNone: dst = v; break;
      case Reduction::kAdd: case Reduction::kMax: dst = dst || v; break;
      case Reduction::kMul: case Reduction::kMin: dst = dst && v; break;
    }
  } else {
    switch (red) {
      case Reduction::kNone: dst = v; break;
      case Reduction::kAdd: dst = static_cast<T>(dst + v); break;
      case Reduction::kMul: dst = static_cast<T>(dst * v); break;
      case Reduction::kMax: dst = std::max<T>(dst, v); break;
      case Reduction::kMin: dst = std::min<T>(dst, v); break;
    }
  }
}

// Calls f(A{}, T{}) for arithmetic dtypes T, accumulating in A (float for
// 16-bit floats), else reports an error.
template <class F>
Status visit_arith(DType dt, F&& f) {
  Status st;
  visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T>) {
      f(T{}, T{});
    } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      f(float{}, T{});
    } else {
      st = unimplemented("reduction is not supported for ", dtype_name(dt));
    }
  });
  return st;
}

class ScatterElementsKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 0);
    KILN_ASSIGN_OR_RETURN(red_, parse_reduction(init));
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
    const Tensor& data = ctx.input(0);
    if (!ctx.has_input(1) || !ctx.has_input(2)) {
      return invalid_argument("inputs 1 (indices) and 2 (updates) are required");
    }
    const Tensor& ind = ctx.input(1);
    const Tensor& upd = ctx.input(2);
    const int64_t rank = static_cast<int64_t>(data.rank());
    if (rank == 0) return invalid_argument("input 0 (data) must have rank >= 1");
    KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank));
    const size_t ax = static_cast<size_t>(axis);
    KILN_RETURN_IF_ERROR(check_same_rank_fits(data, ind, ax, "data"));
    if (upd.shape() != ind.shape() || upd.dtype() != data.dtype()) {
      return invalid_argument("input 2 (updates) ", dtype_name(upd.dtype()),
                              upd.shape().to_string(), " must match indices shape ", ind.shape().to_string(),
                              " and data dtype ", dtype_name(data.dtype()));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, read_indices(ctx, 1, data.dim(ax)));
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, data.dtype(), data.shape()));
    copy_elements(data.dtype(), out->raw_data(), data.raw_data(), data.numel());
    const std::vector<int64_t> strides = contiguous_strides(data.shape());
    const int64_t axis_stride = strides[ax];
    if (red_ == Reduction::kNone) {
      visit_elem(data.dtype(), [&](auto tag) {
        using E = decltype(tag);
        const E* u = upd.data<E>();
        E* dst = out->data<E>();
        for_each_excluding_axis(ind.shape(), strides, ax, [&](int64_t lin, int64_t base) {
          dst[base + idx[static_cast<size_t>(lin)] * axis_stride] = u[lin];
        });
      });
      return Status::ok();
    }
    return visit_arith(data.dtype(), [&](auto acc_tag, auto store_tag) {
      using A = decltype(acc_tag);
      using T = decltype(store_tag);
      const T* u = upd.data<T>();
      T* dst = out->data<T>();
      for_each_excluding_axis(ind.shape(), strides, ax, [&](int64_t lin, int64_t base) {
        T& d = dst[base + idx[static_cast<size_t>(lin)] * axis_stride];
        A acc = static_cast<A>(d);
        combine<A>(acc, static_cast<A>(u[lin]), red_);
        d = static_cast<T>(acc);
      });
    });
  }

 private:
  int64_t axis_ = 0;
  Reduction red_ = Reduction::kNone;
};

// ---------------------------------------------------------------- ScatterND

class ScatterNDKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(red_, parse_reduction(init));
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
    const Tensor& data = ctx.input(0);
    if (!ctx.has_input(1) || !ctx.has_input(2)) {
      return invalid_argument("inputs 1 (indices) and 2 (updates) are required");
    }
    const Tensor& ind = ctx.input(1);
    const Tensor& upd = ctx.input(2);
    if (ind.rank() < 1 || ind.dtype() != DType::kInt64) {
      return invalid_argument("input 1 (indices) must be int64 of rank >= 1");
    }
    const int64_t k = ind.dim(ind.rank() - 1);
    if (k < 1 || static_cast<size_t>(k) > data.rank()) {
      return invalid_argument("input 1 (indices) last dim ", k, " must be in [1, ",
                              data.rank(), "]");
    }
    Shape want;
    for (size_t d = 0; d + 1 < ind.rank(); ++d) want.push_back(ind.dim(d));
    for (size_t d = static_cast<size_t>(k); d < data.rank(); ++d) want.push_back(data.dim(d));
    if (upd.shape() != want || upd.dtype() != data.dtype()) {
      return invalid_argument("input 2 (updates) is ", dtype_name(upd.dtype()),
                              upd.shape().to_string(), ", expected ", dtype_name(data.dtype()), want.to_string());
    }
    const std::vector<int64_t> strides = contiguous_strides(data.shape());
    int64_t slice = 1;
    for (size_t d = static_cast<size_t>(k); d < data.rank(); ++d) slice *= data.dim(d);
    const int64_t* iv = ind.data<int64_t>();
    const int64_t tuples = ind.numel() / k;
    std::vector<int64_t> offsets(static_cast<size_t>(tuples));
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t j = 0; j < k; ++j) {
        const size_t dd = static_cast<size_t>(j);
        int64_t i = iv[t * k + j];
        if (i < -data.dim(dd) || i >= data.dim(dd)) {
          return invalid_argument("input 1 (indices) has index ", i, " for axis ", dd,
                                  " of size ", data.dim(dd));
        }
        if (i < 0) i += data.dim(dd);
        off += i * strides[dd];
      }
      offsets[static_cast<size_t>(t)] = off;
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, data.dtype(), data.shape()));
    const DType dt = data.dtype();
    copy_elements(dt, out->raw_data(), data.raw_data(), data.numel());
    if (red_ == Reduction::kNone) {
      for (int64_t t = 0; t < tuples; ++t) {
        copy_elements(dt, advance(out->raw_data(), offsets[static_cast<size_t>(t)], dt),
                      advance(upd.raw_data(), t * slice, dt), slice);
      }
      return Status::ok();
    }
    return visit_arith(dt, [&](auto acc_tag, auto store_tag) {
      using A = decltype(acc_tag);
      using T = decltype(store_tag);
      const T* u = upd.data<T>();
      T* dst = out->data<T>();
      for (int64_t t = 0; t < tuples; ++t) {
        T* d = dst + offsets[static_cast<size_t>(t)];
        for (int64_t i = 0; i < slice; ++i) {
          A acc = static_cast<A>(d[i]);
          combine<A>(acc, static_cast<A>(u[t * slice + i]), red_);
          d[i] = static_cast<T>(acc);
        }
      }
    });
  }

 private:
  Reduction red_ = Reduction::kNone;
};

// ---------------------------------------------------------------- Compress

class CompressKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    has_axis_ = init.node.has_attr("axis");
    axis_ = init.attr_int("axis", 0);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    const Tensor& in = ctx.input(0);
    if (!ctx.has_input(1)) return invalid_argument("input 1 (condition) is missing");
    const Tensor& cond = ctx.input(1);
    if (cond.rank() != 1) {
      return invalid_argument("input 1 (condition) must be 1-D, got ",
                              cond.shape().to_string());
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> c, to_int64_vector(cond));
    int64_t outer = 1, dim = in.numel(), inner = 1;
    size_t ax = 0;
    if (has_axis_) {
      KILN_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, static_cast<int64_t>(in.rank())));
      ax = static_cast<size_t>(axis);
      dim = in.dim(ax);
      for (size_t d = 0; d < ax; ++d) outer *= in.dim(d);
      for (size_t d = ax + 1; d < in.rank(); ++d) inner *= in.dim(d);
    }
    if (static_cast<int64_t>(c.size()) > dim) {
      return invalid_argument("input 1 (condition) has ", c.size(),
                              " entries, more than the ", dim, " selectable slices");
    }
    std::vector<int64_t> keep;
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i]) keep.push_back(static_cast<int64_t>(i));
    const int64_t kept = static_cast<int64_t>(keep.size());
    Shape out_shape;
    if (has_axis_) {
      out_shape = in.shape();
      out_shape[ax] = kept;
    } else {
      out_shape = Shape{kept};
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), out_shape));
    const DType dt = in.dtype();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < kept; ++j) {
        copy_elements(dt, advance(out->raw_data(), (o * kept + j) * inner, dt),
                      advance(in.raw_data(), (o * dim + keep[static_cast<size_t>(j)]) * inner, dt), inner);
      }
    }
    return Status::ok();
  }

 private:
  bool has_axis_ = false;
  int64_t axis_ = 0;
};

// ---------------------------------------------------------------- OneHot

class OneHotKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", -1);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
    if (!ctx.has_input(1) || !ctx.has_input(2)) {
      return invalid_argument("inputs 1 (depth) and 2 (values) are required");
    }
    const Tensor& ind = ctx.input(0);
    const Tensor& values = ctx.input(2);
    if (ctx.input(1).numel() != 1) return invalid_argument("input 1 (depth) must be a scalar");
    KILN_ASSIGN_OR_RETURN(std::vector<double> depth_v, to_double_vector(ctx.input(1)));
    if (!(depth_v[0] >= 1 && depth_v[0] <= static_cast<double>(kMaxElements))) {
      return invalid_argument("input 1 (depth) must be in [1, 2^38], got ", depth_v[0]);
    }
    const int64_t depth = static_cast<int64_t>(depth_v[0]);
    if (values.numel() != 2) {
      return invalid_argument("input 2 (values) must hold [off, on], got shape ",
                              values.shape().to_string());
    }
    KILN_ASSIGN_OR_RETURN(std::vector<double> iv, to_double_vector(ind));
    const int64_t out_rank = static_cast<int64_t>(ind.rank()) + 1;
    if (axis_ < -out_rank || axis_ >= out_rank) {
      return invalid_argument("axis ", axis_, " is out of range for output rank ", out_rank);
    }
    const size_t axis = static_cast<size_t>(axis_ < 0 ? axis_ + out_rank : axis_);
    Shape out_shape;
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < ind.rank(); ++d) {
      if (d == axis) out_shape.push_back(depth);
      out_shape.push_back(ind.dim(d));
      (d < axis ? outer : inner) *= ind.dim(d);
    }
    if (axis == ind.rank()) out_shape.push_back(depth);
    const DType dt = values.dtype();
    KILN_RETURN_IF_ERROR(checked_numel(out_shape).status());
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, out_shape));
    layout::fill_elements(dt, out->raw_data(), values.raw_data(), out->numel());
    const void* on = advance(values.raw_data(), 1, dt);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const double kv = iv[static_cast<size_t>(o * inner + i)];
        if (!(std::fabs(kv) < static_cast<double>(kMaxElements))) continue;  // NaN, inf, far out
        int64_t k = static_cast<int64_t>(kv);
        if (k < 0) k += depth;
        if (k < 0 || k >= depth) continue;
        copy_elements(dt, advance(out->raw_data(), (o * depth + k) * inner + i, dt), on, 1);
      }
    }
    return Status::ok();
  }

 private:
  int64_t axis_ = -1;
};

// ---------------------------------------------------------------- NonZero

class NonZeroKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 1, 1));
    const Tensor& in = ctx.input(0);
    std::vector<int64_t> hits;
    Status st;
    visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        const T* d = in.data<T>();
        for (int64_t i = 0; i < in.numel(); ++i) {
          bool nz;
          if constexpr (std::is_arithmetic_v<T>) {
            nz = d[i] != T(0);
          } else {
            nz = static_cast<float>(d[i]) != 0.f;
          }
          if (nz) hits.push_back(i);
        }
      } else {
        st = unsupported_dtype(0, in.dtype());
      }
    });
    KILN_RETURN_IF_ERROR(std::move(st));
    const int64_t rank = static_cast<int64_t>(in.rank()), nnz = static_cast<int64_t>(hits.size());
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kInt64, Shape{rank, nnz}));
    int64_t* o = out->data<int64_t>();
    for (int64_t j = 0; j < nnz; ++j) {
      int64_t rem = hits[static_cast<size_t>(j)];
      for (int64_t d = rank; d-- > 0;) {
        o[d * nnz + j] = rem % in.dim(static_cast<size_t>(d));
        rem /= in.dim(static_cast<size_t>(d));
      }
    }
    return Status::ok();
  }
};

}  // namespace

void register_gather_scatter_ops(KernelRegistry& r) {
  auto add = [&r](const char* op, int since, int until, KernelFactory f, DTypeSet dtypes = kAllDTypes) {
    r.add({.domain = "", .op_type = op, .since_version = since, .until_version = until, .dtypes = dtypes,
           .type_input = 0, .factory = f, .flags = 0});
  };
  add("Gather", 1, 1000, make_kernel<GatherKernel>);
  add("GatherElements", 11, 1000, make_kernel<GatherElementsKernel>);
  add("GatherND", 11, 1000, make_kernel<GatherNDKernel>);
  add("Scatter", 9, 1000, make_kernel<ScatterElementsKernel>);
  add("ScatterElements", 11, 1000, make_kernel<ScatterElementsKernel>);
  add("ScatterND", 11, 1000, make_kernel<ScatterNDKernel>);
  add("Compress", 9, 1000, make_kernel<CompressKernel>);
  add("OneHot", 9, 1000, make_kernel<OneHotKernel>, kNumericDTypes);
  add("NonZero", 9, 1000, make_kernel<NonZeroKernel>, kNumericDTypes | dtype_bit(DType::kBool));
}

}  // namespace kiln::kernels
