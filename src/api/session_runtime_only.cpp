// libkiln_runtime's session flavor (api/session_flavor.h): .kiln programs
// only, over the kernels the application registered (kiln/kernels.h).
// Built into libkiln_runtime alone (cmake/KilnRuntimeLibrary.cmake).
#include "api/session_flavor.h"

namespace kiln::api {
namespace {

Status no_importer(const std::string& what) {
  return invalid_argument(what,
                          " is not a .kiln program, and libkiln_runtime has no ONNX importer: compile the model "
                          "with `kiln compile MODEL.onnx -o MODEL.kiln`, or link libkiln");
}

}  // namespace

const kernels::KernelRegistry& session_kernels() { return kernels::default_registry(); }

Result<ir::Model> import_onnx_file(const std::string& path, const SessionOptions&) { return no_importer(path); }

Result<std::unique_ptr<Session>> load_onnx_session(const std::string& path, const SessionOptions&) {
  return no_importer(path);
}

Result<ir::Model> import_onnx_bytes(std::span<const uint8_t>, const SessionOptions&, const std::string&) {
  return no_importer("the model in memory");
}

}  // namespace kiln::api
