// Session::load for .kiln programs, and the compile cache hook.
#include "api/program_session.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "kiln/compile_cache.h"
#include "kiln/program.h"
#include "program/program_file.h"
#include "runtime/backends/plugin.h"
#include "runtime/compile_cache.h"

namespace kiln::api {
namespace {

std::string options_key(const SessionOptions& options) {
  std::vector<std::string> parts;
  for (const BackendOption& o : options.backend_options) parts.push_back(o.backend + "." + o.key + "=" + o.value);
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (const std::string& p : parts) out += p + "\n";
  return out;
}

// Supplies each partition's blob from the program; a partition the program
// lacks, or whose blob its backend rejects, is fatal unless the program kept
// its portable fallback (then the nodes stay portable, with a note).
class ProgramHook : public runtime::CompileHook {
 public:
  ProgramHook(const program::LoadedProgram& prog, std::string path, bool strict)
      : prog_(prog), path_(std::move(path)), strict_(strict) {
    for (const program::PartitionRecord& r : prog.contents.partitions) by_key_[strict ? r.id : r.key] = &r;
  }
  // A strict load reads a checksummed program-cache entry that this runtime
  // wrote for exactly this graph: the partition id (a hash of the nodes)
  // identifies each blob, and re-hashing every weight for the content key
  // would only repeat the checksum.
  bool wants_content_key() const override { return !strict_; }
  Result<std::shared_ptr<runtime::CompiledPartition>> compile(const runtime::SelectedBackend& sb, const std::string& id,
                                                              const std::string& key, const CompileFn&) override {
    auto it = by_key_.find(strict_ ? id : key);
    if (it == by_key_.end()) return reject(id, "the program holds no compiled partition " + id + " for " + sb.name);
    const program::PartitionRecord& rec = *it->second;
    const BackendInfo& info = sb.instance->plugin().info();
    if (rec.backend != sb.name || rec.backend_version != info.version) {
      return reject(id, "partition " + id + " was compiled by " + rec.backend + " " + rec.backend_version +
                            "; loaded is " + sb.name + " " + info.version);
    }
    auto imported = sb.instance->import_compiled(rec.blob.data(), rec.blob.size());
    if (!imported.is_ok()) {
      return reject(id, "backend '" + sb.name + "' rejects partition " + id + ": " + imported.status().message());
    }
    return imported;
  }
  Status take_fatal() { return std::move(fatal_); }

 private:
  Status reject(const std::string& id, const std::string& why) {
    if (prog_.contents.keep_fallback && !strict_) {
      std::fprintf(stderr, "kiln: note: %s: %s; running it on portable kernels\n", path_.c_str(), why.c_str());
    } else if (fatal_.is_ok()) {
      fatal_ = invalid_argument(path_, ": ", why, " (recompile the program, or compile it with --keep-fallback)");
    }
    (void)id;
    return invalid_argument(why);
  }
  const program::LoadedProgram& prog_;
  std::string path_;
  bool strict_;
  std::map<std::string, const program::PartitionRecord*> by_key_;
  Status fatal_ = Status::ok();
};

// Answers kernels from the program's packed weights, in place in the
// mapping. The kernel checks each size against its layout before use.
class ProgramPrepack : public kernels::PrepackStore {
 public:
  explicit ProgramPrepack(const program::LoadedProgram& prog) : holder_(prog.mapping) {
    for (const program::PackedRecord& r : prog.contents.packed) by_key_[{r.value, r.key}] = r.bytes;
  }
  kernels::PackedBytes find(const ir::Node& node, std::string_view key) const override {
    if (node.outputs.empty()) return {};
    auto it = by_key_.find({node.outputs[0], std::string(key)});
    if (it == by_key_.end()) return {};
    return kernels::PackedBytes{it->second, holder_};
  }
  void offer(const ir::Node&, std::string_view, kernels::PackedBytes) override {}

 private:
  std::shared_ptr<const void> holder_;
  std::map<std::pair<ir::ValueId, std::string>, std::span<const uint8_t>> by_key_;
};

runtime::MemoryPlan memory_plan(const program::StoredPlan& p) {
  runtime::MemoryPlan plan;
  plan.arena_bytes = static_cast<size_t>(p.arena_bytes);
  plan.offsets = p.offsets;
  plan.sizes.assign(p.sizes.begin(), p.sizes.end());
  return plan;
}

// The backends a program was compiled for that this process has; a missing
// one is an error naming it, unless the program kept the portable fallback.
Result<std::vector<std::string>> program_backends(const program::LoadedProgram& prog, const BackendRegistry& reg,
                                                  const std::string& path, bool strict) {
  std::vector<std::string> out;
  for (const std::string& name : prog.contents.backends) {
    if (name == "portable") {
      out.push_back(name);
      continue;
    }
    auto info = reg.find(name);
    std::string why = !info.is_ok() ? "it is not loaded" : !info->available ? info->unavailable_reason : "";
    if (why.empty()) {
      out.push_back(name);
    } else if (prog.contents.keep_fallback && !strict) {
      std::fprintf(stderr, "kiln: note: %s: backend '%s' is not available (%s); its partitions run on portable kernels\n",
                   path.c_str(), name.c_str(), why.c_str());
    } else {
      return not_found(path, ": the program was compiled for backend '", name,
                                 "', which is not available here (", why,
                                 "); load its plugin, recompile, or compile with --keep-fallback");
    }
  }
  if (out.empty()) out.push_back("portable");
  return out;
}

}  // namespace

std::string cache_dir_of(const SessionOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  const char* env = std::getenv("KILN_CACHE_DIR");
  return env ? std::string(env) : std::string();
}

std::unique_ptr<runtime::CompileHook> make_cache_hook(const SessionOptions& options) {
  const std::string dir = cache_dir_of(options);
  if (dir.empty()) return nullptr;
  return std::make_unique<runtime::CompileCache>(dir, options_key(options));
}

Result<std::unique_ptr<Session>> load_program_session(const std::string& path, const SessionOptions& options,
                                                      bool strict) {
  KILN_ASSIGN_OR_RETURN(program::LoadedProgram prog, program::load_program_file(path));
  SessionOptions so = options;
  if (!so.backend_registry) {
    BackendDiscovery discovery;
    discovery.paths = so.backend_paths;
    // A portable-only program needs no plugin: loading them (dlopen of
    // vendor libraries) would be most of its load time.
    const auto& bs = prog.contents.backends;
    discovery.use_environment = discovery.use_default_dirs =
        !std::all_of(bs.begin(), bs.end(), [](const std::string& b) { return b == "portable"; });
    so.backend_registry = BackendRegistry::create(discovery);
    so.backend_paths.clear();
  }
  KILN_ASSIGN_OR_RETURN(so.backends, program_backends(prog, *so.backend_registry, path, strict));
  so.backend_options.clear();
  for (const auto& [k, v] : prog.contents.options) {
    const size_t dot = k.find('.');
    const std::string backend = k.substr(0, dot);
    if (dot == std::string::npos ||
        std::find(so.backends.begin(), so.backends.end(), backend) == so.backends.end())
      continue;
    so.backend_options.push_back(BackendOption{backend, k.substr(dot + 1), v});
  }
  ProgramHook hook(prog, path, strict);
  ProgramPrepack prepack(prog);
  const runtime::MemoryPlan plan = memory_plan(prog.contents.plan);
  ir::Model model;
  model.graph = std::move(prog.graph);
  auto session = session_with_hooks(std::move(model), so,
                                    LoadHooks{&hook, &prepack, prog.contents.plan.present ? &plan : nullptr});
  KILN_RETURN_IF_ERROR(hook.take_fatal());
  return session;
}

}  // namespace kiln::api

namespace kiln {

std::vector<CacheEntry> list_cache(const std::string& dir) {
  std::vector<CacheEntry> out;
  for (const runtime::CacheEntryInfo& e : runtime::CompileCache::list(dir))
    out.push_back(CacheEntry{e.path, e.backend, e.bytes, e.valid});
  return out;
}

Result<size_t> clear_cache(const std::string& dir) { return runtime::CompileCache::clear(dir); }

}  // namespace kiln
