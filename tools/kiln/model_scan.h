// A quick look at the nodes of an ONNX model file without importing it: op
// types, domains, input names and scalar attributes of every node, in the
// main graph, its subgraphs and model-local functions. Conformance uses it to
// skip tests of nondeterministic ops before loading them.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kiln/result.h"

namespace kiln::cli {

struct ScannedNode {
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  std::vector<std::string> inputs;
  std::map<std::string, int64_t> ints;
  std::map<std::string, float> floats;
};

struct ModelScan {
  std::map<std::string, int64_t> opsets;  // domain ("" for ai.onnx) -> version
  std::vector<ScannedNode> nodes;

  /// The opset of the default ONNX domain (0 if the model does not say).
  int64_t onnx_opset() const;
};

/// Scans serialized ModelProto bytes. Errors name `what` and the problem.
Result<ModelScan> scan_model_bytes(std::span<const uint8_t> bytes, const std::string& what);
/// Reads and scans a model file.
Result<ModelScan> scan_model_file(const std::string& path);

}  // namespace kiln::cli
