// libFuzzer entry point over .kiln bytes: the header, the FlatBuffers
// verifier and Kiln's own checks of every id, offset and size. Any bytes
// must load or fail with a Status; never crash, hang or leak.
// Built only with -DKILN_FUZZ=ON and clang.
#include <cstddef>
#include <cstdint>

#include "core/tensor_access.h"
#include "program/program_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool init = [] {
    kiln::core::set_tensor_byte_limit(size_t{1} << 28);
    return true;
  }();
  (void)init;
  auto r = kiln::program::load_program_bytes({data, size});
  (void)r;
  return 0;
}
