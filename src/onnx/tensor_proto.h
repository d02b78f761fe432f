// Conversion between ONNX TensorProto / SparseTensorProto and kiln::Tensor.
// Internal to src/onnx: nothing outside this folder sees protobuf.
//
// Reading follows the ONNX rules for where each dtype's values live
// (onnx.proto, TensorProto): float and complex64 in float_data; int32, int16,
// int8, uint16, uint8, bool, float16 and bfloat16 (as bits) in int32_data;
// int64 in int64_data; double and complex128 in double_data; uint32 and
// uint64 in uint64_data; strings in string_data; or any fixed-size dtype as
// little-endian bytes in raw_data; or in an external file (external_data.h).
// Every count is checked against the dims before anything is allocated, so a
// hostile file cannot make the importer allocate more than it holds.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/result.h"
#include "kiln/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln::importer {

class ExternalData;

/// The Kiln dtype of an ONNX TensorProto.DataType value. Errors name the
/// ONNX type (e.g. "FLOAT8E4M3FN") when Kiln does not support it.
Result<DType> dtype_from_onnx(int64_t data_type);
/// The ONNX spelling of a TensorProto.DataType value ("FLOAT", "INT64",
/// "FLOAT8E5M2", ...), or "unknown" for values no ONNX version defines.
const char* onnx_dtype_name(int64_t data_type);

/// Converts `proto` into a Tensor that owns its memory, or that maps an
/// external data file read-only. `external` resolves tensors whose
/// data_location is EXTERNAL; when it is null such tensors are an error.
/// Errors name the tensor and what is wrong with it.
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, ExternalData* external);

/// Converts a sparse tensor (COO values + indices, ONNX SparseTensorProto)
/// into a dense Tensor; absent elements are zero (or "" for strings).
Result<Tensor> tensor_from_sparse_proto(const onnx::SparseTensorProto& proto, ExternalData* external);

/// Writes `tensor` into `out` (dims, data_type, name; raw_data for numeric
/// dtypes, string_data for strings). Fails only for an undefined tensor.
Status tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto* out);

/// Number of elements of `dims`, or an error when a dim is negative or the
/// product (times `elem_size`) overflows. `what` names the tensor in errors.
Result<int64_t> checked_numel(const int64_t* dims, int rank, size_t elem_size, const std::string& what);

}  // namespace kiln::importer
