// The instruction set of the plugin's own kernels (the fused blocks' GEMM
// and depthwise, the native depthwise, Winograd's transforms): each has an
// AVX-512F and an AVX2+FMA variant in the same library, and the widest the
// CPU runs is picked at run time, so one build serves AVX2-only and AVX-512
// machines. $KILN_XNNPACK_ISA caps it (avx512, avx2 or none), so tests and
// measurements run the AVX2 variants on an AVX-512 machine too. XNNPACK's
// own kernels are not affected: it picks its microkernels by the CPU.
#pragma once

#include <cstdint>

namespace kiln_xnnpack {

enum class Isa : uint8_t {
  kNone = 0,    // no variant of the plugin's kernels runs (XNNPACK's are used instead)
  kAvx2 = 1,    // AVX2 + FMA (256-bit)
  kAvx512 = 2,  // AVX-512F
};

/// The widest variant this CPU runs (cached).
Isa cpu_isa();

/// The widest variant the CPU runs, capped by the value of the environment
/// variable `var` when it is set ("avx512", "avx2", "none" or "baseline");
/// another value throws kiln::sdk::Error naming it. Read on every call: a
/// runtime reads it once when it is built.
Isa capped_isa(const char* var);

/// capped_isa("KILN_XNNPACK_ISA"): what the plugin's kernels use.
Isa kernel_isa();

/// "avx512", "avx2" or "none".
const char* isa_name(Isa isa);

}  // namespace kiln_xnnpack
