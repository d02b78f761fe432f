// What a library's sessions can do beyond running programs: defined once per
// library, so the same session code (session.cpp, program_session.cpp)
// links into both.
//   session_onnx.cpp          libkiln (the `kiln` target): the ONNX importer
//                             and every portable kernel.
//   session_runtime_only.cpp  libkiln_runtime: no importer (ONNX files are
//                             refused by name) and the kernels the
//                             application registered (kiln/kernels.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ir/graph.h"
#include "kernels/default_registry.h"
#include "kiln/session.h"

namespace kiln::api {

/// The registry this library's sessions pick portable kernels from.
const kernels::KernelRegistry& session_kernels();

/// Imports an ONNX model file for Session::load (external data relative to
/// its folder).
Result<ir::Model> import_onnx_file(const std::string& path, const SessionOptions& options);
/// Session::load of an ONNX file: through the whole-program cache when the
/// options name a cache folder (program_cache.cpp), else imported and built.
Result<std::unique_ptr<Session>> load_onnx_session(const std::string& path, const SessionOptions& options);
/// Imports an ONNX model held in memory; `base_dir` resolves external data.
Result<ir::Model> import_onnx_bytes(std::span<const uint8_t> bytes, const SessionOptions& options,
                                    const std::string& base_dir);

}  // namespace kiln::api
