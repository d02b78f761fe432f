#include "runtime/backends/graph_view.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "runtime/backends/content_key.h"
#include "runtime/backends/host.h"

namespace kiln::runtime {

std::vector<ir::ValueId> implicit_inputs(const ir::Node& node, const ir::Graph& g) {
  std::vector<ir::ValueId> out;
  auto add = [&](const std::shared_ptr<ir::Graph>& sub) {
    if (!sub) return;
    for (ir::ValueId ref : sub->outer_refs) {
      ir::ValueId id = g.find_value(sub->value_name(ref));
      if (id != ir::kNoValue && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
    }
  };
  for (const ir::Attribute& a : node.attributes) {
    if (a.type == ir::AttrType::kGraph) add(a.g);
    if (a.type == ir::AttrType::kGraphs)
      for (const auto& sub : a.graphs) add(sub);
  }
  return out;
}

std::vector<ir::ValueId> reads_of(const ir::Node& n, const ir::Graph& g) {
  std::vector<ir::ValueId> r;
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue && std::find(r.begin(), r.end(), v) == r.end()) r.push_back(v);
  for (ir::ValueId v : implicit_inputs(n, g))
    if (std::find(r.begin(), r.end(), v) == r.end()) r.push_back(v);
  return r;
}

std::unique_ptr<kiln_graph> make_graph_view(const ir::Graph& g,
                                            const std::unordered_map<ir::ValueId, Tensor>* constants,
                                            std::span<const int32_t> offered,
                                            std::span<const int32_t> hidden_readers,
                                            std::shared_ptr<ConstantHashes> hashes) {
  auto view = std::make_unique<kiln_graph>();
  view->graph = &g;
  view->hashes = hashes ? std::move(hashes) : std::make_shared<ConstantHashes>();
  view->values.resize(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    kiln_value& v = view->values[i];
    v.graph = view.get();
    v.id = static_cast<ir::ValueId>(i);
    v.name = g.values[i].name.c_str();
    v.type = &g.values[i].type;
    if (constants) {
      auto it = constants->find(v.id);
      if (it != constants->end()) v.constant = &it->second;
    } else {
      v.constant = g.initializer(v.id);
    }
    // Still the imported bytes (not a folded or rewritten value of that id)?
    auto ext = v.constant ? g.external_data.find(v.id) : g.external_data.end();
    if (ext != g.external_data.end() && ext->second.data == v.constant->raw_data()) v.external = &ext->second;
  }
  for (ir::ValueId id : g.inputs) view->values[static_cast<size_t>(id)].graph_input = true;
  for (ir::ValueId id : g.outputs) view->values[static_cast<size_t>(id)].graph_output = true;

  view->view_index.assign(g.nodes.size(), -1);
  view->nodes.reserve(offered.size());
  for (int32_t ir_idx : offered) {
    const ir::Node& n = g.nodes[static_cast<size_t>(ir_idx)];
    kiln_node kn;
    kn.graph = view.get();
    kn.node = &n;
    kn.index = view->nodes.size();
    for (const ir::Attribute& a : n.attributes) {
      kiln_attribute ka;
      ka.graph = view.get();
      ka.attr = &a;
      kn.attributes.push_back(std::move(ka));
    }
    view->view_index[static_cast<size_t>(ir_idx)] = static_cast<int32_t>(kn.index);
    view->ir_index.push_back(ir_idx);
    view->nodes.push_back(std::move(kn));
  }
  for (const kiln_node& kn : view->nodes) {
    const auto k = static_cast<uint32_t>(kn.index);
    for (ir::ValueId o : kn.node->outputs)
      if (o != ir::kNoValue) view->values[static_cast<size_t>(o)].producer = static_cast<int32_t>(k);
    auto read = [&](ir::ValueId in) {
      if (in == ir::kNoValue) return;
      auto& c = view->values[static_cast<size_t>(in)].consumers;
      if (c.empty() || c.back() != k) c.push_back(k);
    };
    for (ir::ValueId in : kn.node->inputs) read(in);
    for (ir::ValueId in : implicit_inputs(*kn.node, g)) read(in);
  }
  for (int32_t h : hidden_readers) {
    const ir::Node& n = g.nodes[static_cast<size_t>(h)];
    for (ir::ValueId in : n.inputs)
      if (in != ir::kNoValue) view->values[static_cast<size_t>(in)].outside_consumers = true;
    for (ir::ValueId in : implicit_inputs(n, g)) view->values[static_cast<size_t>(in)].outside_consumers = true;
  }
  return view;
}

namespace {

// --- graph -------------------------------------------------------------------

const char* graph_name(const kiln_graph_t* g) noexcept { return g ? g->graph->name.c_str() : ""; }
size_t graph_num_nodes(const kiln_graph_t* g) noexcept { return g ? g->nodes.size() : 0; }
const kiln_node_t* graph_node(const kiln_graph_t* g, size_t i) noexcept {
  return g && i < g->nodes.size() ? &g->nodes[i] : nullptr;
}
size_t graph_num_inputs(const kiln_graph_t* g) noexcept { return g ? g->graph->inputs.size() : 0; }
const kiln_value_t* graph_input(const kiln_graph_t* g, size_t i) noexcept {
  if (!g || i >= g->graph->inputs.size()) return nullptr;
  return &g->values[static_cast<size_t>(g->graph->inputs[i])];
}
size_t graph_num_outputs(const kiln_graph_t* g) noexcept { return g ? g->graph->outputs.size() : 0; }
const kiln_value_t* graph_output(const kiln_graph_t* g, size_t i) noexcept {
  if (!g || i >= g->graph->outputs.size()) return nullptr;
  return &g->values[static_cast<size_t>(g->graph->outputs[i])];
}
const kiln_value_t* graph_find_value(const kiln_graph_t* g, const char* name) noexcept {
  if (!g || !name) return nullptr;
  try {
    ir::ValueId id = g->graph->find_value(name);
    return id == ir::kNoValue ? nullptr : &g->values[static_cast<size_t>(id)];
  } catch (...) {
    return nullptr;
  }
}
int64_t graph_opset(const kiln_graph_t* g, const char* domain) noexcept {
  if (!g) return 0;
  std::string_view d = domain ? domain : "";
  if (d == "ai.onnx") d = "";
  for (const auto& [k, v] : g->graph->opsets)
    if (k == d || (d.empty() && k == "ai.onnx")) return v;
  return 0;
}

// --- nodes -------------------------------------------------------------------

const char* node_name(const kiln_node_t* n) noexcept { return n ? n->node->name.c_str() : ""; }
const char* node_op_type(const kiln_node_t* n) noexcept { return n ? n->node->op_type.c_str() : ""; }
const char* node_domain(const kiln_node_t* n) noexcept {
  if (!n) return "";
  return n->node->domain == "ai.onnx" ? "" : n->node->domain.c_str();
}
int64_t node_opset(const kiln_node_t* n) noexcept { return n ? n->node->opset : 0; }
size_t node_index(const kiln_node_t* n) noexcept { return n ? n->index : 0; }
size_t node_num_inputs(const kiln_node_t* n) noexcept { return n ? n->node->inputs.size() : 0; }
const kiln_value_t* node_input(const kiln_node_t* n, size_t i) noexcept {
  if (!n || i >= n->node->inputs.size() || n->node->inputs[i] == ir::kNoValue) return nullptr;
  return &n->graph->values[static_cast<size_t>(n->node->inputs[i])];
}
size_t node_num_outputs(const kiln_node_t* n) noexcept { return n ? n->node->outputs.size() : 0; }
const kiln_value_t* node_output(const kiln_node_t* n, size_t i) noexcept {
  if (!n || i >= n->node->outputs.size() || n->node->outputs[i] == ir::kNoValue) return nullptr;
  return &n->graph->values[static_cast<size_t>(n->node->outputs[i])];
}
size_t node_num_attributes(const kiln_node_t* n) noexcept { return n ? n->attributes.size() : 0; }
const kiln_attribute_t* node_attribute(const kiln_node_t* n, size_t i) noexcept {
  return n && i < n->attributes.size() ? &n->attributes[i] : nullptr;
}
const kiln_attribute_t* node_find_attribute(const kiln_node_t* n, const char* name) noexcept {
  if (!n || !name) return nullptr;
  for (const kiln_attribute& a : n->attributes)
    if (a.attr->name == name) return &a;
  return nullptr;
}

// --- values ------------------------------------------------------------------

// The tensor type a value's dtype/rank/dims describe (the element of a
// sequence or optional), or null.
const ir::ValueType* tensor_type(const kiln_value_t* v) {
  const ir::ValueType* t = v ? v->type : nullptr;
  while (t && t->kind != ir::ValueType::Kind::kTensor) {
    if (t->kind != ir::ValueType::Kind::kSequence && t->kind != ir::ValueType::Kind::kOptional) return nullptr;
    t = t->elem.get();
  }
  return t;
}

const char* value_name(const kiln_value_t* v) noexcept { return v ? v->name : ""; }
kiln_value_kind_t value_kind(const kiln_value_t* v) noexcept {
  if (!v) return KILN_VALUE_UNKNOWN;
  if (v->constant) return KILN_VALUE_TENSOR;
  switch (v->type->kind) {
    case ir::ValueType::Kind::kTensor: return KILN_VALUE_TENSOR;
    case ir::ValueType::Kind::kSequence: return KILN_VALUE_SEQUENCE;
    case ir::ValueType::Kind::kOptional: return KILN_VALUE_OPTIONAL;
    case ir::ValueType::Kind::kMap: return KILN_VALUE_MAP;
    default: return KILN_VALUE_UNKNOWN;
  }
}
kiln_dtype_t value_dtype(const kiln_value_t* v) noexcept {
  if (v && v->constant) return dtype_to_c(v->constant->dtype());
  const ir::ValueType* t = tensor_type(v);
  return t ? dtype_to_c(t->dtype) : KILN_DTYPE_UNDEFINED;
}
int64_t value_rank(const kiln_value_t* v) noexcept {
  if (v && v->constant) return static_cast<int64_t>(v->constant->rank());
  const ir::ValueType* t = tensor_type(v);
  return t && t->has_shape ? static_cast<int64_t>(t->dims.size()) : -1;
}
int64_t value_dim(const kiln_value_t* v, size_t i, const char** out_symbol) noexcept {
  if (out_symbol) *out_symbol = "";
  if (v && v->constant) return i < v->constant->rank() ? v->constant->dim(i) : -1;
  const ir::ValueType* t = tensor_type(v);
  if (!t || !t->has_shape || i >= t->dims.size()) return -1;
  const ir::Dim& d = t->dims[i];
  if (out_symbol) *out_symbol = d.param.c_str();
  return d.known() ? d.value : -1;
}
bool value_is_constant(const kiln_value_t* v) noexcept { return v && v->constant; }
kiln_status_t* value_constant(const kiln_value_t* v, kiln_tensor_t* out) noexcept {
  try {
    if (!v || !out) return make_c_status(invalid_argument("value_constant: NULL value or out_tensor"));
    if (!v->constant) return make_c_status(invalid_argument("value '", v->name, "' is not a constant"));
    const uint32_t size = out->struct_size;
    Status st = tensor_view(*v->constant, out, size);
    out->struct_size = size;
    if (!st.is_ok()) return make_c_status(std::move(st).with_context(std::string("value '") + v->name + "'"));
    return nullptr;
  } catch (...) {
    return make_c_status(internal_error("value_constant failed"));
  }
}
kiln_status_t* value_constant_info(const kiln_value_t* v, kiln_constant_info_t* out) noexcept {
  try {
    if (!v || !out) return make_c_status(invalid_argument("value_constant_info: NULL value or out_info"));
    if (!v->constant) return make_c_status(invalid_argument("value '", v->name, "' is not a constant"));
    const uint32_t size = out->struct_size;
    if (!KILN_ABI_HAS(kiln_constant_info_t, content_hash, size)) {
      return make_c_status(invalid_argument("value_constant_info: out_info->struct_size ", size,
                                            " is too small for content_hash"));
    }
    std::array<uint64_t, 2> hash;
    {
      ConstantHashes& cache = *v->graph->hashes;
      std::lock_guard<std::mutex> lock(cache.mu);
      auto it = cache.by_tensor.find(v->constant);
      if (it == cache.by_tensor.end()) it = cache.by_tensor.emplace(v->constant, tensor_content_hash(*v->constant)).first;
      hash = it->second;
    }
    out->content_hash[0] = hash[0];
    out->content_hash[1] = hash[1];
    const ir::ExternalLocation* loc = v->external;
    if (KILN_ABI_HAS(kiln_constant_info_t, external_path, size)) out->external_path = loc ? loc->path.c_str() : nullptr;
    if (KILN_ABI_HAS(kiln_constant_info_t, external_offset, size)) out->external_offset = loc ? loc->offset : 0;
    if (KILN_ABI_HAS(kiln_constant_info_t, external_length, size)) out->external_length = loc ? loc->length : 0;
    return nullptr;
  } catch (...) {
    return make_c_status(internal_error("value_constant_info failed"));
  }
}
bool value_is_graph_input(const kiln_value_t* v) noexcept { return v && v->graph_input; }
bool value_is_graph_output(const kiln_value_t* v) noexcept { return v && v->graph_output; }
const kiln_node_t* value_producer(const kiln_value_t* v) noexcept {
  if (!v || v->producer < 0) return nullptr;
  return &v->graph->nodes[static_cast<size_t>(v->producer)];
}
size_t value_num_consumers(const kiln_value_t* v) noexcept { return v ? v->consumers.size() : 0; }
const kiln_node_t* value_consumer(const kiln_value_t* v, size_t i) noexcept {
  if (!v || i >= v->consumers.size()) return nullptr;
  return &v->graph->nodes[v->consumers[i]];
}
bool value_has_outside_consumers(const kiln_value_t* v) noexcept { return v && v->outside_consumers; }

// --- attributes --------------------------------------------------------------

const char* attribute_name(const kiln_attribute_t* a) noexcept { return a ? a->attr->name.c_str() : ""; }
kiln_attr_type_t attribute_type(const kiln_attribute_t* a) noexcept {
  if (!a) return KILN_ATTR_UNDEFINED;
  // Sparse tensors are held dense (backend.h says so): they read as TENSOR(S).
  if (a->attr->type == ir::AttrType::kSparseTensor) return KILN_ATTR_TENSOR;
  if (a->attr->type == ir::AttrType::kSparseTensors) return KILN_ATTR_TENSORS;
  return static_cast<kiln_attr_type_t>(static_cast<int>(a->attr->type));
}
size_t attribute_count(const kiln_attribute_t* a) noexcept {
  if (!a) return 0;
  const ir::Attribute& x = *a->attr;
  switch (x.type) {
    case ir::AttrType::kFloats: return x.floats.size();
    case ir::AttrType::kInts: return x.ints.size();
    case ir::AttrType::kStrings: return x.strings.size();
    case ir::AttrType::kTensors: case ir::AttrType::kSparseTensors: return x.tensors.size();
    case ir::AttrType::kGraphs: return x.graphs.size();
    case ir::AttrType::kTypeProtos: return x.tps.size();
    case ir::AttrType::kUndefined: return 0;
    default: return 1;
  }
}
int64_t attribute_int(const kiln_attribute_t* a) noexcept {
  return a && a->attr->type == ir::AttrType::kInt ? a->attr->i : 0;
}
float attribute_float(const kiln_attribute_t* a) noexcept {
  return a && a->attr->type == ir::AttrType::kFloat ? a->attr->f : 0.f;
}
const int64_t* attribute_ints(const kiln_attribute_t* a, size_t* out_count) noexcept {
  if (out_count) *out_count = 0;
  if (!a || a->attr->type != ir::AttrType::kInts) return nullptr;
  if (out_count) *out_count = a->attr->ints.size();
  return a->attr->ints.data();
}
const float* attribute_floats(const kiln_attribute_t* a, size_t* out_count) noexcept {
  if (out_count) *out_count = 0;
  if (!a || a->attr->type != ir::AttrType::kFloats) return nullptr;
  if (out_count) *out_count = a->attr->floats.size();
  return a->attr->floats.data();
}
const char* attribute_string(const kiln_attribute_t* a, size_t i, size_t* out_size) noexcept {
  if (out_size) *out_size = 0;
  if (!a) return nullptr;
  const std::string* s = nullptr;
  if (a->attr->type == ir::AttrType::kString && i == 0) s = &a->attr->s;
  if (a->attr->type == ir::AttrType::kStrings && i < a->attr->strings.size()) s = &a->attr->strings[i];
  if (!s) return nullptr;
  if (out_size) *out_size = s->size();
  return s->c_str();
}
kiln_status_t* attribute_tensor(const kiln_attribute_t* a, size_t i, kiln_tensor_t* out) noexcept {
  try {
    if (!a || !out) return make_c_status(invalid_argument("attribute_tensor: NULL attribute or out_tensor"));
    const ir::Attribute& x = *a->attr;
    const Tensor* t = nullptr;
    if ((x.type == ir::AttrType::kTensor || x.type == ir::AttrType::kSparseTensor) && i == 0) t = &x.t;
    if ((x.type == ir::AttrType::kTensors || x.type == ir::AttrType::kSparseTensors) && i < x.tensors.size())
      t = &x.tensors[i];
    if (!t) {
      return make_c_status(invalid_argument("attribute '", x.name, "' has no tensor ", i, " (type ",
                                            ir::attr_type_name(x.type), ")"));
    }
    const uint32_t size = out->struct_size;
    Status st = tensor_view(*t, out, size);
    out->struct_size = size;
    return make_c_status(std::move(st).with_context("attribute '" + x.name + "'"));
  } catch (...) {
    return make_c_status(internal_error("attribute_tensor failed"));
  }
}
const kiln_graph_t* attribute_graph(const kiln_attribute_t* a, size_t i) noexcept {
  if (!a) return nullptr;
  try {
    const ir::Attribute& x = *a->attr;
    const ir::Graph* sub = nullptr;
    if (x.type == ir::AttrType::kGraph && i == 0) sub = x.g.get();
    if (x.type == ir::AttrType::kGraphs && i < x.graphs.size()) sub = x.graphs[i].get();
    if (!sub) return nullptr;
    if (a->subgraphs.size() <= i) a->subgraphs.resize(i + 1);
    if (!a->subgraphs[i]) {
      std::vector<int32_t> all(sub->nodes.size());
      for (size_t k = 0; k < all.size(); ++k) all[k] = static_cast<int32_t>(k);
      auto view = make_graph_view(*sub, nullptr, all, {}, a->graph->hashes);
      // Outer references to values the host holds constant (initializers and
      // folded values of the enclosing view) are constants here too.
      for (ir::ValueId ref : sub->outer_refs) {
        ir::ValueId outer = a->graph->graph->find_value(sub->value_name(ref));
        if (outer == ir::kNoValue) continue;
        const kiln_value& ov = a->graph->values[static_cast<size_t>(outer)];
        kiln_value& v = view->values[static_cast<size_t>(ref)];
        if (ov.constant && !v.constant) {
          v.constant = ov.constant;
          v.external = ov.external;
        }
      }
      a->subgraphs[i] = std::move(view);
    }
    return a->subgraphs[i].get();
  } catch (...) {
    return nullptr;
  }
}
const kiln_value_t* attribute_type_proto(const kiln_attribute_t* a, size_t i) noexcept {
  if (!a) return nullptr;
  try {
    const ir::Attribute& x = *a->attr;
    const ir::ValueType* t = nullptr;
    if (x.type == ir::AttrType::kTypeProto && i == 0) t = &x.tp;
    if (x.type == ir::AttrType::kTypeProtos && i < x.tps.size()) t = &x.tps[i];
    if (!t) return nullptr;
    if (a->type_values.size() <= i) a->type_values.resize(i + 1);
    if (!a->type_values[i]) {
      auto v = std::make_unique<kiln_value>();
      v->graph = a->graph;
      v->type = t;
      a->type_values[i] = std::move(v);
    }
    return a->type_values[i].get();
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

void fill_graph_view_functions(kiln_host_api_t& t) {
  t.graph_name = &graph_name;
  t.graph_num_nodes = &graph_num_nodes;
  t.graph_node = &graph_node;
  t.graph_num_inputs = &graph_num_inputs;
  t.graph_input = &graph_input;
  t.graph_num_outputs = &graph_num_outputs;
  t.graph_output = &graph_output;
  t.graph_find_value = &graph_find_value;
  t.graph_opset = &graph_opset;
  t.node_name = &node_name;
  t.node_op_type = &node_op_type;
  t.node_domain = &node_domain;
  t.node_opset = &node_opset;
  t.node_index = &node_index;
  t.node_num_inputs = &node_num_inputs;
  t.node_input = &node_input;
  t.node_num_outputs = &node_num_outputs;
  t.node_output = &node_output;
  t.node_num_attributes = &node_num_attributes;
  t.node_attribute = &node_attribute;
  t.node_find_attribute = &node_find_attribute;
  t.value_name = &value_name;
  t.value_kind = &value_kind;
  t.value_dtype = &value_dtype;
  t.value_rank = &value_rank;
  t.value_dim = &value_dim;
  t.value_is_constant = &value_is_constant;
  t.value_constant = &value_constant;
  t.value_constant_info = &value_constant_info;
  t.value_is_graph_input = &value_is_graph_input;
  t.value_is_graph_output = &value_is_graph_output;
  t.value_producer = &value_producer;
  t.value_num_consumers = &value_num_consumers;
  t.value_consumer = &value_consumer;
  t.value_has_outside_consumers = &value_has_outside_consumers;
  t.attribute_name = &attribute_name;
  t.attribute_type = &attribute_type;
  t.attribute_count = &attribute_count;
  t.attribute_int = &attribute_int;
  t.attribute_float = &attribute_float;
  t.attribute_ints = &attribute_ints;
  t.attribute_floats = &attribute_floats;
  t.attribute_string = &attribute_string;
  t.attribute_tensor = &attribute_tensor;
  t.attribute_graph = &attribute_graph;
  t.attribute_type_proto = &attribute_type_proto;
}

}  // namespace kiln::runtime
