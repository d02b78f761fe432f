#include "compare.h"

#include <cmath>
#include <complex>
#include <cstdio>

#include "cli_util.h"

namespace kiln::cli {

namespace {

// |a - e| <= atol + rtol * |e|, with NaN == NaN and equal infinities equal.
bool close(double a, double e, const Tolerance& tol) {
  if (std::isnan(a) || std::isnan(e)) return std::isnan(a) && std::isnan(e);
  if (a == e) return true;
  if (std::isinf(a) || std::isinf(e)) return false;
  return std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
}

template <class T>
bool element_matches(const T& a, const T& e, const Tolerance& tol) {
  if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
    return close(a.real(), e.real(), tol) && close(a.imag(), e.imag(), tol);
  } else if constexpr (std::is_same_v<T, double>) {
    return close(a, e, tol);
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return close(static_cast<float>(a), static_cast<float>(e), tol);
  } else {  // integers, bool, string: exact
    return a == e;
  }
}

std::string compare_tensors(const Tensor& got, const Tensor& expected, const Tolerance& tol) {
  if (got.dtype() != expected.dtype()) {
    return std::string("dtype ") + dtype_name(got.dtype()) + ", expected " + dtype_name(expected.dtype());
  }
  if (got.shape() != expected.shape()) {
    return "shape " + got.shape().to_string() + ", expected " + expected.shape().to_string();
  }
  int64_t first = -1;
  int64_t count = 0;
  const int64_t n = got.numel();
  bool supported = true;
  visit_dtype(got.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, UnsupportedDType>) {
      // Low-precision types (float8, int4, ...: one byte each): exact codes.
      supported = dtype_is_low_precision(got.dtype());
      const auto* a = static_cast<const uint8_t*>(got.raw_data());
      const auto* e = static_cast<const uint8_t*>(expected.raw_data());
      for (int64_t i = 0; supported && i < n; ++i) {
        if (a[i] != e[i]) {
          if (first < 0) first = i;
          ++count;
        }
      }
    } else {
      const T* a = got.data<T>();
      const T* e = expected.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        if (!element_matches(a[i], e[i], tol)) {
          if (first < 0) first = i;
          ++count;
        }
      }
    }
  });
  if (!supported) return std::string("cannot compare dtype ") + dtype_name(got.dtype());
  if (first < 0) return "";
  std::string msg = "at " + multi_index(got.shape(), first) + " got " + format_element(got, first) + ", expected " +
                    format_element(expected, first) + " (" + std::to_string(count) + " of " + std::to_string(n) +
                    " elements differ";
  if (dtype_is_float(got.dtype())) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "; rtol %g, atol %g", tol.rtol, tol.atol);
    msg += buf;
  }
  return msg + ")";
}

const char* kind_name(const Value& v) {
  return v.is_tensor() ? "a tensor" : v.is_sequence() ? "a sequence" : "no value (empty optional)";
}

}  // namespace

std::string compare_values(const Value& got, const Value& expected, const Tolerance& tol) {
  if (got.kind() != expected.kind()) {
    return std::string("got ") + kind_name(got) + ", expected " + kind_name(expected);
  }
  if (got.is_tensor()) return compare_tensors(got.tensor(), expected.tensor(), tol);
  if (got.is_sequence()) {
    const auto& a = got.sequence_items();
    const auto& e = expected.sequence_items();
    if (a.size() != e.size()) {
      return "sequence of " + std::to_string(a.size()) + " tensors, expected " + std::to_string(e.size());
    }
    for (size_t i = 0; i < a.size(); ++i) {
      std::string m = compare_tensors(a[i], e[i], tol);
      if (!m.empty()) return "sequence item " + std::to_string(i) + ": " + m;
    }
  }
  return "";
}

}  // namespace kiln::cli
