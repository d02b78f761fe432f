#include "kiln/session.h"

#include "core/thread_pool.h"
#include "api/program_session.h"
#include "api/session_flavor.h"
#include "program/program_file.h"
#include "runtime/backends/selection.h"
#include "runtime/program.h"

namespace kiln {

struct Session::Impl {
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<runtime::Program> program;
  std::vector<IoInfo> inputs;
  std::vector<IoInfo> outputs;
};

namespace {

IoInfo io_info(const ir::ValueInfo& v) {
  IoInfo info;
  info.name = v.name;
  info.type_string = v.type.to_string();
  const ir::ValueType* t = &v.type;
  switch (v.type.kind) {
    case ir::ValueType::Kind::kTensor: info.kind = IoInfo::Kind::kTensor; break;
    case ir::ValueType::Kind::kSequence: info.kind = IoInfo::Kind::kSequence; break;
    case ir::ValueType::Kind::kOptional: info.kind = IoInfo::Kind::kOptional; break;
    default: info.kind = IoInfo::Kind::kOther; break;
  }
  // Sequences and optionals describe their element tensor type.
  while (t && t->kind != ir::ValueType::Kind::kTensor) t = t->elem.get();
  if (t) {
    info.dtype = t->dtype;
    info.has_shape = t->has_shape;
    for (const ir::Dim& d : t->dims) {
      info.dims.push_back(d.known() ? d.value : -1);
      info.dim_params.push_back(d.param);
    }
  }
  return info;
}

std::string shape_string(const Shape& s) { return s.to_string(); }

Status check_input(const IoInfo& info, const Value& v) {
  if (info.kind == IoInfo::Kind::kTensor) {
    if (!v.is_tensor()) return invalid_argument("input '", info.name, "' must be a tensor (", info.type_string, ")");
    const Tensor& t = v.tensor();
    if (info.dtype != DType::kUndefined && t.dtype() != info.dtype) {
      return invalid_argument("input '", info.name, "' has dtype ", dtype_name(t.dtype()), ", expected ",
                              dtype_name(info.dtype));
    }
    if (info.has_shape) {
      bool ok = t.rank() == info.dims.size();
      for (size_t i = 0; ok && i < info.dims.size(); ++i)
        if (info.dims[i] >= 0 && info.dims[i] != t.dim(i)) ok = false;
      if (!ok) {
        return invalid_argument("input '", info.name, "' has shape ", shape_string(t.shape()), ", expected ",
                                info.type_string);
      }
    }
  } else if (info.kind == IoInfo::Kind::kSequence && !v.is_sequence()) {
    return invalid_argument("input '", info.name, "' must be a sequence (", info.type_string, ")");
  }
  return Status::ok();
}

}  // namespace

// Builds a session's inside from an imported model (a friend of Session).
struct SessionFactory {
  // `hooks.compile`: null for the compile cache of `options` (if any).
  static Result<std::unique_ptr<Session::Impl>> make_impl(Result<ir::Model> model, const SessionOptions& options,
                                                          const api::LoadHooks& hooks = {});
  static const runtime::Program& program(const Session& s) { return *s.impl_->program; }
  static std::unique_ptr<Session> wrap(std::unique_ptr<Session::Impl> impl) {
    return std::unique_ptr<Session>(new Session(std::move(impl)));
  }
};

Result<std::unique_ptr<Session::Impl>> SessionFactory::make_impl(Result<ir::Model> model, const SessionOptions& options,
                                                                 const api::LoadHooks& hooks) {
  runtime::CompileHook* hook = hooks.compile;
  if (!model.is_ok()) return std::move(model).status();
  auto impl = std::make_unique<Session::Impl>();
  auto graph = std::make_shared<ir::Graph>(std::move(model->graph));
  for (ir::ValueId id : graph->inputs) impl->inputs.push_back(io_info(graph->value(id)));
  for (ir::ValueId id : graph->outputs) impl->outputs.push_back(io_info(graph->value(id)));
  runtime::ProgramOptions popts;
  popts.registry = &api::session_kernels();
  popts.fold_constants = options.fold_constants;
  popts.rewrite = options.rewrite_graph;
  // Backends: a registry (given, or discovered for this session; none is
  // needed for portable only), then the partitioner inside Program::build.
  std::shared_ptr<BackendRegistry> registry = options.backend_registry;
  const bool portable_only = options.backends.size() == 1 && options.backends[0] == "portable";
  if (!registry) {
    BackendDiscovery discovery;
    discovery.paths = options.backend_paths;
    discovery.use_environment = discovery.use_default_dirs = !portable_only;
    registry = BackendRegistry::create(discovery);
  } else {
    for (const std::string& p : options.backend_paths) (void)registry->load(p);
  }
  KILN_ASSIGN_OR_RETURN(runtime::PartitionRequest request,
                        runtime::select_backends(*registry, options.backends, options.backend_options, options.fallback));
  std::unique_ptr<runtime::CompileHook> cache = hook ? nullptr : api::make_cache_hook(options);
  request.compile_hook = hook ? hook : cache.get();
  popts.partition = &request;
  popts.prepack = hooks.prepack;
  popts.stored_plan = hooks.plan;
  KILN_ASSIGN_OR_RETURN(impl->program, runtime::Program::build(std::move(graph), popts));
  if (options.threads != 1) impl->pool = std::make_unique<ThreadPool>(options.threads);
  return impl;
}

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> api::session_with_hooks(Result<ir::Model> model, const SessionOptions& options,
                                                         const LoadHooks& hooks) {
  KILN_ASSIGN_OR_RETURN(auto impl, SessionFactory::make_impl(std::move(model), options, hooks));
  return SessionFactory::wrap(std::move(impl));
}

const runtime::Program& api::session_program(const Session& session) { return SessionFactory::program(session); }

Result<std::unique_ptr<Session>> Session::load(const std::string& path, const SessionOptions& options) {
  if (program::is_program_file(path)) return api::load_program_session(path, options);
  return api::load_onnx_session(path, options);
}

Result<std::unique_ptr<Session>> Session::load_from_bytes(std::span<const uint8_t> bytes,
                                                          const SessionOptions& options,
                                                          const std::string& base_dir) {
  KILN_ASSIGN_OR_RETURN(auto impl,
                        SessionFactory::make_impl(api::import_onnx_bytes(bytes, options, base_dir), options));
  return SessionFactory::wrap(std::move(impl));
}

const std::vector<IoInfo>& Session::inputs() const { return impl_->inputs; }
const std::vector<IoInfo>& Session::outputs() const { return impl_->outputs; }
const PlacementReport& Session::placement() const { return impl_->program->placement(); }
size_t Session::num_nodes() const { return impl_->program->num_steps(); }

Result<std::vector<Value>> Session::run(std::span<const NamedValue> inputs, RunProfile* profile) const {
  return run(inputs, RunOptions{}, profile);
}

Result<std::vector<Value>> Session::run(std::span<const NamedValue> inputs, const RunOptions& options,
                                        RunProfile* profile) const {
  const auto& infos = impl_->inputs;
  std::vector<Value> ordered(infos.size());
  std::vector<int8_t> seen(infos.size(), 0);
  for (const auto& [name, value] : inputs) {
    size_t i = 0;
    while (i < infos.size() && infos[i].name != name) ++i;
    if (i == infos.size()) {
      std::string names;
      for (const IoInfo& info : infos) names += (names.empty() ? "'" : ", '") + info.name + "'";
      return invalid_argument("unknown input '", name, "'; the model's inputs are ",
                              names.empty() ? std::string("none") : names);
    }
    if (seen[i]) return invalid_argument("input '", name, "' is given more than once");
    KILN_RETURN_IF_ERROR(check_input(infos[i], value));
    seen[i] = 1;
    ordered[i] = value;
  }
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!seen[i] && infos[i].kind != IoInfo::Kind::kOptional)
      return invalid_argument("missing input '", infos[i].name, "' (", infos[i].type_string, ")");
  }
  return impl_->program->run(ordered, {}, impl_->pool.get(), profile, &options);
}

}  // namespace kiln
