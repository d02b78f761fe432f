#include "onnx/type_inference.h"

#include <deque>
#include <string>
#include <unordered_set>
#include <vector>

#include "onnx/defs/schema.h"
#include "onnx/op_versions.h"
#include "onnx/shape_inference/implementation.h"
#include "kiln/child_process.h"

namespace kiln::importer {

namespace {

// Tensors (initializers, Constant values) up to this many elements keep their
// data in the copy that shape inference sees (data propagation reads small
// shape constants); larger ones are copied without data, so inference never
// doubles a model's size.
constexpr int64_t kInferenceDataLimit = 1024;

bool is_small(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > kInferenceDataLimit) return false;
    n *= d;
    if (n > kInferenceDataLimit) return false;
  }
  return true;
}

// Moves the data of large tensors out of a model while it is copied, so the
// copy gets them without data (dims and type stay), and puts it back after.
class DataStash {
 public:
  explicit DataStash(onnx::ModelProto& m) {
    stash_graph(m.mutable_graph());
    for (auto& f : *m.mutable_functions())
      for (auto& n : *f.mutable_node()) stash_node(&n);
  }
  ~DataStash() {
    for (Entry& e : entries_) swap_data(e.tensor, &e.data);
  }
  DataStash(const DataStash&) = delete;
  DataStash& operator=(const DataStash&) = delete;

 private:
  struct Entry {
    onnx::TensorProto* tensor;
    onnx::TensorProto data;
  };

  static void swap_data(onnx::TensorProto* a, onnx::TensorProto* b) {
    a->mutable_raw_data()->swap(*b->mutable_raw_data());
    a->mutable_float_data()->Swap(b->mutable_float_data());
    a->mutable_int32_data()->Swap(b->mutable_int32_data());
    a->mutable_int64_data()->Swap(b->mutable_int64_data());
    a->mutable_double_data()->Swap(b->mutable_double_data());
    a->mutable_uint64_data()->Swap(b->mutable_uint64_data());
    a->mutable_string_data()->Swap(b->mutable_string_data());
  }
  void stash(onnx::TensorProto* t) {
    if (is_small(*t)) return;
    entries_.push_back(Entry{t, {}});
    swap_data(t, &entries_.back().data);
  }
  void stash_node(onnx::NodeProto* n) {
    for (auto& a : *n->mutable_attribute()) {
      if (a.has_t()) stash(a.mutable_t());
      for (auto& t : *a.mutable_tensors()) stash(&t);
      if (a.has_g()) stash_graph(a.mutable_g());
      for (auto& g : *a.mutable_graphs()) stash_graph(&g);
    }
  }
  void stash_graph(onnx::GraphProto* g) {
    for (auto& t : *g->mutable_initializer()) stash(&t);
    for (auto& n : *g->mutable_node()) stash_node(&n);
  }

  std::deque<Entry> entries_;  // stable addresses
};

// A domain no schema has: libonnx's inference leaves nodes moved into it
// untyped instead of applying an older version's inference to them.
constexpr const char* kHiddenDomain = "kiln.hidden";

void hide_newer_versions(onnx::GraphProto* g, const OpsetMap& opsets) {
  for (auto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) hide_newer_versions(a.mutable_g(), opsets);
      for (auto& sub : *a.mutable_graphs()) hide_newer_versions(&sub, opsets);
    }
    if (kiln_op_version(n, opsets)) n.set_domain(kHiddenDomain);
  }
}

std::unique_ptr<onnx::ModelProto> copy_for_inference(onnx::ModelProto& m, const OpsetMap& opsets) {
  auto copy = std::make_unique<onnx::ModelProto>();
  {
    DataStash stash(m);
    copy->CopyFrom(m);
  }
  hide_newer_versions(copy->mutable_graph(), opsets);
  auto* hidden = copy->add_opset_import();
  hidden->set_domain(kHiddenDomain);
  hidden->set_version(1);
  return copy;
}

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Whether every node of `g` (and its subgraphs) fits its schema where
// libonnx's inference functions rely on it without checking: input and
// output counts within bounds, required attributes present, known
// attributes of the declared type (ScanInferenceFunction crashes on a Scan
// without num_scan_inputs). Unknown attributes are allowed.
bool nodes_fit_schemas(const onnx::GraphProto& g, const OpsetMap& opsets);

onnx::AttributeProto::AttributeType attribute_type(const onnx::AttributeProto& a) {
  if (a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
  if (a.has_f()) return onnx::AttributeProto::FLOAT;
  if (a.has_i()) return onnx::AttributeProto::INT;
  if (a.has_s()) return onnx::AttributeProto::STRING;
  if (a.has_t()) return onnx::AttributeProto::TENSOR;
  if (a.has_g()) return onnx::AttributeProto::GRAPH;
  if (a.floats_size()) return onnx::AttributeProto::FLOATS;
  if (a.ints_size()) return onnx::AttributeProto::INTS;
  if (a.strings_size()) return onnx::AttributeProto::STRINGS;
  return onnx::AttributeProto::UNDEFINED;
}

std::string node_label(const onnx::NodeProto& n) {
  std::string s = n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
  if (!n.name().empty()) s += " '" + n.name() + "'";
  return s;
}

// A formal input the schema requires (option Single) given as "": kernels
// read required inputs without checking, so the model is refused here.
Status empty_required_input(const std::string& label, int i, std::string_view formal) {
  return invalid_argument(label, ": input ", i, " (", formal, ") is required but given as ''");
}

}  // namespace

namespace {

AttrKind attr_kind(onnx::AttributeProto::AttributeType t, bool* known) {
  *known = true;
  switch (t) {
    case onnx::AttributeProto::INT: return AttrKind::kInt;
    case onnx::AttributeProto::FLOAT: return AttrKind::kFloat;
    case onnx::AttributeProto::STRING: return AttrKind::kString;
    case onnx::AttributeProto::INTS: return AttrKind::kInts;
    case onnx::AttributeProto::FLOATS: return AttrKind::kFloats;
    case onnx::AttributeProto::STRINGS: return AttrKind::kStrings;
    case onnx::AttributeProto::TENSOR: return AttrKind::kTensor;
    case onnx::AttributeProto::GRAPH: return AttrKind::kGraph;
    default: *known = false; return AttrKind::kInt;
  }
}

// The node against Kiln's own data for an op version libonnx does not know.
Status check_against(const onnx::NodeProto& n, const OpVersion& v, int n_in, int n_out) {
  const std::string label = "node " + node_label(n);
  if (n_in < v.min_inputs || n_in > v.max_inputs)
    return invalid_argument(label, " has ", n_in, " inputs; ", n.op_type(), "-", v.since_version, " takes ",
                            v.min_inputs, " to ", v.max_inputs);
  if (n_out < v.min_outputs || n_out > v.max_outputs)
    return invalid_argument(label, " has ", n_out, " outputs; ", n.op_type(), "-", v.since_version, " produces ",
                            v.min_outputs, " to ", v.max_outputs);
  for (int i = 0; i < v.min_inputs && i < n_in; ++i)
    if (n.input(i).empty()) return empty_required_input(label, i, required_input_name(v, i));
  for (const OpAttr& attr : v.attributes) {
    const onnx::AttributeProto* given = nullptr;
    for (const auto& a : n.attribute())
      if (a.name() == attr.name) given = &a;
    if (!given) {
      if (attr.required) return invalid_argument(label, ": required attribute '", attr.name, "' is missing");
      continue;
    }
    if (!given->ref_attr_name().empty()) continue;
    bool known = false;
    const AttrKind kind = attr_kind(attribute_type(*given), &known);
    if (!known || kind != attr.kind)
      return invalid_argument(label, ": attribute '", attr.name, "' has type ",
                              onnx::AttributeProto::AttributeType_Name(attribute_type(*given)),
                              ", which ", n.op_type(), "-", v.since_version, " does not take");
  }
  return Status::ok();
}

}  // namespace

const OpVersion* kiln_op_version(const onnx::NodeProto& n, const OpsetMap& opsets) {
  const std::string domain = normalize_domain(n.domain());
  auto v = opsets.find(domain);
  if (v == opsets.end()) return nullptr;
  const OpVersion* own = find_op_version(domain, n.op_type(), v->second);
  if (!own) return nullptr;
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), v->second, domain);
  return !schema || schema->SinceVersion() < own->since_version ? own : nullptr;
}

Status check_node_schema(const onnx::NodeProto& n, const OpsetMap& opsets) {
  const std::string domain = normalize_domain(n.domain());
  auto v = opsets.find(domain);
  if (const OpVersion* own = kiln_op_version(n, opsets)) {
    int n_in = n.input_size(), n_out = n.output_size();
    while (n_in > 0 && n.input(n_in - 1).empty()) --n_in;
    while (n_out > 0 && n.output(n_out - 1).empty()) --n_out;
    KILN_RETURN_IF_ERROR(check_against(n, *own, n_in, n_out));
  } else if (v != opsets.end()) {
    if (const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), v->second, domain)) {
      const std::string label = "node " + node_label(n);
      // Trailing empty names are omitted optionals: they do not count.
      int n_in = n.input_size(), n_out = n.output_size();
      while (n_in > 0 && n.input(n_in - 1).empty()) --n_in;
      while (n_out > 0 && n.output(n_out - 1).empty()) --n_out;
      if (n_in < schema->min_input() || n_in > schema->max_input()) {
        return invalid_argument(label, " has ", n_in, " inputs; ", n.op_type(), "-", schema->SinceVersion(),
                                " takes ", schema->min_input(), " to ", schema->max_input());
      }
      if (n_out < schema->min_output() || n_out > schema->max_output()) {
        return invalid_argument(label, " has ", n_out, " outputs; ", n.op_type(), "-", schema->SinceVersion(),
                                " produces ", schema->min_output(), " to ", schema->max_output());
      }
      const auto& formals = schema->inputs();
      for (int i = 0; i < n_in && i < static_cast<int>(formals.size()); ++i) {
        if (formals[static_cast<size_t>(i)].GetOption() == onnx::OpSchema::Single && n.input(i).empty()) {
          return empty_required_input(label, i, formals[static_cast<size_t>(i)].GetName());
        }
      }
      for (const auto& [name, attr] : schema->attributes()) {
        const onnx::AttributeProto* given = nullptr;
        for (const auto& a : n.attribute())
          if (a.name() == name) given = &a;
        if (!given) {
          if (attr.required) return invalid_argument(label, ": required attribute '", name, "' is missing");
          continue;
        }
        if (!given->ref_attr_name().empty()) continue;  // bound when a function body is instantiated
        const bool wrong = attribute_type(*given) != attr.type ||
                           (attr.type == onnx::AttributeProto::GRAPH && !given->has_g()) ||
                           (attr.type == onnx::AttributeProto::TENSOR && !given->has_t());
        if (wrong) {
          return invalid_argument(label, ": attribute '", name, "' has type ",
                                  onnx::AttributeProto::AttributeType_Name(attribute_type(*given)), ", expected ",
                                  onnx::AttributeProto::AttributeType_Name(attr.type));
        }
      }
    }
  }
  for (const auto& a : n.attribute()) {
    if (a.has_g()) KILN_RETURN_IF_ERROR(check_schemas(a.g(), opsets));
    for (const auto& sub : a.graphs()) KILN_RETURN_IF_ERROR(check_schemas(sub, opsets));
  }
  return Status::ok();
}

Status check_schemas(const onnx::GraphProto& g, const OpsetMap& opsets) {
  for (const auto& n : g.node()) KILN_RETURN_IF_ERROR(check_node_schema(n, opsets));
  return Status::ok();
}

namespace {

bool node_fits_schema(const onnx::NodeProto& n, const OpsetMap& opsets) {
  try {
    return check_node_schema(n, opsets).is_ok();
  } catch (...) {
    return false;
  }
}

bool nodes_fit_schemas(const onnx::GraphProto& g, const OpsetMap& opsets) {
  for (const auto& n : g.node())
    if (!node_fits_schema(n, opsets)) return false;
  return true;
}

bool has_shape_node(const onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    if (n.op_type() == "Shape" && is_default_domain(n.domain())) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && has_shape_node(a.g())) return true;
      for (const auto& sub : a.graphs())
        if (has_shape_node(sub)) return true;
    }
  }
  return false;
}

using NameSet = std::unordered_set<std::string>;

// Whether the input of every Shape node of `g` has a type in `g` or an
// enclosing graph (`chain`), after inference.
bool shape_inputs_typed(const onnx::GraphProto& g, std::vector<const NameSet*>* chain) {
  NameSet typed;
  auto add = [&](const onnx::ValueInfoProto& vi) {
    if (vi.has_type() && vi.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) typed.insert(vi.name());
  };
  for (const auto& vi : g.input()) add(vi);
  for (const auto& vi : g.output()) add(vi);
  for (const auto& vi : g.value_info()) add(vi);
  for (const auto& t : g.initializer()) typed.insert(t.name());
  for (const auto& t : g.sparse_initializer()) typed.insert(t.values().name());
  chain->push_back(&typed);
  bool ok = true;
  for (const auto& n : g.node()) {
    if (n.op_type() == "Shape" && is_default_domain(n.domain()) && n.input_size() > 0 && !n.input(0).empty()) {
      bool found = false;
      for (const NameSet* s : *chain) found |= s->count(n.input(0)) != 0;
      ok &= found;
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) ok &= shape_inputs_typed(a.g(), chain);
      for (const auto& sub : a.graphs()) ok &= shape_inputs_typed(sub, chain);
    }
    if (!ok) break;
  }
  chain->pop_back();
  return ok;
}

// Inference on a copy; null when libonnx throws or crashes.
//
// libonnx 1.12's inference functions can segfault (not throw) on malformed
// models, e.g. an old Gemm given an input of the wrong rank; the checks above
// cannot foresee every case. A model file must never take the user's process
// down, so inference runs in a forked child that sends the typed copy back
// through a pipe. When the child dies, the model is imported without inferred
// types: the runtime then plans memory from the sizes it observes.
std::unique_ptr<onnx::ModelProto> run(onnx::ModelProto& m, const OpsetMap& opsets, bool data_propagation) {
  std::unique_ptr<onnx::ModelProto> copy;
  try {
    copy = copy_for_inference(m, opsets);  // without initializer data: small to send back
    (void)onnx::OpSchemaRegistry::Instance();  // built once in the parent, shared with children
  } catch (...) {
    return nullptr;
  }
  // The child infers, sends the typed copy and leaves without running atexit handlers.
  // Bounded: a child forked while another thread of the application held a
  // lock it then needs (seen with ASan's allocator under concurrent loads)
  // would otherwise hang the load; past the bound the model is imported
  // without inferred types, as when inference crashes.
  constexpr int kInferenceTimeoutS = 120;
  const onnx::ShapeInferenceOptions opts(/*check_type=*/false, /*error_mode=*/0, data_propagation);
  if (!fork_is_safe()) {  // an ASan build with other threads running: in this process
    try {
      onnx::shape_inference::InferShapes(*copy, onnx::OpSchemaRegistry::Instance(), opts);
    } catch (...) {
      return nullptr;
    }
    return copy;
  }
  Result<ChildResult> child = run_in_child([&](int fd) {
    onnx::shape_inference::InferShapes(*copy, onnx::OpSchemaRegistry::Instance(), opts);
    std::string out;
    return copy->SerializeToString(&out) && write_all(fd, out) ? 0 : 1;
  }, kInferenceTimeoutS);
  if (!child.is_ok()) return nullptr;
  // (With SIGCHLD ignored by the application the child cannot be waited for;
  // the received bytes then decide.)
  if (child->end != ChildResult::End::kUnknown && !child->exited_cleanly()) return nullptr;
  const std::string& received = child->output;
  auto typed = std::make_unique<onnx::ModelProto>();
  if (received.empty() || !typed->ParseFromString(received)) return nullptr;
  return typed;
}

}  // namespace

std::unique_ptr<onnx::ModelProto> infer_types(onnx::ModelProto& model, const OpsetMap& opsets) {
  try {
    if (!nodes_fit_schemas(model.graph(), opsets)) return nullptr;
    for (const auto& f : model.functions()) {
      OpsetMap fopsets = opsets;
      for (const auto& p : f.opset_import()) fopsets[normalize_domain(p.domain())] = static_cast<int>(p.version());
      for (const auto& n : f.node())
        if (!node_fits_schema(n, fopsets)) return nullptr;
    }

    // Shape nodes inside function bodies are inferred with types ONNX
    // derives on the fly; there is no checking them first.
    for (const auto& f : model.functions()) {
      onnx::GraphProto body;
      *body.mutable_node() = f.node();
      if (has_shape_node(body)) return run(model, opsets, /*data_propagation=*/false);
    }
    if (!has_shape_node(model.graph())) {
      auto typed = run(model, opsets, /*data_propagation=*/true);
      return typed ? std::move(typed) : run(model, opsets, /*data_propagation=*/false);
    }
    auto plain = run(model, opsets, /*data_propagation=*/false);
    std::vector<const NameSet*> chain;
    if (!plain || !shape_inputs_typed(plain->graph(), &chain)) return plain;
    auto typed = run(model, opsets, /*data_propagation=*/true);
    return typed ? std::move(typed) : std::move(plain);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace kiln::importer
