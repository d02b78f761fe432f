// ValueType: the static type of a graph value: a tensor (dtype + shape with
// known or symbolic dims), a sequence of a type, or an optional of a type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::ir {

/// One dimension: a known size (value >= 0), a named symbol (param), or unknown.
struct Dim {
  int64_t value = -1;
  std::string param;
  bool known() const { return value >= 0; }
};

struct ValueType {
  enum class Kind : uint8_t { kUnknown, kTensor, kSequence, kOptional, kMap };
  Kind kind = Kind::kUnknown;
  DType dtype = DType::kUndefined;  // tensor element type
  bool has_shape = false;           // false: rank unknown
  std::vector<Dim> dims;
  std::shared_ptr<ValueType> elem;  // sequence/optional element type

  static ValueType tensor(DType dtype, std::vector<Dim> dims) {
    ValueType t;
    t.kind = Kind::kTensor;
    t.dtype = dtype;
    t.has_shape = true;
    t.dims = std::move(dims);
    return t;
  }
  bool is_tensor() const { return kind == Kind::kTensor; }
  /// True if every dim is known.
  bool is_static() const {
    if (kind != Kind::kTensor || !has_shape) return false;
    for (const Dim& d : dims) if (!d.known()) return false;
    return true;
  }
  /// The shape when is_static().
  Shape static_shape() const {
    Shape s;
    s.resize(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) s[i] = dims[i].value;
    return s;
  }
  /// "float32[1, 3, N, 224]", "seq(float32[?])", "optional(...)"
  std::string to_string() const;
};

}  // namespace kiln::ir
