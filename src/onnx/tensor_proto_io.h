// Reading and writing ONNX TensorProto / SequenceProto / OptionalProto files
// (the backend-test layout: input_0.pb, output_0.pb) as Kiln Values.
#pragma once

#include <cstdint>
#include <span>
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
/// The same for the bytes of such a file; external data is read relative to
/// `base_dir`. Errors are those of read_value_file without the file name.
Result<Value> read_value_bytes(std::span<const uint8_t> bytes, const std::string& base_dir,
                               const ir::ValueType* expected = nullptr, std::string* name = nullptr);
/// Writes a tensor (TensorProto), sequence (SequenceProto) or none
/// (OptionalProto without value) with the given name.
Status write_value_file(const std::string& path, const Value& value, const std::string& name);

}  // namespace kiln::importer
