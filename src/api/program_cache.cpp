// The program cache: Session::load of an ONNX file with a cache folder keeps
// the whole built program (DIR/programs/<key>.kiln) and loads it from there
// next time, skipping the ONNX import, partitioning, compilation and weight
// packing. The key hashes the model file's bytes and every option that
// shapes the program; a checksum file beside each entry
// (<key>.kiln.sum: magic, size, hash of the .kiln bytes) catches corrupt or
// truncated entries, which are ignored with a warning and written again, as
// the compile cache's partition entries are.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "api/program_session.h"
#include "kiln/backends.h"
#include "runtime/backends/content_key.h"
#include "runtime/compile_cache.h"

namespace kiln::api {
namespace {
namespace fs = std::filesystem;

// Everything besides the model's bytes that decides what program a load
// builds: the options, and (unless portable only) the plugins at hand.
std::string options_text(const SessionOptions& o) {
  std::string s = "kiln program cache 1\ninfer_shapes=" + std::to_string(o.infer_shapes) +
                  "\nfold=" + std::to_string(o.fold_constants) +
                  "\nfallback=" + std::to_string(static_cast<int>(o.fallback)) + "\nbackends=";
  for (const std::string& b : o.backends) s += b + ",";
  std::vector<std::string> opts;
  for (const BackendOption& b : o.backend_options) opts.push_back(b.backend + "." + b.key + "=" + b.value);
  std::sort(opts.begin(), opts.end());
  for (const std::string& x : opts) s += "\noption " + x;
  if (o.backend_registry) {
    for (const BackendInfo& b : o.backend_registry->backends())
      s += "\nplugin " + b.name + " " + b.version + " abi " + b.abi_version + " sdk " + b.vendor_sdk_version +
           (b.available ? " available" : " unavailable");
  }
  return s;
}

// Writes the program and then its checksum, each through a rename; a crash
// in between leaves an entry whose checksum does not match (ignored).
Status store_entry(const ProgramRecorder& rec, const ir::Graph& graph, const Session& session,
                   const SessionOptions& options, const std::string& entry) {
  std::error_code ec;
  fs::create_directories(fs::path(entry).parent_path(), ec);
  if (ec) return invalid_argument("cannot create '", fs::path(entry).parent_path().string(), "': ", ec.message());
  fs::remove(entry + ".sum", ec);
  const std::string tmp = entry + ".tmp" + std::to_string(::getpid());
  KILN_RETURN_IF_ERROR(rec.write(graph, session, options, false, "kiln program cache", tmp));
  fs::rename(tmp, entry, ec);
  if (ec) return invalid_argument("cannot rename '", tmp, "': ", ec.message());
  return runtime::write_program_entry_sum(entry);
}

void warn(const std::string& message) {
  std::fprintf(stderr, "kiln: warning: program cache: %s\n", message.c_str());
}

}  // namespace

Result<std::unique_ptr<Session>> load_onnx_cached(const std::string& path, const SessionOptions& options,
                                                  const std::string& dir) {
  SessionOptions so = options;
  const bool portable_only = so.backends.size() == 1 && so.backends[0] == "portable";
  if (!so.backend_registry && !portable_only) {
    BackendDiscovery discovery;
    discovery.paths = so.backend_paths;
    so.backend_registry = BackendRegistry::create(discovery);
    so.backend_paths.clear();
  }
  std::string entry;
  if (auto content = runtime::hash_file(path); content.is_ok()) {
    const std::string key = *content + "\n" + options_text(so);
    entry = (fs::path(dir) / "programs" / (runtime::hash_hex(key.data(), key.size()) + ".kiln")).string();
  }
  std::error_code ec;
  if (!entry.empty() && fs::exists(entry, ec)) {
    Status intact = runtime::check_program_entry(entry);
    if (intact.is_ok()) {
      auto session = load_program_session(entry, so, /*strict=*/true);
      if (session.is_ok()) return session;
      warn("not using " + entry + ": " + session.status().message() + "; loading the model again");
    } else {
      warn("ignoring " + entry + ": " + intact.message() + "; loading the model again");
    }
  }
  KILN_ASSIGN_OR_RETURN(ir::Model model, import_for_session(path, so));
  const ir::Graph graph = model.graph;  // tensors shared, not copied
  std::unique_ptr<runtime::CompileHook> partitions = make_cache_hook(so);
  ProgramRecorder rec(partitions.get(), /*require_export=*/false);
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, session_with_hooks(std::move(model), so, rec.hooks()));
  if (!entry.empty() && rec.export_status().is_ok()) {
    Status st = store_entry(rec, graph, *session, so, entry);
    if (!st.is_ok()) warn("cannot store " + entry + ": " + st.message());
  }
  return session;
}

}  // namespace kiln::api
