// Function inlining on the ONNX protobuf, before conversion: a call to a
// model-local function (FunctionProto), or to a standard op whose ONNX schema
// defines a function body when the runtime has no kernel for the op, is
// replaced by the body's nodes. Internal to src/onnx.
//
// Body values are renamed to names used nowhere else in the model
// ("<prefix>/<name>", where prefix is the calling node's name, or the
// function's name and a counter); formal inputs and outputs are bound to the
// call's actual names (an omitted optional input becomes ""). Attributes that
// refer to the caller's (ref_attr_name) are replaced by the caller's value,
// else by the function's default, else dropped, also inside subgraphs of the
// body. Calls inside bodies are expanded in turn. Inlined nodes keep the
// function's own opset imports (see node_opsets()).
//
// Working on protobuf lets ONNX shape inference type the inlined values.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "kiln/result.h"
#include "onnx/graph_converter.h"
#include "onnx/onnx_pb.h"

namespace kiln::importer {

/// Says whether the runtime has a kernel for (domain ("" = ai.onnx), op, opset).
using HasKernelFn = std::function<bool(const std::string& domain, const std::string& op, int opset)>;

class FunctionInliner {
 public:
  /// `model_opsets` are the model's imports. `types` (may be null) gives the
  /// types of values by name, used to build context-dependent function
  /// bodies (e.g. CastLike, Celu); it must outlive the inliner.
  FunctionInliner(onnx::ModelProto* model, const OpsetMap& model_opsets,
                  const std::unordered_map<std::string, const onnx::TypeProto*>* types);

  /// Inline calls to model-local functions.
  void set_inline_model_functions(bool on) { model_functions_ = on; }
  /// Inline schema function bodies of ops for which `has_kernel` is false.
  void set_has_kernel(HasKernelFn has_kernel) { has_kernel_ = std::move(has_kernel); }

  /// Inlines every call in the main graph and its subgraphs. Errors name the
  /// call: a body that reads an undefined name, an attribute of the wrong
  /// type, functions calling each other deeper than kMaxDepth (recursion).
  /// A schema body that ONNX cannot build leaves its node as it is.
  Status run();

  /// Number of calls replaced by their bodies.
  size_t num_inlined() const { return num_inlined_; }
  /// Opsets of inlined nodes whose function imports differ from the model's,
  /// keyed by the node's address in the model (valid while it is unchanged).
  const NodeOpsets& node_opsets() const { return node_opsets_; }

  static constexpr int kMaxDepth = 64;

 private:
  struct Body;
  struct Pending {
    onnx::NodeProto node;
    std::shared_ptr<const OpsetMap> opsets;
    int depth;  // function-call nesting the node came from
  };

  Status inline_graph(onnx::GraphProto* g, const std::shared_ptr<const OpsetMap>& opsets, int depth);
  Status expand(onnx::NodeProto node, const std::shared_ptr<const OpsetMap>& opsets, int depth,
                std::vector<Pending>* out);
  Result<bool> find_body(const onnx::NodeProto& node, const OpsetMap& opsets, Body* body);
  Status instantiate(const onnx::NodeProto& call, const Body& body, std::vector<onnx::NodeProto>* out);
  std::string fresh_name(const std::string& prefix, const std::string& name);
  void collect_names(const onnx::GraphProto& g);

  onnx::ModelProto* model_;
  std::shared_ptr<const OpsetMap> model_opsets_;
  const std::unordered_map<std::string, const onnx::TypeProto*>* types_;
  bool model_functions_ = true;
  HasKernelFn has_kernel_;
  std::unordered_map<std::string, const onnx::FunctionProto*> functions_;  // by function_key()
  std::unordered_set<std::string> used_names_;
  NodeOpsets node_opsets_;
  size_t num_inlined_ = 0;
};

/// The key of a model-local function: "domain:name" (domain normalized),
/// plus ":overload" when it has one (IR version 10).
std::string function_key(const std::string& domain, const std::string& name, const std::string& overload);

}  // namespace kiln::importer
