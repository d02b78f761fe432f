#include "kernels/util/kernel_args.h"

#include <algorithm>
#include <type_traits>

namespace kiln::kernels {

Status check_inputs(const KernelContext& ctx, size_t required, size_t max_inputs) {
  const size_t n = std::min(ctx.num_inputs(), max_inputs);
  for (size_t i = 0; i < std::max(n, required); ++i) {
    const Value* v = ctx.input_value(i);
    const bool present = v != nullptr && !v->is_none();
    if (!present) {
      if (i < required) return invalid_argument("input ", i, " is missing");
      continue;
    }
    if (!v->is_tensor() || !v->tensor().defined()) return invalid_argument("input ", i, " must be a tensor");
  }
  return Status::ok();
}

std::string input_label(size_t index, const char* name) {
  return "input " + std::to_string(index) + " (" + name + ")";
}

Result<const Tensor*> tensor_input(const KernelContext& ctx, size_t i) {
  const Value* v = ctx.input_value(i);
  if (v == nullptr || v->is_none()) return invalid_argument("input ", i, " is missing");
  if (!v->is_tensor()) return invalid_argument("input ", i, " must be a tensor");
  return &v->tensor();
}

Result<std::vector<int64_t>> read_ints_input(const KernelContext& ctx, size_t i, std::string_view what,
                                             bool* present) {
  if (present) *present = ctx.has_input(i);
  if (!ctx.has_input(i)) return std::vector<int64_t>{};
  const Tensor& t = ctx.input(i);
  if (!dtype_is_integer(t.dtype())) {
    return invalid_argument("input ", i, " (", what, ") must be an integer tensor, got ",
                            dtype_name(t.dtype()));
  }
  if (t.rank() > 1) {
    return invalid_argument("input ", i, " (", what, ") must be 1-D, got shape ",
                            t.shape().to_string());
  }
  return to_int64_vector(t);
}

Result<int64_t> read_int_scalar(const KernelContext& ctx, size_t i, std::string_view what) {
  if (!ctx.has_input(i)) return invalid_argument("input ", i, " (", what, ") is missing");
  const Tensor& t = ctx.input(i);
  if (!dtype_is_integer(t.dtype()) || t.numel() != 1) {
    return invalid_argument("input ", i, " (", what,
                            ") must be one integer, got ", dtype_name(t.dtype()), t.shape().to_string());
  }
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, to_int64_vector(t));
  return v[0];
}

Result<std::vector<int64_t>> to_int64_vector(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  Status st;
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const T* d = t.data<T>();
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(d[i]);
    } else {
      st = invalid_argument("expected an integer tensor, got ", dtype_name(t.dtype()));
    }
  });
  if (!st.is_ok()) return st;
  return v;
}

Result<std::vector<double>> to_double_vector(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  Status st;
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      const T* d = t.data<T>();
      for (size_t i = 0; i < v.size(); ++i) {
        if constexpr (std::is_arithmetic_v<T>) {
          v[i] = static_cast<double>(d[i]);
        } else {
          v[i] = static_cast<double>(static_cast<float>(d[i]));
        }
      }
    } else {
      st = invalid_argument("expected a numeric tensor, got ", dtype_name(t.dtype()));
    }
  });
  if (!st.is_ok()) return st;
  return v;
}

Status unsupported_dtype(size_t input, DType t) {
  return unimplemented("input ", input, " has unsupported dtype ", dtype_name(t));
}

Status check_same_dtype(const Tensor& a, size_t ia, const Tensor& b, size_t ib) {
  if (a.dtype() == b.dtype()) return Status::ok();
  return invalid_argument("input ", ib, " has dtype ", dtype_name(b.dtype()), ", expected ", dtype_name(a.dtype()),
                          " like input ", ia);
}

Result<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 0);
  if (axis < -r || axis >= r) return invalid_argument("axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + r : axis;
}

Result<int64_t> checked_numel(const Shape& shape) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument("shape ", shape.to_string(), " has a negative dim");
    if (d == 0) zero = true;
  }
  if (zero) return int64_t{0};
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements) {
      return invalid_argument("output shape ", shape.to_string(), " has too many elements");
    }
  }
  return n;
}

Result<std::vector<int64_t>> normalize_axes(std::span<const int64_t> axes, int64_t rank) {
  std::vector<int64_t> out;
  out.reserve(axes.size());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      return invalid_argument("axis ", a, " is out of range for rank ", rank);
    }
    const int64_t n = a < 0 ? a + rank : a;
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      return invalid_argument("axis ", a, " is repeated");
    }
    out.push_back(n);
  }
  return out;
}

}  // namespace kiln::kernels
