// GraphProto / FunctionProto -> ir::Graph / ir::Function. Internal to src/onnx.
//
// Every graph, subgraph and function body becomes an ir::Graph of its own:
// values by name (inputs, then initializers, then node outputs, then outer
// references), graph inputs without the initializers, sparse initializers
// made dense, nodes with every attribute kind, then topologically sorted and
// validated. A subgraph that reads a name defined only by an enclosing graph
// gets a value of the same name listed in its outer_refs; so does every
// graph between it and the one that defines the name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "ir/graph.h"
#include "kiln/result.h"
#include "onnx/onnx_pb.h"

namespace kiln::importer {

class ExternalData;

/// Opset version per domain; "" stands for "ai.onnx".
using OpsetMap = std::map<std::string, int>;
/// Opsets of nodes that came from an inlined function body whose opset
/// imports differ from the model's (see function_inliner.h).
using NodeOpsets = std::unordered_map<const onnx::NodeProto*, std::shared_ptr<const OpsetMap>>;

/// "" for "ai.onnx" and "", the domain itself otherwise.
std::string normalize_domain(const std::string& domain);

struct ConvertContext {
  /// The model's opset imports (required).
  const OpsetMap* model_opsets = nullptr;
  /// Overrides for nodes of inlined function bodies (may be null).
  const NodeOpsets* node_opsets = nullptr;
  /// Resolves external tensor data (may be null: such tensors fail).
  ExternalData* external = nullptr;
  /// Clears each initializer's data in the proto once it is converted, so a
  /// large model is not held twice. Needs a proto the caller discards.
  bool release_tensor_data = false;
  /// Checks structure only: tensors (initializers, tensor attributes) are
  /// not read and come out undefined. For validating before shape inference.
  bool check_only = false;
};

/// Converts the model's main graph. `typed`, when not null, is a copy of
/// `graph` after ONNX shape inference (same nodes in the same order): value
/// types are taken from it, falling back on `graph`'s own declarations.
/// `graph` is mutable only for ConvertContext::release_tensor_data.
Status convert_main_graph(onnx::GraphProto* graph, const onnx::GraphProto* typed, const ConvertContext& ctx,
                          ir::Graph* out);

/// Converts a model-local function. Its body is closed: a name it reads must
/// be a formal input or a node output of the body. Body nodes get the
/// function's opset imports, falling back on the model's.
Status convert_function(const onnx::FunctionProto& function, const ConvertContext& ctx, ir::Function* out);

/// Repeated AttributeProto entries of FunctionProto.attribute_proto (field
/// 11, added in IR version 9: attributes with default values), read from the
/// unknown fields since ONNX 1.12's protobuf schema predates them.
std::vector<onnx::AttributeProto> function_attribute_defaults(const onnx::FunctionProto& function);
/// The `overload` string of a FunctionProto (field 13) or NodeProto (field
/// 8), IR version 10, likewise read from unknown fields; "" when absent.
std::string function_overload(const onnx::FunctionProto& function);
std::string node_overload(const onnx::NodeProto& node);

/// Fields of newer ONNX IR versions that ONNX 1.12's protobuf schema keeps
/// as unknown fields and that Kiln refuses (it does not implement them):
/// multi-device execution, IR version 11.
inline constexpr int kNodeDeviceConfigurationsField = 10;  // NodeProto.device_configurations
inline constexpr int kModelConfigurationField = 26;        // ModelProto.configuration
/// Whether `m` carries unknown field `number` (read past ONNX 1.12's schema).
bool has_unknown_field(const google::protobuf::Message& m, int number);

}  // namespace kiln::importer
