// Glue between Session and .kiln programs / the compile cache.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"
#include "kiln/session.h"
#include "kernels/prepack.h"
#include "runtime/backends/partitioner.h"
#include "runtime/memory_plan.h"
#include "runtime/program.h"

namespace kiln::api {

/// What a load takes from a program (or records for one): compiled
/// partitions, packed weights, a stored memory plan. All optional.
struct LoadHooks {
  runtime::CompileHook* compile = nullptr;    // null: the compile cache of the options, if any
  kernels::PrepackStore* prepack = nullptr;
  const runtime::MemoryPlan* plan = nullptr;  // ProgramOptions::stored_plan
};

// In session.cpp (they need Session's factory), and import_for_session in
// session_onnx.cpp (libkiln only):
/// Imports an ONNX file as Session::load would.
Result<ir::Model> import_for_session(const std::string& path, const SessionOptions& options);
/// Builds a session with `hooks`.
Result<std::unique_ptr<Session>> session_with_hooks(Result<ir::Model> model, const SessionOptions& options,
                                                    const LoadHooks& hooks);
/// The program a session runs.
const runtime::Program& session_program(const Session& session);

// In program_session.cpp:
/// The compile cache for `options` (cache_dir, else KILN_CACHE_DIR), or null.
std::unique_ptr<runtime::CompileHook> make_cache_hook(const SessionOptions& options);
/// The cache folder of `options` (cache_dir, else KILN_CACHE_DIR); empty: none.
std::string cache_dir_of(const SessionOptions& options);
/// Session::load for a .kiln file. `strict`: any partition the program
/// cannot supply is an error even when it kept its portable fallback, and
/// nothing is printed (the program cache's loads).
Result<std::unique_ptr<Session>> load_program_session(const std::string& path, const SessionOptions& options,
                                                      bool strict = false);

// In program_compile.cpp:
/// Records what a load compiles (exported blobs, packed weights) and writes
/// it as a program. `inner`: the hook that really compiles (a compile
/// cache), or null. `require_export`: a partition its backend cannot export
/// fails the load (kiln compile); else the load goes on and only
/// export_status() says the program cannot be written.
class ProgramRecorder {
 public:
  explicit ProgramRecorder(runtime::CompileHook* inner = nullptr, bool require_export = true);
  ~ProgramRecorder();
  ProgramRecorder(const ProgramRecorder&) = delete;
  ProgramRecorder& operator=(const ProgramRecorder&) = delete;
  /// The hooks for session_with_hooks.
  LoadHooks hooks();
  /// First export failure (a backend without export), OK when none: write()
  /// is only meaningful then.
  const Status& export_status() const;
  /// Writes `graph` (the model as imported) with what `session` recorded.
  Status write(const ir::Graph& graph, const Session& session, const SessionOptions& options, bool keep_fallback,
               const std::string& producer, const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// In program_cache.cpp:
/// Session::load of an ONNX file with a cache folder: the whole program is
/// cached (DIR/programs/<hash>.kiln, keyed on the file's content and the
/// options that shape the program) and loaded from there when intact.
Result<std::unique_ptr<Session>> load_onnx_cached(const std::string& path, const SessionOptions& options,
                                                  const std::string& dir);

}  // namespace kiln::api
