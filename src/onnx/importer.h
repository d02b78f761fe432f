// ONNX -> Kiln IR. The only place in Kiln that sees protobuf and libonnx.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ir/graph.h"
#include "kiln/result.h"

namespace kiln::importer {

struct ImportOptions {
  /// Folder that external-data locations are relative to ("" = cwd).
  std::string base_dir;
  /// Run ONNX shape inference (with data propagation) to type every value.
  bool infer_shapes = true;
  /// Inline model-local functions, and schema-defined function bodies of ops
  /// for which `has_kernel(domain, op, opset)` is false.
  bool inline_functions = true;
};

/// Parses and converts a model file. Errors name what is wrong (file
/// missing, not an ONNX model, truncated, a node or tensor that is invalid).
Result<ir::Model> import_model_file(const std::string& path, const ImportOptions& options = {});
/// The same from bytes in memory.
Result<ir::Model> import_model_bytes(std::span<const uint8_t> bytes, const ImportOptions& options = {});

}  // namespace kiln::importer
