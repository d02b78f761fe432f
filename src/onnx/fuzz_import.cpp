// libFuzzer entry point: any bytes must import or fail with a Status, never
// crash, hang or leak. Built only with -DKILN_FUZZ=ON and clang.
//
// ONNX shape inference (libonnx 1.12) is off by default here: its inference
// functions trust declared ranks (Gemm-6 indexes dims of a rank-0 input) and
// crash on such models in ways the importer cannot guard, which would drown
// the importer's own findings. Set KILN_FUZZ_INFER=1 to include it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool infer = std::getenv("KILN_FUZZ_INFER") != nullptr;
  kiln::importer::ImportOptions options;
  options.base_dir = "/nonexistent-kiln-fuzz";  // never read real side files
  options.infer_shapes = infer;
  // Exercise schema-function inlining too: pretend half the ops lack a kernel.
  options.has_kernel = [](const std::string&, const std::string& op, int) { return op.size() % 2 == 0; };
  auto model = kiln::importer::import_model_bytes({data, size}, options);
  (void)model.ok();
  return 0;
}
