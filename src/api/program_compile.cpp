// compile_program / inspect_program (kiln/program.h), and the recorder that
// turns a load into a program file (also used by the program cache).
#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "api/program_session.h"
#include "kiln/program.h"
#include "program/program_file.h"
#include "runtime/backends/plugin.h"
#include "runtime/compile_cache.h"

namespace kiln {
namespace api {
namespace {

// Compiles each partition (through `inner` when given), exports it and keeps
// the blob for the file.
class RecordingHook : public runtime::CompileHook {
 public:
  RecordingHook(runtime::CompileHook* inner, bool require_export) : inner_(inner), require_export_(require_export) {}
  Result<std::shared_ptr<runtime::CompiledPartition>> compile(const runtime::SelectedBackend& sb, const std::string& id,
                                                              const std::string& key, const CompileFn& compile) override {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::CompiledPartition> compiled,
                          inner_ ? inner_->compile(sb, id, key, compile) : compile());
    auto bytes = compiled->export_bytes();
    if (!bytes.is_ok()) {
      if (!require_export_) {
        if (fatal_.is_ok()) fatal_ = std::move(bytes).status();
        return compiled;  // the load goes on; only the program cannot be written
      }
      if (fatal_.is_ok()) {
        fatal_ = unimplemented("backend '", sb.name, "' cannot export partition ", id, " (",
                               bytes.status().message(), "); leave it out of --backends");
      }
      return std::move(bytes).status();
    }
    blobs_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(*bytes)));
    records_.push_back(program::PartitionRecord{id, key, sb.name, sb.instance->plugin().info().version,
                                                runtime::compat_key(sb), *blobs_.back()});
    return compiled;
  }
  const std::vector<program::PartitionRecord>& records() const { return records_; }
  const Status& fatal() const { return fatal_; }

 private:
  runtime::CompileHook* inner_;
  bool require_export_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> blobs_;
  std::vector<program::PartitionRecord> records_;
  Status fatal_ = Status::ok();
};

// Keeps every packing the portable kernels make (they stay alive with it).
class RecordingPrepack : public kernels::PrepackStore {
 public:
  kernels::PackedBytes find(const ir::Node&, std::string_view) const override { return {}; }
  void offer(const ir::Node& node, std::string_view key, kernels::PackedBytes bytes) override {
    if (node.outputs.empty() || node.outputs[0] == ir::kNoValue || bytes.bytes.empty()) return;
    holders_.push_back(std::move(bytes.holder));
    records_.push_back(program::PackedRecord{node.outputs[0], std::string(key), bytes.bytes});
  }
  const std::vector<program::PackedRecord>& records() const { return records_; }

 private:
  std::vector<std::shared_ptr<const void>> holders_;
  std::vector<program::PackedRecord> records_;
};

}  // namespace

struct ProgramRecorder::Impl {
  Impl(runtime::CompileHook* inner, bool require_export) : hook(inner, require_export) {}
  RecordingHook hook;
  RecordingPrepack prepack;
};

ProgramRecorder::ProgramRecorder(runtime::CompileHook* inner, bool require_export)
    : impl_(std::make_unique<Impl>(inner, require_export)) {}
ProgramRecorder::~ProgramRecorder() = default;

LoadHooks ProgramRecorder::hooks() { return LoadHooks{&impl_->hook, &impl_->prepack, nullptr}; }

const Status& ProgramRecorder::export_status() const { return impl_->hook.fatal(); }

Status ProgramRecorder::write(const ir::Graph& graph, const Session& session, const SessionOptions& options,
                              bool keep_fallback, const std::string& producer, const std::string& path) const {
  program::ProgramContents contents;
  contents.producer = producer;
  contents.backends = session.placement().backends;
  for (const BackendOption& o : options.backend_options) contents.options.emplace_back(o.backend + "." + o.key, o.value);
  contents.keep_fallback = keep_fallback;
  contents.partitions = impl_->hook.records();
  contents.packed = impl_->prepack.records();
  if (auto plan = session_program(session).static_plan()) {
    contents.plan.present = true;
    contents.plan.arena_bytes = plan->arena_bytes;
    contents.plan.offsets = plan->offsets;
    contents.plan.sizes.assign(plan->sizes.begin(), plan->sizes.end());
    contents.arena_bytes = plan->arena_bytes;
  }
  return program::write_program(graph, contents, path);
}

}  // namespace api

Result<ProgramSummary> compile_program(const std::string& model_path, const std::string& out_path,
                                       const SessionOptions& options, const CompileOptions& compile) {
  KILN_ASSIGN_OR_RETURN(ir::Model model, api::import_for_session(model_path, options));
  const ir::Graph graph = model.graph;  // the session takes the model; tensors are shared, not copied
  api::ProgramRecorder recorder;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                        api::session_with_hooks(std::move(model), options, recorder.hooks()));
  KILN_RETURN_IF_ERROR(recorder.export_status().clone());
  KILN_RETURN_IF_ERROR(recorder.write(graph, *session, options, compile.keep_fallback, "kiln compile", out_path));
  return inspect_program(out_path);
}

Result<ProgramSummary> inspect_program(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(program::LoadedProgram p, program::load_program_file(path));
  ProgramSummary s;
  s.format_version = p.format_version;
  s.producer = p.contents.producer;
  s.file_bytes = p.file_size;
  s.constant_bytes = p.constant_bytes;
  s.num_nodes = p.graph.nodes.size();
  s.num_values = p.graph.values.size();
  s.num_initializers = p.graph.initializers.size();
  s.backends = p.contents.backends;
  s.options = p.contents.options;
  s.keep_fallback = p.contents.keep_fallback;
  for (const program::PartitionRecord& r : p.contents.partitions)
    s.partitions.push_back({r.id, r.backend, r.backend_version, r.compat_key, r.blob.size()});
  s.has_memory_plan = p.contents.plan.present;
  s.arena_bytes = p.contents.plan.arena_bytes;
  for (const program::PackedRecord& r : p.contents.packed) {
    ++s.num_packed;
    s.packed_bytes += r.bytes.size();
    const std::string layout = r.key.substr(r.key.find('/') + 1);
    if (std::find(s.packed_layouts.begin(), s.packed_layouts.end(), layout) == s.packed_layouts.end())
      s.packed_layouts.push_back(layout);
  }
  return s;
}

bool is_program_file(const std::string& path) { return program::is_program_file(path); }

}  // namespace kiln
