// Comparing a model's outputs with expected values the way the ONNX backend
// tests do (onnx/backend/test/runner: numpy.testing.assert_allclose with
// rtol 1e-3, atol 1e-7; NaN equals NaN; exact for integers, bools, strings).
#pragma once

#include <string>

#include "kiln/value.h"

namespace kiln::cli {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

/// Returns "" when `got` matches `expected`, else the first problem:
/// a kind, dtype, shape or length difference, or the first mismatching
/// element with its index, both values and how many elements differ.
std::string compare_values(const Value& got, const Value& expected, const Tolerance& tol = {});

}  // namespace kiln::cli
