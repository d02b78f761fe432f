// Reading and writing ONNX TensorProto / SequenceProto / OptionalProto files
// (the backend-test layout: input_0.pb, output_0.pb) as Kiln Values.
#pragma once

#include <string>

#include "ir/value_type.h"
#include "kiln/result.h"
#include "kiln/value.h"

namespace kiln::importer {

/// Reads a .pb file. `expected` (may be null) says whether a TensorProto,
/// SequenceProto or OptionalProto is expected; null means TensorProto.
/// Returns the value and, in *name, the proto's name field if given.
Result<Value> read_value_file(const std::string& path, const ir::ValueType* expected = nullptr,
                              std::string* name = nullptr);
/// Writes a tensor (TensorProto), sequence (SequenceProto) or none
/// (OptionalProto without value) with the given name.
Status write_value_file(const std::string& path, const Value& value, const std::string& name);

}  // namespace kiln::importer
