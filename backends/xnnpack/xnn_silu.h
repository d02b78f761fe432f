// SiLU, y = x * sigmoid(x) = x / (1 + e^-x), in one pass: the plugin's own
// kernel for x * Sigmoid(x) (efficientnet's activation), which this XNNPACK
// has no op for (Sigmoid then Mul: three passes over the tensor). Vectorized
// over 16 (AVX-512), 8 (AVX2+FMA) or 4 (baseline) lanes, picked at run time.
// Error: e^t by range reduction and Cephes' polynomial (about 1 ulp on
// [-87, 88]; e^-x is clamped to that range, so y = x above 87 and ~ -0
// below -88); y within 1e-6 relative of SiLU in double (the tests' bound,
// checked over [-100, 100] for every variant).
#pragma once

#include <cstddef>

namespace kiln_xnnpack {

/// y[i] = x[i] * sigmoid(x[i]) for i in [0, n); x and y may be the same.
using SiluFn = void (*)(const float* x, float* y, size_t n);

struct SiluKernel {
  SiluFn fn;
  const char* isa;  // "avx512", "avx2" or "baseline"
};

/// The widest variant this CPU runs, capped by $KILN_XNNPACK_ISA
/// like the plugin's other kernels (avx512, avx2, or none/baseline for the
/// C++ loop; tests run each). Read when called.
SiluKernel pick_silu();

}  // namespace kiln_xnnpack
