// Model inputs and outputs as files: reading .pb (TensorProto, SequenceProto,
// OptionalProto) and .npy files against a model's declared types, and making
// deterministic random inputs.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/result.h"
#include "kiln/session.h"
#include "kiln/value.h"

namespace kiln::cli {

/// Reads one value file for `info`: .npy (recognized by its magic bytes) or
/// an ONNX protobuf (TensorProto, or SequenceProto/OptionalProto when `info`
/// declares one). Errors name the file and what is wrong with it.
Result<Value> read_value_for(const std::string& path, const IoInfo& info);

/// Checks a value's kind, dtype and known dims against `info`; the error says
/// "input 'x' from 'f.npy' has dtype int64; the model expects float32[1, 3]".
Status check_value_for(const IoInfo& info, const Value& value, const std::string& source);

/// A deterministic random value of the declared type: symbolic or unknown
/// dims are 1 (unknown rank: shape [1]); floats uniform in [-1, 1), integers
/// in [0, 4), bools random, strings short words. Sequences hold one tensor,
/// optionals a value. Fails for types it cannot make (maps, unknown dtypes).
Result<Value> make_random_value(const IoInfo& info, uint64_t seed);

}  // namespace kiln::cli
