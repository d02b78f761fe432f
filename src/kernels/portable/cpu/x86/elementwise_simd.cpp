// float32 hot loops, one clone per x86-64 level (target_clones picks one at
// load through an ifunc). The loops are plain scalar C++ without branches in
// the body, which GCC vectorizes for each target. The exp, tanh, erf and
// sigmoid approximations they use are in simd_math.h.
#include "kernels/portable/cpu/x86/elementwise_simd.h"

#include <cmath>
#include <cstring>

#include "kernels/portable/cpu/x86/simd_math.h"
#include "kiln/float16.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KILN_SIMD_X86 1
#include <immintrin.h>
// FMA contraction, and selects the vectorizer may if-convert (no FP traps),
// for every function below (helpers
// included, so they still inline into the clones).
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#define KILN_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KILN_SIMD_CLONES
#endif

namespace kiln::kernels::simd {
namespace {

KILN_SIMD_CLONES void add_vv(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}
KILN_SIMD_CLONES void add_vs(const float* a, float b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b;
}
KILN_SIMD_CLONES void sub_vv(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] - b[i];
}
KILN_SIMD_CLONES void sub_vs(const float* a, float b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] - b;
}
KILN_SIMD_CLONES void sub_sv(float a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a - b[i];
}
KILN_SIMD_CLONES void mul_vv(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] * b[i];
}
KILN_SIMD_CLONES void mul_vs(const float* a, float b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] * b;
}
KILN_SIMD_CLONES void div_vv(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] / b[i];
}
KILN_SIMD_CLONES void div_vs(const float* a, float b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] / b;
}
KILN_SIMD_CLONES void div_sv(float a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a / b[i];
}

}  // namespace

void arith_f32(Arith op, const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n) {
  if (sa == 0 && sb == 0) {
    float v = 0;
    switch (op) {
      case Arith::kAdd: v = a[0] + b[0]; break;
      case Arith::kSub: v = a[0] - b[0]; break;
      case Arith::kMul: v = a[0] * b[0]; break;
      case Arith::kDiv: v = a[0] / b[0]; break;
    }
    for (int64_t i = 0; i < n; ++i) o[i] = v;
    return;
  }
  const int mode = sa && sb ? 0 : (sa ? 1 : 2);  // vv, vs, sv
  switch (op) {
    case Arith::kAdd:
      if (mode == 0) return add_vv(a, b, o, n);
      return mode == 1 ? add_vs(a, b[0], o, n) : add_vs(b, a[0], o, n);
    case Arith::kSub:
      if (mode == 0) return sub_vv(a, b, o, n);
      return mode == 1 ? sub_vs(a, b[0], o, n) : sub_sv(a[0], b, o, n);
    case Arith::kMul:
      if (mode == 0) return mul_vv(a, b, o, n);
      return mode == 1 ? mul_vs(a, b[0], o, n) : mul_vs(b, a[0], o, n);
    case Arith::kDiv:
      if (mode == 0) return div_vv(a, b, o, n);
      return mode == 1 ? div_vs(a, b[0], o, n) : div_sv(a[0], b, o, n);
  }
}

KILN_SIMD_CLONES void relu_f32(const float* x, float* y, int64_t n) {
  // x < 0 ? 0 : x keeps NaN (max(x, 0) would too, but spelled this way the
  // compiler needs no NaN-order guarantee to vectorize it).
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

KILN_SIMD_CLONES void leaky_relu_f32(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? x[i] * alpha : x[i];
}

KILN_SIMD_CLONES void clip_f32(const float* x, float* y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] < lo ? lo : x[i];
    y[i] = v > hi ? hi : v;
  }
}

KILN_SIMD_CLONES void hard_sigmoid_f32(const float* x, float* y, int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = alpha * x[i] + beta;
    y[i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
  }
}

KILN_SIMD_CLONES void hard_swish_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * (1.0f / 6.0f) + 0.5f;
    y[i] = x[i] * (v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v));
  }
}

namespace {
KILN_SIMD_CLONES void fix_pow_half(const float* x, float* y, int64_t n) {
  // sqrt(-0) = -0 and sqrt(-inf) = NaN, but pow(x, 0.5) gives +0 and +inf.
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] == -__builtin_inff() ? __builtin_inff() : y[i] + 0.0f;
}
}  // namespace

// sqrt: GCC keeps the errno path of sqrtf in loops (and ignores
// no-math-errno per function), so the vector loops are spelled with
// intrinsics and picked once by CPU feature (AVX: the divider, not the
// vector width, bounds sqrt throughput).
#if defined(KILN_SIMD_X86)
namespace {
__attribute__((target("avx"))) void sqrt_avx(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = __builtin_sqrtf(x[i]);
}
void sqrt_sse(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = __builtin_sqrtf(x[i]);
}
using SqrtFn = void (*)(const float*, float*, int64_t);
SqrtFn pick_sqrt() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx")) return sqrt_avx;
  return sqrt_sse;
}
}  // namespace

void sqrt_f32(const float* x, float* y, int64_t n) {
  static const SqrtFn fn = pick_sqrt();
  fn(x, y, n);
}
#else
void sqrt_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = __builtin_sqrtf(x[i]);
}
#endif

void pow_half_f32(const float* x, float* y, int64_t n) {
  sqrt_f32(x, y, n);
  fix_pow_half(x, y, n);
}

KILN_SIMD_CLONES void square_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
}

KILN_SIMD_CLONES void exp_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_full(x[i]);
}

KILN_SIMD_CLONES void sigmoid_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid_one(x[i]);
}

KILN_SIMD_CLONES void tanh_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_one(x[i]);
}

KILN_SIMD_CLONES void erf_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = erf_one(x[i]);
}

KILN_SIMD_CLONES void gelu_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erf_one(v * 0.70710678118654752f));
  }
}

KILN_SIMD_CLONES void gelu_tanh_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanh_one(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
}

KILN_SIMD_CLONES void f32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    const uint32_t nan = (b >> 16) | 0x40u;
    y[i] = static_cast<uint16_t>((b & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

KILN_SIMD_CLONES void bf16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(&y[i], &b, 4);
  }
}

// Half conversions: F16C's vcvtps2ph / vcvtph2ps where the CPU has them,
// the bit-exact scalar code elsewhere; picked once per process. Both round
// to nearest even and keep NaNs NaN.
namespace {
void f32_to_f16_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Float16::from_float(x[i]);
}
void f16_to_f32_scalar(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Float16::to_float(x[i]);
}
#if defined(KILN_SIMD_X86)
__attribute__((target("avx2,f16c"))) void f32_to_f16_f16c(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  f32_to_f16_scalar(x + i, y + i, n - i);
}
__attribute__((target("avx2,f16c"))) void f16_to_f32_f16c(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  f16_to_f32_scalar(x + i, y + i, n - i);
}
bool has_f16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
#endif
}  // namespace

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
#if defined(KILN_SIMD_X86)
  static const bool f16c = has_f16c();
  if (f16c) return f32_to_f16_f16c(x, y, n);
#endif
  f32_to_f16_scalar(x, y, n);
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
#if defined(KILN_SIMD_X86)
  static const bool f16c = has_f16c();
  if (f16c) return f16_to_f32_f16c(x, y, n);
#endif
  f16_to_f32_scalar(x, y, n);
}

}  // namespace kiln::kernels::simd
