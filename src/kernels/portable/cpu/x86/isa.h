// The instruction-set level of the portable kernels' SIMD code: the one
// place that reads the CPU's features (every run-time dispatch of the
// portable kernels goes through kernel_isa()), and the one way to compile a
// hot loop once per level and pick the variant at run time
// (KILN_ISA_BODY / KILN_ISA_DISPATCH below).
//
// $KILN_CPU_ISA caps the level, so the AVX2 and baseline paths are tested
// and measured on an AVX-512 machine too: "avx512", "avx2", "baseline" (or
// "none", its synonym, as $KILN_XNNPACK_ISA spells it); empty or unset means
// no cap. A cap above what the CPU runs gives the CPU's level. Any other value
// is reported once on stderr, naming it, and the CPU's own level is used
// (the kernels have no error path at dispatch; `kiln bench` and the tests
// print the level in effect). Read once, at the first dispatch.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace kiln::kernels::cpu {

enum class Isa : uint8_t {
  kBaseline = 0,  // x86-64 (SSE2), and every other architecture
  kAvx2 = 1,      // x86-64-v3: AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE
  kAvx512 = 2,    // x86-64-v4: x86-64-v3 + AVX-512 F, BW, DQ, VL, CD
};

/// The widest level this CPU and OS run (cached).
Isa cpu_isa();

/// Parses a $KILN_CPU_ISA value ("avx512", "avx2", "baseline", "none");
/// false for anything else.
bool parse_isa(const std::string& text, Isa* out);

/// The level for a $KILN_CPU_ISA value `env` (null or empty: no cap) on a
/// CPU that runs `cpu`; an unknown value gives `cpu` and sets *error to a
/// message naming it (else *error is cleared).
Isa capped_isa(const char* env, Isa cpu, std::string* error);

/// "avx512", "avx2" or "baseline".
const char* isa_name(Isa isa);

/// For tests and benchmarks in one process: sets the level of the
/// multiversioned loops (capped at cpu_isa()) and returns the previous one.
/// The SGEMM microkernel is picked once per process (sgemm_force_kernel
/// switches it); packed weights record the microkernel they were packed for.
Isa set_kernel_isa(Isa isa);

namespace detail {
// -1 until the first kernel_isa(); then the level.
inline std::atomic<int8_t> g_kernel_isa{-1};
Isa init_kernel_isa();
[[gnu::always_inline]] inline Isa fast_kernel_isa() {
  const int8_t v = g_kernel_isa.load(std::memory_order_relaxed);
  return v >= 0 ? static_cast<Isa>(v) : init_kernel_isa();
}
}  // namespace detail

/// The level the portable kernels use: cpu_isa() capped by $KILN_CPU_ISA
/// (read at the first call), or what set_kernel_isa() last set.
inline Isa kernel_isa() { return detail::fast_kernel_isa(); }

}  // namespace kiln::kernels::cpu

// KILN_ISA_BODY marks a loop written once (plain C++ the compiler
// vectorizes); KILN_ISA_DISPATCH(name, body) makes `name` a function pointer
// constant (same signature) that runs body compiled for AVX-512, for AVX2 or
// for the baseline, by kernel_isa(). The body is inlined into each variant,
// so the loop and its inline helpers are vectorized for that level:
//
//   KILN_ISA_BODY void scale_body(const float* x, int64_t n, float* y) {...}
//   KILN_ISA_DISPATCH(scale, scale_body);   // scale(x, n, y)
//
// The variants are GCC/clang target attributes (no arch= change, so inline
// helpers still inline), defined by the macro where it stands, so a file's
// `#pragma GCC optimize` applies to them too. Elsewhere (other compilers or
// architectures) the name calls the body. A call costs one relaxed load and
// a switch on top of a direct call (no PLT / ifunc indirection).
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define KILN_ISA_X86 1
#define KILN_ISA_TARGET_AVX2 "avx2,fma,f16c,bmi,bmi2,lzcnt,movbe,popcnt"
#define KILN_ISA_TARGET_AVX512 KILN_ISA_TARGET_AVX2 ",avx512f,avx512bw,avx512dq,avx512vl,avx512cd"
#endif

namespace kiln::kernels::cpu::detail {

// The dispatcher of one body: `V` holds its variants (defined where the body
// is, so they carry that file's optimize pragmas).
template <auto Body, class V>
struct IsaDispatch;

template <class R, class... A, R (*Body)(A...), class V>
struct IsaDispatch<Body, V> {
  __attribute__((always_inline)) static R call(A... a) {
#if defined(KILN_ISA_X86)
    switch (fast_kernel_isa()) {
      case Isa::kAvx512: return V::avx512(static_cast<A>(a)...);
      case Isa::kAvx2: return V::avx2(static_cast<A>(a)...);
      case Isa::kBaseline: break;
    }
#endif
    return V::baseline(static_cast<A>(a)...);
  }
};

}  // namespace kiln::kernels::cpu::detail

#define KILN_ISA_VARIANT(isa, attr, body) \
  template <class... A>                  \
  attr static decltype(auto) isa(A&&... a) { return body(static_cast<A&&>(a)...); }
#if defined(KILN_ISA_X86)
#define KILN_ISA_VARIANTS(body, attr)                                                    \
  KILN_ISA_VARIANT(avx512, __attribute__((target(KILN_ISA_TARGET_AVX512))) attr, body) \
  KILN_ISA_VARIANT(avx2, __attribute__((target(KILN_ISA_TARGET_AVX2))) attr, body)     \
  KILN_ISA_VARIANT(baseline, attr, body)
#else
#define KILN_ISA_VARIANTS(body, attr) KILN_ISA_VARIANT(baseline, attr, body)
#endif

#define KILN_ISA_BODY __attribute__((always_inline)) inline
#define KILN_ISA_DISPATCH_ATTR(name, body, attr) \
  struct name##_isa_variants {                   \
    KILN_ISA_VARIANTS(body, attr)                \
  };                                             \
  constexpr auto name = &::kiln::kernels::cpu::detail::IsaDispatch<&body, name##_isa_variants>::call
#define KILN_ISA_DISPATCH(name, body) KILN_ISA_DISPATCH_ATTR(name, body, )
/// The same with every call in the body inlined into each variant (GCC's
/// flatten): for a body that calls a large template, which otherwise stays
/// one out-of-line baseline function. The body is then a plain function, not
/// KILN_ISA_BODY (GCC 12 does not flatten through an always_inline body).
#define KILN_ISA_DISPATCH_FLATTEN(name, body) KILN_ISA_DISPATCH_ATTR(name, body, __attribute__((flatten)))
