// Tensor builders and checks shared by the kernel unit tests: one place for
// what each test file used to define for itself (vals, ints, iota_f,
// random_tensor, the element-wise tests' f32/strs/bools/expect_floats).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/kernel_runner.h"

namespace kiln::testing {

// ---- building tensors -------------------------------------------------------

/// A tensor of `v` with shape `s`.
template <class T>
Tensor make(std::vector<T> v, Shape s) {
  return Tensor::from_vector<T>(std::move(v), std::move(s));
}
inline Tensor f32(std::vector<float> v, Shape s) { return make<float>(std::move(v), std::move(s)); }
/// A 1-D float32 tensor.
inline Tensor f32(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return f32(std::move(v), Shape{n});
}
inline Tensor strs(std::vector<std::string> v, Shape s) { return make<std::string>(std::move(v), std::move(s)); }
inline Tensor bools(std::vector<bool> v, Shape s) { return Tensor::from_vector<bool>(v, std::move(s)); }
/// An int64 tensor of `v` (1-D, or shape `s`).
inline Tensor ints(std::vector<int64_t> v) { return Tensor::from_vector(v); }
inline Tensor ints(std::vector<int64_t> v, Shape s) { return Tensor::from_vector(v, s); }

/// float32 0, 1, 2, ... in shape `s`.
inline Tensor iota_f(Shape s) {
  Tensor t = Tensor::allocate(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

/// float32 uniform in [lo, hi) from `rng`.
inline Tensor random_tensor(const Shape& s, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t = Tensor::allocate(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

// ---- reading and checking tensors ------------------------------------------

/// The elements of `t` as T values.
template <class T>
std::vector<T> vals(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}
inline std::vector<bool> bool_values(const Tensor& t) {
  std::vector<bool> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.data<bool>()[i];
  return v;
}

/// Float comparison with NaN == NaN and a relative-or-absolute tolerance.
inline bool close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

/// Expects a float-typed tensor (any float dtype) close to `want`.
inline void expect_floats(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    double got = 0;
    switch (t.dtype()) {
      case DType::kFloat32: got = t.data<float>()[i]; break;
      case DType::kFloat64: got = t.data<double>()[i]; break;
      case DType::kFloat16: got = static_cast<float>(t.data<Float16>()[i]); break;
      case DType::kBFloat16: got = static_cast<float>(t.data<BFloat16>()[i]); break;
      default: FAIL() << "not a float tensor: " << dtype_name(t.dtype());
    }
    EXPECT_TRUE(close(got, want[i], tol)) << "element " << i << ": got " << got << ", want " << want[i];
  }
}

/// Runs a one-output op and returns the tensor, failing the test on error.
inline Tensor run_ok(const std::string& op, std::vector<Value> inputs, std::vector<ir::Attribute> attrs = {},
                     int opset = 17) {
  Result<Tensor> r = run_op1(op, std::move(inputs), std::move(attrs), opset);
  EXPECT_TRUE(r.ok()) << op << ": " << r.status().to_string();
  return r.ok() ? std::move(r).value() : Tensor();
}

/// Runs an op that must fail and returns its error message ("" if it did not).
inline std::string run_error(const std::string& op, std::vector<Value> inputs,
                             std::vector<ir::Attribute> attrs = {}, int opset = 17) {
  Result<Tensor> r = run_op1(op, std::move(inputs), std::move(attrs), opset);
  EXPECT_FALSE(r.ok()) << op << " unexpectedly succeeded";
  return r.ok() ? std::string() : r.status().to_string();
}

}  // namespace kiln::testing
