#include "xnn_isa.h"

#include <cstdlib>
#include <string>

#include "kiln/c/backend_sdk.hpp"

namespace kiln_xnnpack {

Isa cpu_isa() {
#if defined(__x86_64__) || defined(__i386__)
  static const Isa isa = __builtin_cpu_supports("avx512f") ? Isa::kAvx512
                         : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Isa::kAvx2
                                                                                            : Isa::kNone;
  return isa;
#else
  return Isa::kNone;
#endif
}

Isa capped_isa(const char* var) {
  const Isa cpu = cpu_isa();
  const char* env = std::getenv(var);
  if (!env) return cpu;
  const std::string v = env;
  Isa cap = Isa::kNone;
  if (v == "avx512") cap = Isa::kAvx512;
  else if (v == "avx2") cap = Isa::kAvx2;
  else if (v != "none" && v != "baseline")
    kiln::sdk::fail(KILN_STATUS_INVALID_ARGUMENT,
                    std::string(var) + "='" + v + "' is not an instruction set (avx512, avx2, none or baseline)");
  return cap < cpu ? cap : cpu;
}

Isa kernel_isa() { return capped_isa("KILN_XNNPACK_ISA"); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kNone: break;
  }
  return "none";
}

}  // namespace kiln_xnnpack
