// ONNX -> Kiln IR. The only place in Kiln that sees protobuf and libonnx.
#pragma once

#include <cstdint>
#include <functional>
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
  /// Whether the runtime has a kernel for an op: (domain, "" for ai.onnx;
  /// op_type; the opset the node is imported with). When inline_functions is
  /// on and this returns false for a node whose ONNX schema has a function
  /// body (MeanVarianceNormalization, Celu, Range, ...), the node is replaced
  /// by that body. Empty (the default): every op is taken to have a kernel.
  std::function<bool(const std::string& domain, const std::string& op, int opset)> has_kernel;
};

/// IR versions the importer accepts (ONNX 1.0 to 1.16 write 1 to 10).
inline constexpr int64_t kMinIrVersion = 1;
inline constexpr int64_t kMaxIrVersion = 10;

/// Parses and converts a model file. Errors name what is wrong (file
/// missing, not an ONNX model, truncated, a node or tensor that is invalid).
Result<ir::Model> import_model_file(const std::string& path, const ImportOptions& options = {});
/// The same from bytes in memory.
Result<ir::Model> import_model_bytes(std::span<const uint8_t> bytes, const ImportOptions& options = {});

}  // namespace kiln::importer
