// libFuzzer entry point over .npy bytes (kiln/npy.h; `kiln run --input
// x.npy` reads them): magic, version, header dictionary, dtype descriptor,
// shape and data size. Any bytes must parse or fail with a Status, never
// crash, hang, leak or allocate more than the bytes justify; an array that
// parses must serialize and parse back bit for bit.
// Built only with -DKILN_FUZZ=ON and clang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/fuzz_oracle.h"
#include "kiln/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = kiln::parse_npy({data, size}, "fuzz input");
  if (!t.ok()) return 0;
  auto bytes = kiln::serialize_npy(*t);
  if (!bytes.ok()) std::abort();  // everything parse_npy returns has a NumPy dtype
  auto back = kiln::parse_npy(*bytes, "round trip");
  if (!back.ok() || !kiln::core::same_tensor(*t, *back)) std::abort();
  return 0;
}
