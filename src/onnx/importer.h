// ONNX -> Kiln IR. The only place in Kiln that sees protobuf and libonnx.
//
// What the imported ir::Model looks like:
// - Every graph (main, subgraph, function body) is topologically sorted and
//   validated. Values are named as in the file. Graph inputs exclude the
//   initializers (an initializer also listed as an input is a constant).
//   Trailing omitted inputs/outputs of a node are dropped; omitted ones in
//   the middle are kNoValue.
// - A subgraph's outer_refs are values with the same name as the enclosing
//   graph's value they stand for (bind them by name). A name a nested
//   subgraph reads is an outer ref of every graph in between as well.
//   Graph::topological_sort() orders a node after what its subgraphs read.
// - Node::domain is "" for ai.onnx; Node::opset is the opset the node is
//   imported with (the model's, or an inlined function's own import).
// - Constant nodes stay nodes. Sparse tensors (sparse_initializer, a
//   SPARSE_TENSOR(S) attribute such as Constant's sparse_value) arrive dense,
//   as kTensor / kTensors attributes under their own names.
// - Initializers from external data whose bytes start 64-byte aligned in
//   the side file map it read-only (never write into initializers).
// - Value types come from the model and from ONNX shape inference (with
//   data propagation) when infer_shapes is on; kUnknown where neither knows.
// - Inlined function bodies get value and node names "<caller>/<name>",
//   where <caller> is the calling node's name or "<function>_<n>".
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ir/graph.h"
#include "kiln/result.h"

namespace kiln::importer {

struct ImportOptions {
  /// Folder that external-data locations are relative to ("" = the current
  /// folder; import_model_file uses the model file's folder instead).
  std::string base_dir;
  /// Run ONNX shape inference (with data propagation) to type every value.
  /// A failure of inference never fails the import; types stay as declared.
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

/// IR versions the importer accepts (ONNX 1.0 to 1.22 write 1 to 13). A model
/// of a newer IR version is refused only when it uses a feature Kiln does not
/// implement (multi-device configurations), with an error naming it.
inline constexpr int64_t kMinIrVersion = 1;
inline constexpr int64_t kMaxIrVersion = 13;

/// Parses and converts a model file. Errors name what is wrong (file
/// missing, not an ONNX model, truncated, a node or tensor that is invalid).
Result<ir::Model> import_model_file(const std::string& path, const ImportOptions& options = {});
/// The same from bytes in memory.
Result<ir::Model> import_model_bytes(std::span<const uint8_t> bytes, const ImportOptions& options = {});

}  // namespace kiln::importer
