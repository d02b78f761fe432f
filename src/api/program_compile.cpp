// compile_program / inspect_program (kiln/program.h).
#include <memory>
#include <vector>

#include "api/program_session.h"
#include "kiln/program.h"
#include "program/program_file.h"
#include "runtime/backends/plugin.h"
#include "runtime/compile_cache.h"

namespace kiln {
namespace {

// Compiles each partition, exports it and keeps the blob for the file.
class RecordingHook : public runtime::CompileHook {
 public:
  Result<std::shared_ptr<runtime::CompiledPartition>> compile(const runtime::SelectedBackend& sb, const std::string& id,
                                                              const std::string& key, const CompileFn& compile) override {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::CompiledPartition> compiled, compile());
    auto bytes = compiled->export_bytes();
    if (!bytes.is_ok()) {
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
  Status take_fatal() { return std::move(fatal_); }

 private:
  std::vector<std::unique_ptr<std::vector<uint8_t>>> blobs_;
  std::vector<program::PartitionRecord> records_;
  Status fatal_ = Status::ok();
};

}  // namespace

Result<ProgramSummary> compile_program(const std::string& model_path, const std::string& out_path,
                                       const SessionOptions& options, const CompileOptions& compile) {
  KILN_ASSIGN_OR_RETURN(ir::Model model, api::import_for_session(model_path, options));
  const ir::Graph graph = model.graph;  // the session takes the model; tensors are shared, not copied
  RecordingHook hook;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, api::session_with_hook(std::move(model), options, &hook));
  KILN_RETURN_IF_ERROR(hook.take_fatal());
  program::ProgramContents contents;
  contents.producer = "kiln compile";
  contents.backends = session->placement().backends;
  for (const BackendOption& o : options.backend_options) contents.options.emplace_back(o.backend + "." + o.key, o.value);
  contents.keep_fallback = compile.keep_fallback;
  contents.partitions = hook.records();
  KILN_RETURN_IF_ERROR(program::write_program(graph, contents, out_path));
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
  return s;
}

bool is_program_file(const std::string& path) { return program::is_program_file(path); }

}  // namespace kiln
