#include "ir/graph.h"

#include <algorithm>

namespace kiln::ir {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kUndefined: return "undefined";
    case AttrType::kFloat: return "float";
    case AttrType::kInt: return "int";
    case AttrType::kString: return "string";
    case AttrType::kTensor: return "tensor";
    case AttrType::kGraph: return "graph";
    case AttrType::kSparseTensor: return "sparse_tensor";
    case AttrType::kTypeProto: return "type_proto";
    case AttrType::kFloats: return "floats";
    case AttrType::kInts: return "ints";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensors: return "tensors";
    case AttrType::kGraphs: return "graphs";
    case AttrType::kSparseTensors: return "sparse_tensors";
    case AttrType::kTypeProtos: return "type_protos";
  }
  return "invalid";
}

std::string ValueType::to_string() const {
  switch (kind) {
    case Kind::kUnknown: return "?";
    case Kind::kSequence: return "seq(" + (elem ? elem->to_string() : std::string("?")) + ")";
    case Kind::kOptional: return "optional(" + (elem ? elem->to_string() : std::string("?")) + ")";
    case Kind::kMap: return "map";
    case Kind::kTensor: break;
  }
  std::string s = dtype_name(dtype);
  if (!has_shape) return s + "[...]";
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i].known() ? std::to_string(dims[i].value) : (dims[i].param.empty() ? "?" : dims[i].param);
  }
  return s + "]";
}

const Attribute* Node::find_attr(std::string_view attr_name) const {
  for (const Attribute& a : attributes)
    if (a.name == attr_name) return &a;
  return nullptr;
}

namespace {

// The attribute `n` of `node` when it is present with a type; an error when
// that type is not `want` (nor `also`, a second accepted type).
Result<const Attribute*> typed_attr(const Node& node, std::string_view n, AttrType want,
                                    AttrType also = AttrType::kUndefined) {
  const Attribute* a = node.find_attr(n);
  if (a == nullptr || a->type == AttrType::kUndefined) return static_cast<const Attribute*>(nullptr);
  if (a->type == want || (also != AttrType::kUndefined && a->type == also)) return a;
  return invalid_argument("attribute '", n, "' has type ", attr_type_name(a->type), ", expected ",
                          attr_type_name(want));
}

}  // namespace

Result<int64_t> Node::attr_int(std::string_view n, int64_t dflt) const {
  KILN_ASSIGN_OR_RETURN(const Attribute* a, typed_attr(*this, n, AttrType::kInt));
  return a ? a->i : dflt;
}
Result<float> Node::attr_float(std::string_view n, float dflt) const {
  KILN_ASSIGN_OR_RETURN(const Attribute* a, typed_attr(*this, n, AttrType::kFloat, AttrType::kInt));
  if (!a) return dflt;
  return a->type == AttrType::kFloat ? a->f : static_cast<float>(a->i);
}
Result<std::string> Node::attr_string(std::string_view n, std::string_view dflt) const {
  KILN_ASSIGN_OR_RETURN(const Attribute* a, typed_attr(*this, n, AttrType::kString));
  return a ? a->s : std::string(dflt);
}
Result<std::vector<int64_t>> Node::attr_ints(std::string_view n) const {
  KILN_ASSIGN_OR_RETURN(const Attribute* a, typed_attr(*this, n, AttrType::kInts));
  return a ? a->ints : std::vector<int64_t>{};
}
Result<std::vector<float>> Node::attr_floats(std::string_view n) const {
  KILN_ASSIGN_OR_RETURN(const Attribute* a, typed_attr(*this, n, AttrType::kFloats));
  return a ? a->floats : std::vector<float>{};
}
Result<std::vector<std::string>> Node::attr_strings(std::string_view n) const {
  KILN_ASSIGN_OR_RETURN(const Attribute* a, typed_attr(*this, n, AttrType::kStrings));
  return a ? a->strings : std::vector<std::string>{};
}
Result<const Tensor*> Node::attr_tensor(std::string_view n) const {
  KILN_ASSIGN_OR_RETURN(const Attribute* a, typed_attr(*this, n, AttrType::kTensor));
  return a ? &a->t : nullptr;
}
Result<const Graph*> Node::attr_graph(std::string_view n) const {
  KILN_ASSIGN_OR_RETURN(const Attribute* a, typed_attr(*this, n, AttrType::kGraph));
  return a ? a->g.get() : nullptr;
}

std::string Node::label() const {
  std::string s = domain.empty() ? op_type : domain + "." + op_type;
  if (!name.empty()) s += " '" + name + "'";
  return s;
}

ValueId Graph::add_value(std::string value_name, ValueType type) {
  auto id = static_cast<ValueId>(values.size());
  if (!value_name.empty()) by_name_[value_name] = id;
  values.push_back(ValueInfo{std::move(value_name), std::move(type)});
  return id;
}

ValueId Graph::find_value(std::string_view value_name) const {
  auto it = by_name_.find(std::string(value_name));
  return it == by_name_.end() ? kNoValue : it->second;
}

std::vector<int32_t> Graph::producers() const {
  std::vector<int32_t> p(values.size(), -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId o : nodes[n].outputs)
      if (o != kNoValue) p[static_cast<size_t>(o)] = static_cast<int32_t>(n);
  return p;
}

Status Graph::validate() const {
  const auto nv = static_cast<ValueId>(values.size());
  std::vector<int8_t> defined(values.size(), 0);
  for (ValueId id : inputs) defined[static_cast<size_t>(id)] = 1;
  for (const auto& [id, t] : initializers) defined[static_cast<size_t>(id)] = 1;
  for (ValueId id : outer_refs) defined[static_cast<size_t>(id)] = 1;
  for (const Node& n : nodes) {
    for (ValueId id : n.inputs)
      KILN_CHECK_OR_RETURN(id >= kNoValue && id < nv, StatusCode::kInvalidArgument, "node ",
                           n.label(), " has an input id out of range");
    for (ValueId id : n.outputs) {
      KILN_CHECK_OR_RETURN(id >= kNoValue && id < nv, StatusCode::kInvalidArgument, "node ",
                           n.label(), " has an output id out of range");
      if (id == kNoValue) continue;
      KILN_CHECK_OR_RETURN(!defined[static_cast<size_t>(id)], StatusCode::kInvalidArgument,
                           "value '", value_name(id), "' is produced more than once (again by node ",
                           n.label(), ")");
      defined[static_cast<size_t>(id)] = 1;
    }
  }
  for (ValueId id : outputs) {
    KILN_CHECK_OR_RETURN(id >= 0 && id < nv, StatusCode::kInvalidArgument, "graph output id out of range");
    KILN_CHECK_OR_RETURN(defined[static_cast<size_t>(id)], StatusCode::kInvalidArgument,
                         "graph output '", value_name(id), "' is not produced by any node");
  }
  return Status::ok();
}

namespace {

// Values of `g` that a node reads: its inputs, and the outer references of
// its subgraphs (If/Loop/Scan bodies read enclosing values by name), which
// must be computed before the node runs just like its inputs.
void node_reads(const Graph& g, const Node& n, std::vector<ValueId>* out) {
  out->clear();
  for (ValueId in : n.inputs)
    if (in != kNoValue) out->push_back(in);
  auto add_refs = [&](const Graph* sub) {
    if (!sub) return;
    for (ValueId ref : sub->outer_refs) {
      const ValueId id = g.find_value(sub->value_name(ref));
      if (id != kNoValue) out->push_back(id);
    }
  };
  for (const Attribute& a : n.attributes) {
    if (a.type == AttrType::kGraph) add_refs(a.g.get());
    if (a.type == AttrType::kGraphs)
      for (const auto& sub : a.graphs) add_refs(sub.get());
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
}

}  // namespace

Status Graph::topological_sort() {
  const size_t nv = values.size();
  std::vector<int32_t> producer(nv, -1);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId o : nodes[n].outputs)
      if (o != kNoValue) producer[static_cast<size_t>(o)] = static_cast<int32_t>(n);
  std::vector<int8_t> available(nv, 0);
  for (ValueId id : inputs) available[static_cast<size_t>(id)] = 1;
  for (const auto& [id, t] : initializers) available[static_cast<size_t>(id)] = 1;
  for (ValueId id : outer_refs) available[static_cast<size_t>(id)] = 1;

  // Kahn's algorithm, always taking the ready node that comes first in the
  // file (a min-heap), so an order that is already valid is kept as it is.
  std::vector<int32_t> missing(nodes.size(), 0);
  std::vector<std::vector<int32_t>> consumers(nv);
  std::vector<ValueId> reads;
  for (size_t n = 0; n < nodes.size(); ++n) {
    node_reads(*this, nodes[n], &reads);
    for (ValueId in : reads) {
      if (available[static_cast<size_t>(in)]) continue;
      if (producer[static_cast<size_t>(in)] < 0) {
        return invalid_argument("node ", nodes[n].label(), " reads '", value_name(in),
                                "', which no node, input or initializer defines");
      }
      ++missing[n];
      consumers[static_cast<size_t>(in)].push_back(static_cast<int32_t>(n));
    }
  }
  std::vector<int32_t> ready;  // a min-heap of node indices
  for (size_t n = 0; n < nodes.size(); ++n)
    if (missing[n] == 0) ready.push_back(static_cast<int32_t>(n));
  std::make_heap(ready.begin(), ready.end(), std::greater<>());
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), std::greater<>());
    const int32_t n = ready.back();
    ready.pop_back();
    for (ValueId o : nodes[static_cast<size_t>(n)].outputs) {
      if (o == kNoValue) continue;
      for (int32_t c : consumers[static_cast<size_t>(o)]) {
        if (--missing[static_cast<size_t>(c)] == 0) {
          ready.push_back(c);
          std::push_heap(ready.begin(), ready.end(), std::greater<>());
        }
      }
    }
    sorted.push_back(std::move(nodes[static_cast<size_t>(n)]));
  }
  if (sorted.size() != nodes.size()) {
    for (size_t n = 0; n < nodes.size(); ++n)
      if (missing[n] > 0) return invalid_argument("graph has a cycle through node ", nodes[n].label());
  }
  nodes = std::move(sorted);
  return Status::ok();
}

}  // namespace kiln::ir
