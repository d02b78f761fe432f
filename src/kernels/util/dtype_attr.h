// Reading an element-type attribute (an ONNX TensorProto.DataType number:
// Cast's "to", RandomNormal's "dtype", QuantizeLinear's "output_dtype") into
// a DType. A bare static_cast keeps the low byte of any int64 (DType is a
// uint8_t enum), so 257 reads as FLOAT and 1342177279 as a value no dtype
// table has (fuzz_session found the second shifting a DTypeSet by 255).
#pragma once

#include <cstdint>
#include <string_view>

#include "kernels/kernel.h"
#include "kiln/dtype.h"
#include "kiln/result.h"

namespace kiln::kernels {

/// The attribute `name` as a DType (`dflt` when absent); an error naming the
/// attribute when the value is no ONNX element type Kiln knows (0 is
/// kUndefined, left to the kernel to judge).
inline Result<DType> dtype_attr(const KernelInit& init, std::string_view name, DType dflt) {
  const int64_t v = init.attr_int(name, static_cast<int64_t>(dflt));
  if (v < 0 || v >= kNumDTypes) return invalid_argument("attribute '", name, "' is ", v, ", not an ONNX element type");
  return static_cast<DType>(v);
}

}  // namespace kiln::kernels
