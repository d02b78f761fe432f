#include "kernels/portable/cpu/x86/isa.h"

#include <cstdio>
#include <cstdlib>

namespace kiln::kernels::cpu {

namespace {

Isa detect_cpu_isa() {
#if defined(KILN_ISA_X86)
  // __builtin_cpu_supports also checks that the OS saves the AVX / AVX-512
  // registers (XGETBV).
  __builtin_cpu_init();
  bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
            __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
#if !defined(__clang__)  // clang 14 does not know these names (every AVX2 CPU has them)
  v3 = v3 && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("lzcnt") && __builtin_cpu_supports("movbe");
#endif
  if (!v3) return Isa::kBaseline;
  const bool v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                  __builtin_cpu_supports("avx512cd");
  return v4 ? Isa::kAvx512 : Isa::kAvx2;
#else
  return Isa::kBaseline;
#endif
}

Isa min_isa(Isa a, Isa b) { return static_cast<uint8_t>(a) < static_cast<uint8_t>(b) ? a : b; }

}  // namespace

Isa cpu_isa() {
  static const Isa isa = detect_cpu_isa();
  return isa;
}

bool parse_isa(const std::string& text, Isa* out) {
  if (text == "avx512") *out = Isa::kAvx512;
  else if (text == "avx2") *out = Isa::kAvx2;
  else if (text == "baseline" || text == "none") *out = Isa::kBaseline;
  else return false;
  return true;
}

Isa capped_isa(const char* env, Isa cpu, std::string* error) {
  error->clear();
  if (env == nullptr || *env == '\0') return cpu;
  Isa cap = cpu;
  if (!parse_isa(env, &cap)) {
    *error = std::string("KILN_CPU_ISA='") + env +
             "' is not an instruction set (avx512, avx2, baseline or none); the portable kernels use the CPU's (" +
             isa_name(cpu) + ")";
    return cpu;
  }
  return min_isa(cap, cpu);
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kBaseline: break;
  }
  return "baseline";
}

namespace detail {

Isa init_kernel_isa() {
  // Threads may race here on the first dispatch: each computes the same
  // value; only the one that publishes it reports a bad value.
  std::string error;
  const Isa isa = capped_isa(std::getenv("KILN_CPU_ISA"), cpu_isa(), &error);
  int8_t expected = -1;
  if (g_kernel_isa.compare_exchange_strong(expected, static_cast<int8_t>(isa), std::memory_order_relaxed)) {
    if (!error.empty()) std::fprintf(stderr, "kiln: %s\n", error.c_str());
    return isa;
  }
  return static_cast<Isa>(expected);
}

}  // namespace detail

Isa set_kernel_isa(Isa isa) {
  const Isa previous = kernel_isa();
  detail::g_kernel_isa.store(static_cast<int8_t>(min_isa(isa, cpu_isa())), std::memory_order_relaxed);
  return previous;
}

}  // namespace kiln::kernels::cpu
