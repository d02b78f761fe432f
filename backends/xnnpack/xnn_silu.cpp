#include "xnn_silu.h"

#include "xnn_isa.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace kiln_xnnpack {

namespace {

constexpr size_t kL = 16;
// kL lanes as one value; the compiler splits it by the target of the
// function it is inlined in (one zmm, two ymm, four xmm registers).
typedef float VF __attribute__((vector_size(kL * sizeof(float))));
typedef int32_t VI __attribute__((vector_size(kL * sizeof(int32_t))));
typedef float VFu __attribute__((vector_size(kL * sizeof(float)), aligned(alignof(float)), may_alias));

// e^t for t in [-87.3, 88.3] (callers clamp), in place: t = n ln2 + r,
// |r| <= ln2 / 2, e^r by Cephes' degree-6 polynomial, 2^n into the exponent
// bits. (VF only by reference: no function's ABI depends on its width.)
[[gnu::always_inline]] inline void exp_lanes(VF& t) {
  const VF round = t * 1.44269504088896341f + 12582912.0f;  // + 1.5 * 2^23: round to nearest
  const VF n = round - 12582912.0f;
  const VF r = (t - n * 0.693359375f) - n * -2.12194440e-4f;  // ln2 in two parts
  VF p = VF{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
  VF scale;
  __builtin_memcpy(&scale, &bits, sizeof(scale));
  t = p * scale;
}

// x / (1 + e^-x), in place.
[[gnu::always_inline]] inline void silu_lanes(VF& x) {
  VF t = -x;
  t = t < -87.0f ? VF{} - 87.0f : t;  // e^-87 ~ 1.6e-38: y = x for larger x
  t = t > 88.0f ? VF{} + 88.0f : t;   // e^88 ~ 1.7e38: y ~ -0 for smaller x
  exp_lanes(t);
  x = x / (t + 1.0f);
}

[[gnu::always_inline]] inline void silu_span(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + kL <= n; i += kL) {
    VF v = *reinterpret_cast<const VFu*>(x + i);
    silu_lanes(v);
    *reinterpret_cast<VFu*>(y + i) = v;
  }
  if (i < n) {  // the tail through a full vector on the stack
    VF v{};
    for (size_t k = 0; i + k < n; ++k) v[k] = x[i + k];
    silu_lanes(v);
    for (size_t k = 0; i + k < n; ++k) y[i + k] = v[k];
  }
}

#if defined(__x86_64__) || defined(__i386__)
#define KILN_XNN_SILU_X86 1
__attribute__((target("avx512f"))) void silu_avx512(const float* x, float* y, size_t n) { silu_span(x, y, n); }
__attribute__((target("avx2,fma"))) void silu_avx2(const float* x, float* y, size_t n) { silu_span(x, y, n); }
#endif
void silu_baseline(const float* x, float* y, size_t n) { silu_span(x, y, n); }

}  // namespace

SiluKernel pick_silu() {
  SiluKernel k{silu_baseline, "baseline"};
#ifdef KILN_XNN_SILU_X86
  // The same cap as the plugin's other kernels (KILN_XNNPACK_ISA); "none"
  // leaves the portable C++ loop.
  const Isa isa = kernel_isa();
  if (isa == Isa::kAvx512) k = {silu_avx512, "avx512"};
  else if (isa == Isa::kAvx2) k = {silu_avx2, "avx2"};
#endif
  return k;
}

}  // namespace kiln_xnnpack
