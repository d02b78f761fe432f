// libFuzzer entry point: any bytes must import or fail with a Status, never
// crash, hang or leak. Built only with -DKILN_FUZZ=ON and clang.
#include <cstddef>
#include <cstdint>

#include "onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::importer::ImportOptions options;
  options.base_dir = "/nonexistent-kiln-fuzz";  // never read real side files
  // Exercise schema-function inlining too: pretend no op has a kernel.
  options.has_kernel = [](const std::string&, const std::string& op, int) { return op.size() % 2 == 0; };
  auto model = kiln::importer::import_model_bytes({data, size}, options);
  (void)model.ok();
  return 0;
}
