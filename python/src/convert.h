// numpy <-> Kiln tensors for the Python module.
//
// Inputs: a C-contiguous array of the declared dtype (native byte order) is
// borrowed without a copy; anything else that numpy can convert within the
// same kind (float64 -> float32, int32 -> int64, lists, scalars) is
// converted; strings come as object arrays of str/bytes (or 'U'/'S' arrays).
// Outputs: numeric tensors become arrays sharing the tensor's memory; string
// tensors object arrays of str. bfloat16 uses ml_dtypes.bfloat16 when that
// package is importable, and float32 otherwise (input float32 is rounded to
// nearest even; uint16 arrays are taken as raw bfloat16 bits).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include <kiln/session.h>

namespace kiln::python {

namespace pyb = pybind11;

/// The numpy dtype Kiln's `t` maps to; None for kUndefined.
pyb::object numpy_dtype(DType t);
/// ONNX Runtime's type name of an input/output: "tensor(float)", "seq(tensor(int64))".
std::string ort_type_string(const IoInfo& info);

/// Converts a feed for input `name` whose declared dtype is `want`
/// (kUndefined: the array's own). Arrays borrowed without a copy are appended
/// to `keep`, which must outlive the returned tensor.
Tensor feed_to_tensor(const std::string& name, pyb::handle value, DType want, std::vector<pyb::object>& keep);

/// How many feeds were used in place and how many were converted (copied),
/// process-wide; kiln._kiln._input_stats() shows them to the tests.
struct InputStats {
  uint64_t borrowed = 0;
  uint64_t converted = 0;
};
InputStats input_stats();

/// A tensor, a sequence (list of arrays) or None.
pyb::object value_to_python(Value&& value);

}  // namespace kiln::python
