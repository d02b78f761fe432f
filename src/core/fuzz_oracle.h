// Checks shared by the libFuzzer targets (fuzz_*.cpp; built only with
// -DKILN_FUZZ=ON): a write-then-read round trip must give back the same
// tensor, bit for bit. A difference is a finding: the target traps.
#pragma once

#include <cstring>
#include <string>

#include "kiln/tensor.h"

namespace kiln::core {

/// True when `a` and `b` have the same dtype, shape and element bits
/// (strings compared as strings; NaN payloads compared as bits).
inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  if (a.dtype() == DType::kString) {
    for (int64_t i = 0; i < a.numel(); ++i)
      if (a.data<std::string>()[i] != b.data<std::string>()[i]) return false;
    return true;
  }
  return a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace kiln::core
