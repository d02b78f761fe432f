// Glue between Session and .kiln programs / the compile cache.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"
#include "kiln/session.h"
#include "runtime/backends/partitioner.h"

namespace kiln::api {

// In session.cpp, and import_for_session in session_onnx.cpp (libkiln only):
/// Imports an ONNX file as Session::load would.
Result<ir::Model> import_for_session(const std::string& path, const SessionOptions& options);
/// Builds a session whose partitions are compiled through `hook`.
Result<std::unique_ptr<Session>> session_with_hook(Result<ir::Model> model, const SessionOptions& options,
                                                   runtime::CompileHook* hook);

// In program_session.cpp:
/// The compile cache for `options` (cache_dir, else KILN_CACHE_DIR), or null.
std::unique_ptr<runtime::CompileHook> make_cache_hook(const SessionOptions& options);
/// Session::load for a .kiln file.
Result<std::unique_ptr<Session>> load_program_session(const std::string& path, const SessionOptions& options);

}  // namespace kiln::api
