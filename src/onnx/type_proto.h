// ONNX TypeProto -> ir::ValueType. Internal to src/onnx.
#pragma once

#include "ir/value_type.h"
#include "kiln/result.h"
#include "onnx/onnx_pb.h"

namespace kiln::importer {

/// Converts a TypeProto. Tensor and sparse tensor types become kTensor (Kiln
/// densifies sparse data), sequence and optional types carry their element
/// type in `elem`, a map becomes kMap with `dtype` = the key type and `elem`
/// = the value type. A TypeProto with no value set (or an opaque type) is
/// kUnknown. A dim with dim_value is known, one with dim_param is symbolic,
/// one with neither is unknown. An element type Kiln does not support is an
/// error naming it.
Result<ir::ValueType> value_type_from_proto(const onnx::TypeProto& proto);

/// Like value_type_from_proto, but a type that cannot be converted becomes
/// kUnknown instead of an error (for types that only inform, like the
/// value_info that shape inference adds).
ir::ValueType value_type_from_proto_or_unknown(const onnx::TypeProto& proto);

/// Writes `type` into `out` (the reverse of value_type_from_proto).
void value_type_to_proto(const ir::ValueType& type, onnx::TypeProto* out);

}  // namespace kiln::importer
