#include "onnx/graph_converter.h"

#include <google/protobuf/unknown_field_set.h>

#include <unordered_set>

#include "onnx/external_data.h"
#include "onnx/model_parser.h"
#include "onnx/tensor_proto.h"
#include "onnx/type_proto.h"

namespace kiln::importer {

namespace {

using onnx::AttributeProto;

// One graph being converted, chained to the graphs that enclose it.
struct Scope {
  const Scope* parent = nullptr;
  ir::Graph* graph = nullptr;
};

// The id of `name` in `scope`'s graph. A name that only an enclosing graph
// defines is added to this graph (and every graph in between) as an outer
// reference. kNoValue when no graph in the chain defines it.
ir::ValueId resolve(const Scope& scope, const std::string& name) {
  ir::ValueId id = scope.graph->find_value(name);
  if (id != ir::kNoValue || !scope.parent) return id;
  const ir::ValueId outer = resolve(*scope.parent, name);
  if (outer == ir::kNoValue) return ir::kNoValue;
  id = scope.graph->add_value(name, scope.parent->graph->value(outer).type);
  scope.graph->outer_refs.push_back(id);
  return id;
}

std::string node_label(const onnx::NodeProto& n) {
  std::string s = "node ";
  const std::string domain = normalize_domain(n.domain());
  s += domain.empty() ? n.op_type() : domain + "." + n.op_type();
  if (!n.name().empty()) s += " '" + n.name() + "'";
  return s;
}

// Types by value name: value_info first, then inputs and outputs (whose
// declared or inferred types win).
using TypeIndex = std::unordered_map<std::string, const onnx::TypeProto*>;
TypeIndex index_types(const onnx::GraphProto& g) {
  TypeIndex types;
  for (const auto& vi : g.value_info())
    if (vi.has_type()) types[vi.name()] = &vi.type();
  for (const auto& vi : g.input())
    if (vi.has_type()) types[vi.name()] = &vi.type();
  for (const auto& vi : g.output())
    if (vi.has_type()) types[vi.name()] = &vi.type();
  return types;
}

ir::ValueType tensor_value_type(const Tensor& t) {
  std::vector<ir::Dim> dims;
  for (int64_t d : t.shape()) dims.push_back(ir::Dim{d, {}});
  return ir::ValueType::tensor(t.dtype(), std::move(dims));
}

ir::AttrType guess_attr_type(const AttributeProto& a) {
  if (a.has_f()) return ir::AttrType::kFloat;
  if (a.has_i()) return ir::AttrType::kInt;
  if (a.has_s()) return ir::AttrType::kString;
  if (a.has_t()) return ir::AttrType::kTensor;
  if (a.has_g()) return ir::AttrType::kGraph;
  if (a.has_sparse_tensor()) return ir::AttrType::kSparseTensor;
  if (a.has_tp()) return ir::AttrType::kTypeProto;
  if (a.floats_size()) return ir::AttrType::kFloats;
  if (a.ints_size()) return ir::AttrType::kInts;
  if (a.strings_size()) return ir::AttrType::kStrings;
  if (a.tensors_size()) return ir::AttrType::kTensors;
  if (a.graphs_size()) return ir::AttrType::kGraphs;
  if (a.sparse_tensors_size()) return ir::AttrType::kSparseTensors;
  if (a.type_protos_size()) return ir::AttrType::kTypeProtos;
  return ir::AttrType::kUndefined;
}

// The graph's outputs: each must resolve to a value of the graph (or an
// enclosing one); a value still untyped takes the output's declared type.
template <class TypeOf>
Status add_outputs(const onnx::GraphProto& g, const Scope& scope, const TypeOf& type_of, ir::Graph* out) {
  for (int i = 0; i < g.output_size(); ++i) {
    const auto& vi = g.output(i);
    if (vi.name().empty()) return invalid_argument("graph output ", i, " has no name");
    const ir::ValueId id = resolve(scope, vi.name());
    if (id == ir::kNoValue)
      return invalid_argument("graph output '", vi.name(),
                              "' is not produced by any node and is not a graph input or initializer");
    if (vi.has_type()) {
      auto t = value_type_from_proto(vi.type());
      if (!t.ok()) return std::move(t).status().with_context("graph output '" + vi.name() + "'");
    }
    ir::ValueInfo& info = out->value(id);
    if (info.type.kind == ir::ValueType::Kind::kUnknown) info.type = type_of(vi.name());
    out->outputs.push_back(id);
  }
  return Status::ok();
}

class Converter {
 public:
  explicit Converter(const ConvertContext& ctx) : ctx_(ctx) {}

  // Converts `g` (with `typed`, its shape-inferred twin, or null) into `out`.
  // `parent` is the enclosing graph's scope (null for the main graph).
  Status graph(onnx::GraphProto& g, const onnx::GraphProto* typed, const Scope* parent, const OpsetMap& opsets,
               ir::Graph* out);
  Status function(const onnx::FunctionProto& f, ir::Function* out);

 private:
  Status define(ir::Graph* out, const std::string& name, const std::string& by, ir::ValueType type,
                ir::ValueId* id);
  Status nodes(onnx::GraphProto& g, const onnx::GraphProto* typed, const Scope& scope, const OpsetMap& opsets,
               bool closed);
  Status node(onnx::NodeProto& n, const onnx::NodeProto* typed, const Scope& scope, const OpsetMap& opsets,
              bool closed, ir::Node* out);
  Status attribute(AttributeProto& a, const AttributeProto* typed, const Scope* scope, const OpsetMap& opsets,
                   ir::Attribute* out);
  Result<std::shared_ptr<ir::Graph>> subgraph(onnx::GraphProto& g, const onnx::GraphProto* typed,
                                              const Scope* scope, const OpsetMap& opsets);
  Status finish(ir::Graph* out);

  const ConvertContext& ctx_;
  // Who defined each name of the graph being converted, for messages.
  std::vector<std::unordered_map<std::string, std::string>> definers_;
};

Status Converter::define(ir::Graph* out, const std::string& name, const std::string& by, ir::ValueType type,
                         ir::ValueId* id) {
  auto& definers = definers_.back();
  auto it = definers.find(name);
  if (it != definers.end())
    return invalid_argument("value '", name, "' is defined twice: by ", it->second, " and by ", by);
  definers.emplace(name, by);
  *id = out->add_value(name, std::move(type));
  return Status::ok();
}

Status Converter::graph(onnx::GraphProto& g, const onnx::GraphProto* typed, const Scope* parent,
                        const OpsetMap& opsets, ir::Graph* out) {
  out->name = g.name();
  out->opsets = opsets;
  definers_.emplace_back();
  struct PopDefiners {
    std::vector<std::unordered_map<std::string, std::string>>* v;
    ~PopDefiners() { v->pop_back(); }
  } pop{&definers_};

  const TypeIndex types = index_types(typed ? *typed : g);
  const TypeIndex own_types = typed ? index_types(g) : TypeIndex{};
  auto type_of = [&](const std::string& name) -> ir::ValueType {
    auto it = types.find(name);
    if (it != types.end()) return value_type_from_proto_or_unknown(*it->second);
    it = own_types.find(name);
    return it != own_types.end() ? value_type_from_proto_or_unknown(*it->second) : ir::ValueType{};
  };

  std::unordered_set<std::string> initializer_names;
  for (const auto& t : g.initializer()) initializer_names.insert(t.name());
  for (const auto& t : g.sparse_initializer()) initializer_names.insert(t.values().name());

  // Graph inputs (those with an initializer are constants, not inputs).
  std::unordered_map<std::string, const onnx::ValueInfoProto*> declared_inputs;
  for (int i = 0; i < g.input_size(); ++i) {
    const auto& vi = g.input(i);
    if (vi.name().empty()) return invalid_argument("graph input ", i, " has no name");
    if (!declared_inputs.emplace(vi.name(), &vi).second)
      return invalid_argument("graph input '", vi.name(), "' is listed twice");
    if (vi.has_type()) {
      auto t = value_type_from_proto(vi.type());
      if (!t.ok()) return std::move(t).status().with_context("graph input '" + vi.name() + "'");
    }
    if (initializer_names.count(vi.name())) continue;
    ir::ValueId id;
    KILN_RETURN_IF_ERROR(define(out, vi.name(), "graph input " + std::to_string(i), type_of(vi.name()), &id));
    out->inputs.push_back(id);
  }

  // Initializers, dense and sparse.
  auto add_initializer = [&](const std::string& name, Tensor t, const char* kind) -> Status {
    if (name.empty()) return invalid_argument("an ", kind, " has no name");
    ir::ValueType vt = t.defined() ? tensor_value_type(t) : ir::ValueType{};
    if (declared_inputs.count(name)) {
      ir::ValueType declared = type_of(name);
      if (declared.kind != ir::ValueType::Kind::kUnknown) vt = std::move(declared);
    }
    ir::ValueId id;
    KILN_RETURN_IF_ERROR(define(out, name, std::string(kind) + " '" + name + "'", std::move(vt), &id));
    out->initializers.emplace(id, std::move(t));
    return Status::ok();
  };
  for (auto& tp : *g.mutable_initializer()) {
    if (ctx_.check_only) {
      KILN_RETURN_IF_ERROR(add_initializer(tp.name(), Tensor(), "initializer"));
      continue;
    }
    auto t = tensor_from_proto(tp, ctx_.external);
    if (!t.ok()) return std::move(t).status().with_context("initializer '" + tp.name() + "'");
    const ir::ExternalLocation* loc = ctx_.external ? ctx_.external->location_of(t->raw_data()) : nullptr;
    KILN_RETURN_IF_ERROR(add_initializer(tp.name(), std::move(*t), "initializer"));
    if (loc) out->external_data.emplace(out->find_value(tp.name()), *loc);
    if (ctx_.release_tensor_data) {
      tp.clear_raw_data();
      tp.clear_float_data();
      tp.clear_int32_data();
      tp.clear_int64_data();
      tp.clear_double_data();
      tp.clear_uint64_data();
      tp.clear_string_data();
    }
  }
  for (const auto& sp : g.sparse_initializer()) {
    if (ctx_.check_only) {
      KILN_RETURN_IF_ERROR(add_initializer(sp.values().name(), Tensor(), "sparse initializer"));
      continue;
    }
    auto t = tensor_from_sparse_proto(sp, ctx_.external);
    if (!t.ok()) return std::move(t).status().with_context("sparse initializer '" + sp.values().name() + "'");
    KILN_RETURN_IF_ERROR(add_initializer(sp.values().name(), std::move(*t), "sparse initializer"));
  }

  // Node outputs, all before any node is converted so that subgraphs can
  // read values of this graph that later nodes produce.
  for (const auto& n : g.node()) {
    for (const std::string& o : n.output()) {
      if (o.empty()) continue;
      ir::ValueId id;
      KILN_RETURN_IF_ERROR(define(out, o, node_label(n), type_of(o), &id));
    }
  }

  const Scope scope{parent, out};
  KILN_RETURN_IF_ERROR(nodes(g, typed, scope, opsets, /*closed=*/false));

  KILN_RETURN_IF_ERROR(add_outputs(g, scope, type_of, out));
  return finish(out);
}

Status Converter::finish(ir::Graph* out) {
  KILN_RETURN_IF_ERROR(out->topological_sort());
  return out->validate();
}

Status Converter::nodes(onnx::GraphProto& g, const onnx::GraphProto* typed, const Scope& scope,
                        const OpsetMap& opsets, bool closed) {
  const bool twin = typed && typed->node_size() == g.node_size();
  scope.graph->nodes.reserve(static_cast<size_t>(g.node_size()));
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto& n = *g.mutable_node(i);
    const onnx::NodeProto* tn = twin && typed->node(i).op_type() == n.op_type() ? &typed->node(i) : nullptr;
    ir::Node converted;
    Status s = node(n, tn, scope, opsets, closed, &converted);
    if (!s.is_ok()) return std::move(s).with_context(node_label(n));
    scope.graph->nodes.push_back(std::move(converted));
  }
  return Status::ok();
}

Status Converter::node(onnx::NodeProto& n, const onnx::NodeProto* typed, const Scope& scope, const OpsetMap& opsets,
                       bool closed, ir::Node* out) {
  if (n.op_type().empty()) return invalid_argument("the node has no op_type");
  if (has_unknown_field(n, kNodeDeviceConfigurationsField))
    return unimplemented("the node has device_configurations (multi-device execution, IR version 11), which "
                         "Kiln does not implement");
  out->name = n.name();
  out->op_type = n.op_type();
  out->domain = normalize_domain(n.domain());
  out->doc = n.doc_string();

  const OpsetMap* ops = &opsets;
  if (ctx_.node_opsets) {
    auto it = ctx_.node_opsets->find(&n);
    if (it != ctx_.node_opsets->end()) ops = it->second.get();
  }
  auto op = ops->find(out->domain);
  if (op == ops->end())
    return invalid_argument("the node's domain '", out->domain.empty() ? "ai.onnx" : out->domain,
                            "' is not imported by the model (opset_import)");
  out->opset = op->second;

  for (int i = 0; i < n.input_size(); ++i) {
    const std::string& name = n.input(i);
    if (name.empty()) {
      out->inputs.push_back(ir::kNoValue);
      continue;
    }
    const ir::ValueId id = resolve(scope, name);
    if (id == ir::kNoValue) {
      return invalid_argument("input ", i, " reads '", name, "', which ",
                              closed ? "is neither a function input nor an output of a node in the function body"
                                     : "no node output, graph input or initializer defines");
    }
    out->inputs.push_back(id);
  }
  while (!out->inputs.empty() && out->inputs.back() == ir::kNoValue) out->inputs.pop_back();
  for (const std::string& name : n.output()) out->outputs.push_back(name.empty() ? ir::kNoValue : scope.graph->find_value(name));
  while (!out->outputs.empty() && out->outputs.back() == ir::kNoValue) out->outputs.pop_back();

  const bool twin = typed && typed->attribute_size() == n.attribute_size();
  std::unordered_set<std::string> seen;
  for (int i = 0; i < n.attribute_size(); ++i) {
    AttributeProto& a = *n.mutable_attribute(i);
    if (!seen.insert(a.name()).second) return invalid_argument("attribute '", a.name(), "' is given twice");
    const AttributeProto* ta = twin && typed->attribute(i).name() == a.name() ? &typed->attribute(i) : nullptr;
    ir::Attribute attr;
    Status s = attribute(a, ta, &scope, *ops, &attr);
    if (!s.is_ok()) return std::move(s).with_context("attribute '" + a.name() + "'");
    out->attributes.push_back(std::move(attr));
  }
  return Status::ok();
}

Result<std::shared_ptr<ir::Graph>> Converter::subgraph(onnx::GraphProto& g, const onnx::GraphProto* typed,
                                                       const Scope* scope, const OpsetMap& opsets) {
  auto sub = std::make_shared<ir::Graph>();
  Status s = graph(g, typed, scope, opsets, sub.get());
  if (!s.is_ok()) return std::move(s).with_context("graph '" + g.name() + "'");
  return sub;
}

Status Converter::attribute(AttributeProto& a, const AttributeProto* typed, const Scope* scope,
                            const OpsetMap& opsets, ir::Attribute* out) {
  if (a.name().empty()) return invalid_argument("an attribute has no name");
  out->name = a.name();
  out->ref_attr_name = a.ref_attr_name();
  auto type = static_cast<ir::AttrType>(a.type());
  if (type == ir::AttrType::kUndefined) type = guess_attr_type(a);
  out->type = type;
  if (!a.ref_attr_name().empty()) return Status::ok();  // a reference to the caller's attribute: no value here
  switch (type) {
    case ir::AttrType::kUndefined:
      return invalid_argument("the attribute has neither a type nor a value");
    case ir::AttrType::kFloat: out->f = a.f(); break;
    case ir::AttrType::kInt: out->i = a.i(); break;
    case ir::AttrType::kString: out->s = a.s(); break;
    case ir::AttrType::kTensor: {
      if (!a.has_t()) return invalid_argument("the attribute has type TENSOR but no tensor");
      if (ctx_.check_only) break;
      KILN_ASSIGN_OR_RETURN(out->t, tensor_from_proto(a.t(), ctx_.external));
      break;
    }
    case ir::AttrType::kSparseTensor: {
      if (!a.has_sparse_tensor()) return invalid_argument("the attribute has type SPARSE_TENSOR but no tensor");
      out->type = ir::AttrType::kTensor;
      if (ctx_.check_only) break;
      KILN_ASSIGN_OR_RETURN(out->t, tensor_from_sparse_proto(a.sparse_tensor(), ctx_.external));
      out->type = ir::AttrType::kTensor;  // Kiln keeps no sparse tensors
      break;
    }
    case ir::AttrType::kGraph: {
      if (!a.has_g()) return invalid_argument("the attribute has type GRAPH but no graph");
      const onnx::GraphProto* tg = typed && typed->has_g() ? &typed->g() : nullptr;
      KILN_ASSIGN_OR_RETURN(out->g, subgraph(*a.mutable_g(), tg, scope, opsets));
      break;
    }
    case ir::AttrType::kTypeProto: {
      if (!a.has_tp()) return invalid_argument("the attribute has type TYPE_PROTO but no type");
      KILN_ASSIGN_OR_RETURN(out->tp, value_type_from_proto(a.tp()));
      break;
    }
    case ir::AttrType::kFloats: out->floats.assign(a.floats().begin(), a.floats().end()); break;
    case ir::AttrType::kInts: out->ints.assign(a.ints().begin(), a.ints().end()); break;
    case ir::AttrType::kStrings: out->strings.assign(a.strings().begin(), a.strings().end()); break;
    case ir::AttrType::kTensors:
      if (ctx_.check_only) break;
      for (int i = 0; i < a.tensors_size(); ++i) {
        auto t = tensor_from_proto(a.tensors(i), ctx_.external);
        if (!t.ok()) return std::move(t).status().with_context("tensor " + std::to_string(i));
        out->tensors.push_back(std::move(*t));
      }
      break;
    case ir::AttrType::kSparseTensors:
      out->type = ir::AttrType::kTensors;
      if (ctx_.check_only) break;
      for (int i = 0; i < a.sparse_tensors_size(); ++i) {
        auto t = tensor_from_sparse_proto(a.sparse_tensors(i), ctx_.external);
        if (!t.ok()) return std::move(t).status().with_context("sparse tensor " + std::to_string(i));
        out->tensors.push_back(std::move(*t));
      }
      out->type = ir::AttrType::kTensors;
      break;
    case ir::AttrType::kGraphs: {
      const bool twin = typed && typed->graphs_size() == a.graphs_size();
      for (int i = 0; i < a.graphs_size(); ++i) {
        auto g = subgraph(*a.mutable_graphs(i), twin ? &typed->graphs(i) : nullptr, scope, opsets);
        if (!g.ok()) return std::move(g).status().with_context("graph " + std::to_string(i));
        out->graphs.push_back(std::move(*g));
      }
      break;
    }
    case ir::AttrType::kTypeProtos:
      for (const auto& tp : a.type_protos()) {
        KILN_ASSIGN_OR_RETURN(ir::ValueType t, value_type_from_proto(tp));
        out->tps.push_back(std::move(t));
      }
      break;
    default:
      return invalid_argument("the attribute has unknown type ", static_cast<int>(a.type()));
  }
  return Status::ok();
}

Status Converter::function(const onnx::FunctionProto& f, ir::Function* out) {
  out->name = f.name();
  out->domain = normalize_domain(f.domain());
  out->inputs.assign(f.input().begin(), f.input().end());
  out->outputs.assign(f.output().begin(), f.output().end());
  out->attributes.assign(f.attribute().begin(), f.attribute().end());
  for (const auto& p : f.opset_import()) {
    if (p.version() < 1)
      return invalid_argument("opset_import of domain '", p.domain(), "' has version ", p.version());
    out->opsets[normalize_domain(p.domain())] = static_cast<int>(p.version());
  }
  for (const auto& [domain, version] : *ctx_.model_opsets) out->opsets.emplace(domain, version);

  for (AttributeProto a : function_attribute_defaults(f)) {
    ir::Attribute attr;
    Status s = attribute(a, nullptr, nullptr, out->opsets, &attr);
    if (!s.is_ok()) return std::move(s).with_context("default of attribute '" + a.name() + "'");
    out->attribute_defaults.push_back(std::move(attr));
  }

  auto body = std::make_shared<ir::Graph>();
  body->name = f.name();
  body->opsets = out->opsets;
  definers_.emplace_back();
  struct PopDefiners {
    std::vector<std::unordered_map<std::string, std::string>>* v;
    ~PopDefiners() { v->pop_back(); }
  } pop{&definers_};
  for (int i = 0; i < f.input_size(); ++i) {
    ir::ValueId id;
    if (f.input(i).empty()) return invalid_argument("function input ", i, " has no name");
    KILN_RETURN_IF_ERROR(define(body.get(), f.input(i), "function input " + std::to_string(i), {}, &id));
    body->inputs.push_back(id);
  }
  for (const auto& n : f.node()) {
    for (const std::string& o : n.output()) {
      if (o.empty()) continue;
      ir::ValueId id;
      KILN_RETURN_IF_ERROR(define(body.get(), o, node_label(n), {}, &id));
    }
  }
  // The body's nodes are converted from a GraphProto copy so that the graph
  // code path (attributes, subgraphs) is shared; function bodies are small.
  onnx::GraphProto g;
  *g.mutable_node() = f.node();
  const Scope scope{nullptr, body.get()};
  KILN_RETURN_IF_ERROR(nodes(g, nullptr, scope, out->opsets, /*closed=*/true));
  for (const std::string& o : f.output()) {
    const ir::ValueId id = body->find_value(o);
    if (id == ir::kNoValue)
      return invalid_argument("function output '", o, "' is not produced by any node of the body");
    body->outputs.push_back(id);
  }
  KILN_RETURN_IF_ERROR(finish(body.get()));
  out->body = std::move(body);
  return Status::ok();
}

// Fields of `m` that this protobuf schema does not know, with `number`.
template <class M, class F>
void for_each_unknown(const M& m, int number, F&& f) {
  const google::protobuf::UnknownFieldSet& set = m.unknown_fields();
  for (int i = 0; i < set.field_count(); ++i) {
    const auto& field = set.field(i);
    if (field.number() == number && field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      f(field.length_delimited());
  }
}

}  // namespace

std::string normalize_domain(const std::string& domain) { return domain == "ai.onnx" ? std::string() : domain; }

std::vector<onnx::AttributeProto> function_attribute_defaults(const onnx::FunctionProto& function) {
  std::vector<onnx::AttributeProto> out;
  for_each_unknown(function, 11, [&](const std::string& bytes) {
    onnx::AttributeProto a;
    if (parse_message({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, &a) && !a.name().empty())
      out.push_back(std::move(a));
  });
  return out;
}

std::string function_overload(const onnx::FunctionProto& function) {
  std::string s;
  for_each_unknown(function, 13, [&](const std::string& bytes) { s = bytes; });
  return s;
}

bool has_unknown_field(const google::protobuf::Message& m, int number) {
  const google::protobuf::UnknownFieldSet& set = m.GetReflection()->GetUnknownFields(m);
  for (int i = 0; i < set.field_count(); ++i)
    if (set.field(i).number() == number) return true;
  return false;
}

std::string node_overload(const onnx::NodeProto& node) {
  std::string s;
  for_each_unknown(node, 8, [&](const std::string& bytes) { s = bytes; });
  return s;
}

Status convert_main_graph(onnx::GraphProto* graph, const onnx::GraphProto* typed, const ConvertContext& ctx,
                          ir::Graph* out) {
  Converter c(ctx);
  Status s = c.graph(*graph, typed, nullptr, *ctx.model_opsets, out);
  if (!s.is_ok()) return std::move(s).with_context(graph->name().empty() ? "main graph" : "graph '" + graph->name() + "'");
  return Status::ok();
}

Status convert_function(const onnx::FunctionProto& function, const ConvertContext& ctx, ir::Function* out) {
  Converter c(ctx);
  std::string label = normalize_domain(function.domain());
  label = "function '" + (label.empty() ? function.name() : label + "." + function.name()) + "'";
  Status s = c.function(function, out);
  if (!s.is_ok()) return std::move(s).with_context(label);
  return Status::ok();
}

}  // namespace kiln::importer
