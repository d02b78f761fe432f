// Parsing ONNX protobuf messages from bytes and files, with errors that say
// what is wrong with the bytes (empty, truncated, not an ONNX model) instead
// of protobuf's bare "parse failed". Internal to src/onnx.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kiln/result.h"
#include "onnx/onnx_pb.h"

namespace kiln::importer {

/// How deep subgraphs may nest in a model (an If inside a Loop body is 2).
inline constexpr int kMaxSubgraphDepth = 16;

/// Parses a serialized ModelProto. Errors (kInvalidArgument): empty input,
/// more than 2 GiB (protobuf's limit; such models keep weights as external
/// data), a truncated message, bytes that are not an ONNX model, subgraphs
/// nested deeper than kMaxSubgraphDepth, or a corrupt nested message.
/// `what` names the source in messages ("model file 'a.onnx'").
Status parse_model_proto(std::span<const uint8_t> bytes, const std::string& what, onnx::ModelProto* out);

/// Maps `path` read-only and parses it as a ModelProto. Adds kNotFound (no
/// such file) and kIo (unreadable, not a regular file) to the errors above.
Status parse_model_file(const std::string& path, onnx::ModelProto* out);

/// Parses any message from bytes with the size limit raised to 2 GiB.
/// Returns false when protobuf rejects the bytes.
bool parse_message(std::span<const uint8_t> bytes, google::protobuf::MessageLite* out);

}  // namespace kiln::importer
