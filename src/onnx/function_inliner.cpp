#include "onnx/function_inliner.h"

#include <exception>

#include "onnx/defs/schema.h"

namespace kiln::importer {

namespace {

using onnx::AttributeProto;

// Renaming maps of nested scopes, innermost last.
using RenameMap = std::unordered_map<std::string, std::string>;
using RenameChain = std::vector<const RenameMap*>;

const std::string* lookup(const RenameChain& chain, const std::string& name) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    auto f = (*it)->find(name);
    if (f != (*it)->end()) return &f->second;
  }
  return nullptr;
}

const AttributeProto* find_attribute(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

const char* attr_type_label(int t) {
  switch (t) {
    case AttributeProto::FLOAT: return "FLOAT";
    case AttributeProto::INT: return "INT";
    case AttributeProto::STRING: return "STRING";
    case AttributeProto::TENSOR: return "TENSOR";
    case AttributeProto::GRAPH: return "GRAPH";
    case AttributeProto::SPARSE_TENSOR: return "SPARSE_TENSOR";
    case AttributeProto::TYPE_PROTO: return "TYPE_PROTO";
    case AttributeProto::FLOATS: return "FLOATS";
    case AttributeProto::INTS: return "INTS";
    case AttributeProto::STRINGS: return "STRINGS";
    case AttributeProto::TENSORS: return "TENSORS";
    case AttributeProto::GRAPHS: return "GRAPHS";
    case AttributeProto::SPARSE_TENSORS: return "SPARSE_TENSORS";
    case AttributeProto::TYPE_PROTOS: return "TYPE_PROTOS";
    default: return "UNDEFINED";
  }
}

std::string op_label(const onnx::NodeProto& n) {
  const std::string domain = normalize_domain(n.domain());
  std::string s = "node " + (domain.empty() ? n.op_type() : domain + "." + n.op_type());
  if (!n.name().empty()) s += " '" + n.name() + "'";
  return s;
}

}  // namespace

std::string function_key(const std::string& domain, const std::string& name, const std::string& overload) {
  std::string k = normalize_domain(domain) + ":" + name;
  if (!overload.empty()) k += ":" + overload;
  return k;
}

// A function body to expand, with what instantiating it needs.
struct FunctionInliner::Body {
  const onnx::FunctionProto* proto = nullptr;
  onnx::FunctionProto built;  // a context-dependent body, built for one call
  std::unordered_map<std::string, AttributeProto> defaults;
  std::shared_ptr<const OpsetMap> opsets;
  std::string label;
  bool model_local = false;
};

// Expands one body: renames, binds and substitutes. Kept apart from the
// inliner so that the recursive subgraph walk has its state in one place.
class Instantiation {
 public:
  Instantiation(const onnx::NodeProto& call, const onnx::FunctionProto& f,
                const std::unordered_map<std::string, AttributeProto>& defaults, std::string prefix,
                std::function<std::string(const std::string&, const std::string&)> fresh)
      : call_(call), f_(f), defaults_(defaults), prefix_(std::move(prefix)), fresh_(std::move(fresh)) {}

  Status run(std::vector<onnx::NodeProto>* out) {
    if (call_.input_size() > f_.input_size())
      return invalid_argument("the call passes ", call_.input_size(), " inputs, but the function takes ",
                              f_.input_size());
    if (call_.output_size() > f_.output_size())
      return invalid_argument("the call asks for ", call_.output_size(), " outputs, but the function has ",
                              f_.output_size());
    RenameMap map;
    for (int i = 0; i < f_.input_size(); ++i) map[f_.input(i)] = i < call_.input_size() ? call_.input(i) : "";
    for (int i = 0; i < f_.output_size(); ++i) {
      const bool bound = i < call_.output_size() && !call_.output(i).empty();
      if (map.count(f_.output(i)))
        return invalid_argument("function output '", f_.output(i), "' is also a function input or output");
      map[f_.output(i)] = bound ? call_.output(i) : fresh_(prefix_, f_.output(i));
    }
    std::unordered_map<std::string, int> produced;
    for (const auto& n : f_.node()) {
      for (const std::string& o : n.output()) {
        if (o.empty()) continue;
        if (produced[o]++)
          return invalid_argument("the function body defines '", o, "' twice");
        bool formal_input = false;
        for (const std::string& in : f_.input()) formal_input |= in == o;
        if (formal_input) return invalid_argument("the function body redefines its input '", o, "'");
        if (!map.count(o)) map[o] = fresh_(prefix_, o);
      }
    }
    RenameChain chain{&map};
    out->reserve(out->size() + static_cast<size_t>(f_.node_size()));
    for (const auto& n : f_.node()) {
      onnx::NodeProto c = n;
      Status s = rename_node(&c, chain);
      if (!s.is_ok()) return std::move(s).with_context("body " + op_label(n));
      out->push_back(std::move(c));
    }
    return Status::ok();
  }

 private:
  Status rename_node(onnx::NodeProto* n, const RenameChain& chain) {
    n->set_name(prefix_ + "/" + (n->name().empty() ? n->op_type() : n->name()));
    for (int i = 0; i < n->input_size(); ++i) {
      const std::string& name = n->input(i);
      if (name.empty()) continue;
      const std::string* to = lookup(chain, name);
      if (!to)
        return invalid_argument("input ", i, " reads '", name,
                                "', which is neither a function input nor an output of a node in the body");
      *n->mutable_input(i) = *to;
    }
    for (int i = 0; i < n->output_size(); ++i) {
      if (n->output(i).empty()) continue;
      const std::string* to = lookup(chain, n->output(i));
      if (!to) return internal_error("unmapped body output '", n->output(i), "'");
      *n->mutable_output(i) = *to;
    }
    return substitute(n, chain);
  }

  // Replaces references to the caller's attributes; renames subgraphs.
  Status substitute(onnx::NodeProto* n, const RenameChain& chain) {
    google::protobuf::RepeatedPtrField<AttributeProto> attrs;
    for (AttributeProto& a : *n->mutable_attribute()) {
      if (a.ref_attr_name().empty()) {
        if (a.has_g()) KILN_RETURN_IF_ERROR(rename_graph(a.mutable_g(), chain));
        for (auto& g : *a.mutable_graphs()) KILN_RETURN_IF_ERROR(rename_graph(&g, chain));
        *attrs.Add() = std::move(a);
        continue;
      }
      const AttributeProto* src = find_attribute(call_, a.ref_attr_name());
      if (!src) {
        auto d = defaults_.find(a.ref_attr_name());
        if (d != defaults_.end()) src = &d->second;
      }
      if (!src) continue;  // neither given nor defaulted: the attribute is absent
      AttributeProto c = *src;
      if (a.type() != AttributeProto::UNDEFINED && c.type() != AttributeProto::UNDEFINED && c.type() != a.type())
        return invalid_argument("attribute '", a.name(), "' refers to the caller's attribute '", a.ref_attr_name(),
                                "' of type ", attr_type_label(c.type()), ", but the body expects ",
                                attr_type_label(a.type()));
      if (c.type() == AttributeProto::UNDEFINED) c.set_type(a.type());
      c.set_name(a.name());
      c.clear_ref_attr_name();
      *attrs.Add() = std::move(c);
    }
    n->mutable_attribute()->Swap(&attrs);
    return Status::ok();
  }

  Status rename_graph(onnx::GraphProto* g, const RenameChain& outer) {
    RenameMap local;
    auto define = [&](std::string* name) {
      if (name->empty()) return;
      auto [it, fresh] = local.emplace(*name, std::string());
      if (fresh) it->second = fresh_(prefix_, *name);
      *name = it->second;
    };
    for (auto& vi : *g->mutable_input()) define(vi.mutable_name());
    for (auto& t : *g->mutable_initializer()) define(t.mutable_name());
    for (auto& t : *g->mutable_sparse_initializer()) define(t.mutable_values()->mutable_name());
    // Outputs first, so that inputs of nodes that follow see them.
    for (auto& n : *g->mutable_node())
      for (const std::string& o : n.output())
        if (!o.empty() && !local.count(o)) local.emplace(o, fresh_(prefix_, o));
    RenameChain chain = outer;
    chain.push_back(&local);
    for (auto& n : *g->mutable_node()) {
      const std::string label = op_label(n);
      Status s = rename_node(&n, chain);
      if (!s.is_ok()) return std::move(s).with_context("subgraph '" + g->name() + "' " + label);
    }
    for (auto& vi : *g->mutable_output()) {
      const std::string* to = lookup(chain, vi.name());
      if (!to) return invalid_argument("subgraph '", g->name(), "' output '", vi.name(), "' is not defined");
      vi.set_name(*to);
    }
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
    for (auto& vi : *g->mutable_value_info()) {
      if (const std::string* to = lookup(chain, vi.name())) {
        vi.set_name(*to);
        *infos.Add() = std::move(vi);
      }
    }
    g->mutable_value_info()->Swap(&infos);
    return Status::ok();
  }

  const onnx::NodeProto& call_;
  const onnx::FunctionProto& f_;
  const std::unordered_map<std::string, AttributeProto>& defaults_;
  std::string prefix_;
  std::function<std::string(const std::string&, const std::string&)> fresh_;
};

FunctionInliner::FunctionInliner(onnx::ModelProto* model, const OpsetMap& model_opsets,
                                 const std::unordered_map<std::string, const onnx::TypeProto*>* types)
    : model_(model), model_opsets_(std::make_shared<const OpsetMap>(model_opsets)), types_(types) {
  for (const auto& f : model->functions())
    functions_.emplace(function_key(f.domain(), f.name(), function_overload(f)), &f);
}

void FunctionInliner::collect_names(const onnx::GraphProto& g) {
  for (const auto& vi : g.input()) used_names_.insert(vi.name());
  for (const auto& vi : g.output()) used_names_.insert(vi.name());
  for (const auto& vi : g.value_info()) used_names_.insert(vi.name());
  for (const auto& t : g.initializer()) used_names_.insert(t.name());
  for (const auto& t : g.sparse_initializer()) used_names_.insert(t.values().name());
  for (const auto& n : g.node()) {
    for (const auto& s : n.input()) used_names_.insert(s);
    for (const auto& s : n.output()) used_names_.insert(s);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_names(a.g());
      for (const auto& sub : a.graphs()) collect_names(sub);
    }
  }
}

std::string FunctionInliner::fresh_name(const std::string& prefix, const std::string& name) {
  const std::string base = prefix + "/" + name;
  std::string candidate = base;
  for (int k = 1; !used_names_.insert(candidate).second; ++k) candidate = base + "_" + std::to_string(k);
  return candidate;
}

Status FunctionInliner::run() {
  if (!model_functions_ && !has_kernel_) return Status::ok();
  if (model_functions_ && functions_.empty() && !has_kernel_) return Status::ok();
  collect_names(model_->graph());
  return inline_graph(model_->mutable_graph(), model_opsets_, 0);
}

Result<bool> FunctionInliner::find_body(const onnx::NodeProto& node, const OpsetMap& opsets, Body* body) {
  const std::string domain = normalize_domain(node.domain());
  if (model_functions_) {
    auto f = functions_.find(function_key(domain, node.op_type(), node_overload(node)));
    if (f != functions_.end()) {
      body->proto = f->second;
      body->model_local = true;
      body->label = "function '" + (domain.empty() ? std::string() : domain + ".") + node.op_type() + "'";
      for (AttributeProto& a : function_attribute_defaults(*f->second)) {
        std::string name = a.name();
        body->defaults.emplace(std::move(name), std::move(a));
      }
      auto ops = std::make_shared<OpsetMap>(opsets);
      for (const auto& p : f->second->opset_import()) (*ops)[normalize_domain(p.domain())] = static_cast<int>(p.version());
      body->opsets = *ops == opsets ? nullptr : std::move(ops);
      return true;
    }
  }
  if (!has_kernel_) return false;
  auto v = opsets.find(domain);
  if (v == opsets.end() || has_kernel_(domain, node.op_type(), v->second)) return false;

  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), v->second, domain);
  if (!schema) return false;
  if (schema->HasFunction()) {
    body->proto = schema->GetFunction();
  } else if (schema->HasContextDependentFunction()) {
    // libonnx's builders dereference the type of every input they use
    // without checking it (SequenceMap-17 crashes on an untyped input), so
    // a body is built only when every input given has a known type.
    if (!types_) return false;
    std::vector<onnx::TypeProto> input_types(static_cast<size_t>(node.input_size()));
    for (int i = 0; i < node.input_size(); ++i) {
      if (node.input(i).empty()) continue;
      auto t = types_->find(node.input(i));
      if (t == types_->end() || t->second->value_case() == onnx::TypeProto::VALUE_NOT_SET) return false;
      input_types[static_cast<size_t>(i)] = *t->second;
    }
    onnx::FunctionBodyBuildContextImpl ctx(node, input_types);
    if (!schema->BuildContextDependentFunction(ctx, body->built)) return false;
    body->proto = &body->built;
  }
  if (!body->proto || body->proto->node_size() == 0) return false;
  body->label = "the ONNX function body of " + node.op_type() + "-" + std::to_string(schema->since_version());
  for (const auto& [name, attr] : schema->attributes())
    if (attr.default_value.type() != AttributeProto::UNDEFINED) body->defaults.emplace(name, attr.default_value);
  auto ops = std::make_shared<OpsetMap>(opsets);
  if (body->proto->opset_import_size() == 0) (*ops)[domain] = schema->since_version();
  for (const auto& p : body->proto->opset_import()) (*ops)[normalize_domain(p.domain())] = static_cast<int>(p.version());
  body->opsets = *ops == opsets ? nullptr : std::move(ops);
  return true;
}

Status FunctionInliner::expand(onnx::NodeProto node, const std::shared_ptr<const OpsetMap>& opsets, int depth,
                               std::vector<Pending>* out) {
  Body body;
  bool found = false;
  try {
    KILN_ASSIGN_OR_RETURN(found, find_body(node, *opsets, &body));
  } catch (const std::exception&) {
    found = false;  // libonnx could not build a schema body: keep the node
  }
  if (!found) {
    out->push_back(Pending{std::move(node), opsets, depth});
    return Status::ok();
  }
  if (depth >= kMaxDepth) {
    if (body.model_local)
      return invalid_argument(op_label(node), " calls ", body.label, " ", kMaxDepth,
                              " levels deep; functions must not be recursive");
    out->push_back(Pending{std::move(node), opsets, depth});
    return Status::ok();
  }
  const std::string prefix = node.name().empty()
                                 ? body.proto->name() + "_" + std::to_string(num_inlined_)
                                 : node.name();
  std::vector<onnx::NodeProto> nodes;
  Instantiation inst(node, *body.proto, body.defaults, prefix,
                     [this](const std::string& p, const std::string& n) { return fresh_name(p, n); });
  Status s = inst.run(&nodes);
  if (!s.is_ok()) {
    if (body.model_local) return std::move(s).with_context(op_label(node) + " calling " + body.label);
    out->push_back(Pending{std::move(node), opsets, depth});  // a schema body that does not fit: keep the op
    return Status::ok();
  }
  ++num_inlined_;
  const std::shared_ptr<const OpsetMap> body_opsets = body.opsets ? body.opsets : opsets;
  for (onnx::NodeProto& n : nodes) KILN_RETURN_IF_ERROR(expand(std::move(n), body_opsets, depth + 1, out));
  return Status::ok();
}

Status FunctionInliner::inline_graph(onnx::GraphProto* g, const std::shared_ptr<const OpsetMap>& opsets,
                                     int depth) {
  std::vector<Pending> pending;
  pending.reserve(static_cast<size_t>(g->node_size()));
  for (onnx::NodeProto& n : *g->mutable_node()) KILN_RETURN_IF_ERROR(expand(std::move(n), opsets, depth, &pending));
  g->clear_node();
  for (Pending& p : pending) {
    onnx::NodeProto* n = g->add_node();
    *n = std::move(p.node);
    if (p.opsets != model_opsets_ && *p.opsets != *model_opsets_) node_opsets_[n] = p.opsets;
    for (AttributeProto& a : *n->mutable_attribute()) {
      if (a.has_g()) KILN_RETURN_IF_ERROR(inline_graph(a.mutable_g(), p.opsets, p.depth));
      for (auto& sub : *a.mutable_graphs()) KILN_RETURN_IF_ERROR(inline_graph(&sub, p.opsets, p.depth));
    }
  }
  return Status::ok();
}

}  // namespace kiln::importer
