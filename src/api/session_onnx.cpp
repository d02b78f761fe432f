// libkiln's session flavor (api/session_flavor.h): ONNX models are imported,
// and sessions pick from every portable kernel.
#include <filesystem>

#include "api/program_session.h"
#include "api/session_flavor.h"
#include "onnx/importer.h"

namespace kiln::api {
namespace {

// Import options from session options. Ops with no portable kernel whose
// ONNX schema defines a function body are expanded into that body.
importer::ImportOptions import_options(const SessionOptions& options, std::string base_dir) {
  importer::ImportOptions io;
  io.base_dir = std::move(base_dir);
  io.infer_shapes = options.infer_shapes;
  io.has_kernel = [](const std::string& domain, const std::string& op, int opset) {
    return session_kernels().find(domain, op, opset, {}) != nullptr;
  };
  return io;
}

}  // namespace

const kernels::KernelRegistry& session_kernels() { return kernels::portable_registry(); }

Result<ir::Model> import_onnx_file(const std::string& path, const SessionOptions& options) {
  return importer::import_model_file(path, import_options(options, std::filesystem::path(path).parent_path().string()));
}

Result<ir::Model> import_onnx_bytes(std::span<const uint8_t> bytes, const SessionOptions& options,
                                    const std::string& base_dir) {
  return importer::import_model_bytes(bytes, import_options(options, base_dir));
}

Result<ir::Model> import_for_session(const std::string& path, const SessionOptions& options) {
  return import_onnx_file(path, options);
}

Result<std::unique_ptr<Session>> load_onnx_session(const std::string& path, const SessionOptions& options) {
  if (const std::string dir = cache_dir_of(options); !dir.empty()) return load_onnx_cached(path, options, dir);
  return session_with_hooks(import_onnx_file(path, options), options, {});
}

}  // namespace kiln::api
