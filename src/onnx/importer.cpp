#include "onnx/importer.h"

#include <deque>
#include <exception>
#include <memory>
#include <new>
#include <unordered_set>

#include "onnx/external_data.h"
#include "onnx/function_inliner.h"
#include "onnx/graph_converter.h"
#include "onnx/model_parser.h"
#include "onnx/defs/schema.h"
#include "onnx/type_inference.h"

namespace kiln::importer {

namespace {

using TypeIndex = std::unordered_map<std::string, const onnx::TypeProto*>;

// Types of every named value of every graph of `m`, for building
// context-dependent function bodies.
void index_types(const onnx::GraphProto& g, std::deque<onnx::TypeProto>* storage, TypeIndex* out) {
  for (const auto& t : g.initializer()) {
    onnx::TypeProto tp;
    auto* tt = tp.mutable_tensor_type();
    tt->set_elem_type(t.data_type());
    for (int64_t d : t.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
    storage->push_back(std::move(tp));
    (*out)[t.name()] = &storage->back();
  }
  for (const auto& vi : g.value_info())
    if (vi.has_type()) (*out)[vi.name()] = &vi.type();
  for (const auto& vi : g.input())
    if (vi.has_type()) (*out)[vi.name()] = &vi.type();
  for (const auto& vi : g.output())
    if (vi.has_type()) (*out)[vi.name()] = &vi.type();
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if (a.has_g()) index_types(a.g(), storage, out);
      for (const auto& sub : a.graphs()) index_types(sub, storage, out);
    }
  }
}

// Whether some node of `g` lacks a kernel and has a context-dependent ONNX
// function body, which needs value types (from a first inference) to build.
bool needs_context_types(const onnx::GraphProto& g, const OpsetMap& opsets, const HasKernelFn& has_kernel) {
  for (const auto& n : g.node()) {
    const std::string domain = normalize_domain(n.domain());
    auto v = opsets.find(domain);
    if (v != opsets.end() && !has_kernel(domain, n.op_type(), v->second)) {
      const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), v->second, domain);
      if (schema && schema->HasContextDependentFunction()) return true;
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g() && needs_context_types(a.g(), opsets, has_kernel)) return true;
      for (const auto& sub : a.graphs())
        if (needs_context_types(sub, opsets, has_kernel)) return true;
    }
  }
  return false;
}

Result<OpsetMap> model_opsets(onnx::ModelProto& m) {
  OpsetMap opsets;
  for (const auto& p : m.opset_import()) {
    if (p.version() < 1 || p.version() > INT32_MAX)
      return invalid_argument("opset_import of domain '", p.domain().empty() ? "ai.onnx" : p.domain(),
                              "' has invalid version ", p.version());
    opsets[normalize_domain(p.domain())] = static_cast<int>(p.version());
  }
  // Before IR version 3 models had no opset_import and meant ai.onnx v1.
  if (opsets.empty() && m.ir_version() < 3) {
    opsets[""] = 1;
    auto* p = m.add_opset_import();
    p->set_domain("");
    p->set_version(1);
  }
  return opsets;
}

Result<ir::Model> import_proto(onnx::ModelProto& m, const ImportOptions& options) {
  if (!m.has_ir_version() || m.ir_version() == 0)
    return invalid_argument("the model has no ir_version (an ONNX model must declare its IR version)");
  if (m.ir_version() < kMinIrVersion || m.ir_version() > kMaxIrVersion)
    return unimplemented("the model has IR version ", m.ir_version(), "; Kiln supports IR versions ", kMinIrVersion,
                         " to ", kMaxIrVersion);
  // A newer IR version alone is no reason to refuse: only the features Kiln
  // does not implement are (the node-level ones are checked per node).
  if (has_unknown_field(m, kModelConfigurationField))
    return unimplemented("the model has a device configuration (ModelProto.configuration: multi-device execution, "
                         "IR version 11), which Kiln does not implement");
  if (!m.has_graph()) return invalid_argument("the model has no graph");
  KILN_ASSIGN_OR_RETURN(OpsetMap opsets, model_opsets(m));

  std::unordered_set<std::string> function_keys;
  for (const auto& f : m.functions()) {
    if (f.name().empty()) return invalid_argument("a model-local function has no name");
    if (!function_keys.insert(function_key(f.domain(), f.name(), function_overload(f))).second)
      return invalid_argument("model-local function '", f.domain().empty() ? "" : f.domain() + ".", f.name(),
                              "' is defined twice");
  }

  // Structure first (names defined, attributes well formed), without the
  // tensor data: libonnx crashes on models that fail these checks, and the
  // errors read better from here than from shape inference.
  {
    ConvertContext check;
    check.model_opsets = &opsets;
    check.check_only = true;
    ir::Model scratch;
    KILN_RETURN_IF_ERROR(convert_main_graph(m.mutable_graph(), nullptr, check, &scratch.graph));
    try {
      KILN_RETURN_IF_ERROR(check_schemas(m.graph(), opsets));
      // Model-local function bodies are inlined into the graph: their nodes
      // meet the same schemas, under the function's own opset imports.
      for (const auto& f : m.functions()) {
        OpsetMap f_opsets = opsets;
        for (const auto& p : f.opset_import()) f_opsets[normalize_domain(p.domain())] = static_cast<int>(p.version());
        for (const auto& n : f.node()) {
          Status s = check_node_schema(n, f_opsets);
          if (!s.is_ok()) return std::move(s).with_context("model-local function '" + f.name() + "'");
        }
      }
    } catch (const std::exception& e) {
      return invalid_argument("checking nodes against their ONNX schemas failed: ", e.what());
    }
    for (const auto& f : m.functions()) {
      ir::Function fn;
      KILN_RETURN_IF_ERROR(convert_function(f, check, &fn));
    }
  }

  std::unique_ptr<onnx::ModelProto> typed;
  NodeOpsets node_opsets;
  if (options.inline_functions) {
    std::unique_ptr<onnx::ModelProto> pre;
    // Context-dependent bodies (CastLike, Celu, ...) are built from the types
    // of the call's inputs; only then is the model inferred before inlining.
    // Calls that appear only inside model-local functions get declared types.
    if (options.has_kernel && options.infer_shapes && needs_context_types(m.graph(), opsets, options.has_kernel))
      pre = infer_types(m, opsets);
    std::deque<onnx::TypeProto> storage;
    TypeIndex types;
    if (options.has_kernel) index_types(pre ? pre->graph() : m.graph(), &storage, &types);
    FunctionInliner inliner(&m, opsets, &types);
    inliner.set_has_kernel(options.has_kernel);
    KILN_RETURN_IF_ERROR(inliner.run());
    node_opsets = inliner.node_opsets();
    if (inliner.num_inlined() == 0) typed = std::move(pre);
  }
  if (options.infer_shapes && !typed) typed = infer_types(m, opsets);

  ExternalData external(options.base_dir);
  ConvertContext ctx;
  ctx.model_opsets = &opsets;
  ctx.node_opsets = &node_opsets;
  ctx.external = &external;
  ctx.release_tensor_data = true;

  ir::Model model;
  model.ir_version = m.ir_version();
  model.producer = m.producer_name();
  if (!m.producer_version().empty()) model.producer += " " + m.producer_version();
  model.doc = m.doc_string();
  for (const auto& kv : m.metadata_props()) model.metadata[kv.key()] = kv.value();
  KILN_RETURN_IF_ERROR(convert_main_graph(m.mutable_graph(), typed ? &typed->graph() : nullptr, ctx, &model.graph));
  for (const auto& f : m.functions()) {
    ir::Function fn;
    KILN_RETURN_IF_ERROR(convert_function(f, ctx, &fn));
    model.functions.push_back(std::move(fn));
  }
  return model;
}

// libonnx and protobuf throw; nothing may escape the importer.
template <class F>
Result<ir::Model> guarded(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return make_status(StatusCode::kOutOfRange, "out of memory while importing the model");
  } catch (const std::exception& e) {
    return internal_error("importing the model failed: ", e.what());
  } catch (...) {
    return internal_error("importing the model failed with an unknown exception");
  }
}

}  // namespace

Result<ir::Model> import_model_file(const std::string& path, const ImportOptions& options) {
  return guarded([&]() -> Result<ir::Model> {
    onnx::ModelProto m;
    KILN_RETURN_IF_ERROR(parse_model_file(path, &m));
    ImportOptions opts = options;
    if (opts.base_dir.empty()) {
      const size_t slash = path.find_last_of('/');
      opts.base_dir = slash == std::string::npos ? std::string() : path.substr(0, slash == 0 ? 1 : slash);
    }
    auto r = import_proto(m, opts);
    if (!r.ok()) return std::move(r).status().with_context("model '" + path + "'");
    return r;
  });
}

Result<ir::Model> import_model_bytes(std::span<const uint8_t> bytes, const ImportOptions& options) {
  return guarded([&]() -> Result<ir::Model> {
    onnx::ModelProto m;
    KILN_RETURN_IF_ERROR(parse_model_proto(bytes, "the model", &m));
    return import_proto(m, options);
  });
}

}  // namespace kiln::importer
