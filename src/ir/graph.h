// Graph, Node and Model: Kiln's in-memory form of a model, independent of
// ONNX protobuf. Values are numbered (ValueId); a node names its inputs and
// outputs by id; kNoValue marks an omitted optional input or output.
//
// A subgraph (the body of If/Loop/Scan) is a Graph of its own. It may read
// values of the enclosing graphs by name: those are listed in outer_refs and
// bound at run time by the control-flow kernel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/attribute.h"
#include "ir/value_type.h"
#include "kiln/result.h"
#include "kiln/value.h"

namespace kiln::ir {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

struct ValueInfo {
  std::string name;
  ValueType type;  // kind kUnknown when neither the model nor inference says
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain ("ai.onnx")
  int opset = 0;       // the model's opset import for `domain`
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<Attribute> attributes;
  std::string doc;

  const Attribute* find_attr(std::string_view attr_name) const;
  bool has_attr(std::string_view n) const { return find_attr(n) != nullptr; }

  // Typed, fallible attribute reads. Absent (or present without a type): the
  // default, an empty list or null. Present with another type: an
  // InvalidArgument error naming the attribute and both types ("attribute
  // 'alpha' has type string, expected float"); the caller adds the node, as the
  // program loader and the executor do ("node Elu 'e': ..."). A float read
  // also accepts an int attribute (exporters write alpha=1).
  Result<int64_t> attr_int(std::string_view n, int64_t dflt) const;
  Result<float> attr_float(std::string_view n, float dflt) const;
  Result<std::string> attr_string(std::string_view n, std::string_view dflt) const;
  Result<std::vector<int64_t>> attr_ints(std::string_view n) const;
  Result<std::vector<float>> attr_floats(std::string_view n) const;
  Result<std::vector<std::string>> attr_strings(std::string_view n) const;
  Result<const Tensor*> attr_tensor(std::string_view n) const;
  Result<const Graph*> attr_graph(std::string_view n) const;

  /// Number of inputs that are present (the trailing absent ones dropped).
  size_t num_inputs() const { return inputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != kNoValue; }
  bool has_output(size_t i) const { return i < outputs.size() && outputs[i] != kNoValue; }
  /// "Conv 'conv1'" for messages.
  std::string label() const;
};

/// Where an initializer's bytes came from when the model kept them in an
/// ONNX external-data file (TensorProto.data_location EXTERNAL).
struct ExternalLocation {
  std::string path;     // absolute, symlinks resolved
  uint64_t offset = 0;  // of the first byte in the file
  uint64_t length = 0;  // bytes
  /// The initializer's data pointer when it was imported: a constant whose
  /// data is elsewhere (rewritten, folded) no longer lives in the file.
  const void* data = nullptr;
  /// `data` points into a read-only mapping of the file (not a copy).
  bool mapped = false;
};

class Graph {
 public:
  std::string name;
  std::vector<ValueInfo> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;   // excludes initializers
  std::vector<ValueId> outputs;
  std::unordered_map<ValueId, Tensor> initializers;
  /// The initializers whose bytes came from an ONNX external-data file.
  std::unordered_map<ValueId, ExternalLocation> external_data;
  /// Values read from enclosing graphs (subgraphs only).
  std::vector<ValueId> outer_refs;
  /// Opset imports per domain ("" for ai.onnx).
  std::map<std::string, int> opsets;

  /// Adds a value and returns its id; names must be unique (empty allowed).
  ValueId add_value(std::string value_name, ValueType type = {});
  /// The id of a named value, or kNoValue.
  ValueId find_value(std::string_view value_name) const;
  const ValueInfo& value(ValueId id) const { return values[static_cast<size_t>(id)]; }
  ValueInfo& value(ValueId id) { return values[static_cast<size_t>(id)]; }
  const std::string& value_name(ValueId id) const { return values[static_cast<size_t>(id)].name; }
  bool is_initializer(ValueId id) const { return initializers.count(id) != 0; }
  const Tensor* initializer(ValueId id) const {
    auto it = initializers.find(id);
    return it == initializers.end() ? nullptr : &it->second;
  }

  /// Orders nodes so every node follows the producers of its inputs. Fails,
  /// naming a node, when a value has no producer or the graph has a cycle.
  Status topological_sort();
  /// Checks ids in range, single producers, outputs produced. Names the problem.
  Status validate() const;
  /// The node index producing each value (-1 for inputs, initializers, outer refs).
  std::vector<int32_t> producers() const;

 private:
  std::unordered_map<std::string, ValueId> by_name_;
};

/// A model-local ONNX function (FunctionProto): a body with formal inputs,
/// outputs and attributes, expanded into the caller at import.
struct Function {
  std::string name;
  std::string domain;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> attributes;        // names of attributes without default
  std::vector<Attribute> attribute_defaults;  // attribute_proto (with defaults)
  std::map<std::string, int> opsets;
  /// The body as a graph whose inputs/outputs are the formal parameters.
  std::shared_ptr<Graph> body;
};

struct Model {
  int64_t ir_version = 0;
  std::string producer;
  std::string doc;
  std::map<std::string, std::string> metadata;
  Graph graph;
  std::vector<Function> functions;
};

}  // namespace kiln::ir
