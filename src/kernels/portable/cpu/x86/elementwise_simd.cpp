// float32 hot loops, one variant per x86-64 level (cpu/x86/isa.h picks one
// by kernel_isa()). The loops are plain scalar C++ without branches in the
// body, which GCC vectorizes for each target.
//
// Approximations (coefficients fitted near-minimax in extended precision):
// - exp: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, degree-6
//   polynomial (Cephes expf), scale by 2^n in two steps so subnormal
//   results and overflow to inf come out right. ~1 ulp.
// - tanh: |x| < 0.625: x + x^3 P(x^2) (rel. error 4e-9); else
//   1 - 2 / (exp(2|x|) + 1), sign restored. |x| > 9.1 gives +-1.
// - erf: |x| < 0.9: x P(x^2) (rel. error 1.2e-8); else 1 - exp(Q(|x|))
//   with Q ~ log(erfc) on [0.9, 3.95] (abs. error 9e-9); beyond, +-1.
#include "kernels/portable/cpu/x86/elementwise_simd.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/portable/cpu/x86/isa.h"
#include "kiln/float16.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KILN_SIMD_X86 1
#include <immintrin.h>
// FMA contraction, and selects the vectorizer may if-convert (no FP traps),
// for every function below (the ISA variants included).
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif

namespace kiln::kernels::simd {
namespace {

[[gnu::always_inline]] inline float round_nearest(float t) {
  // Adding and subtracting 1.5 * 2^23 rounds |t| < 2^22 to an integer in
  // the current (nearest-even) mode; vectorizes without SSE4.1 roundps.
  constexpr float kMagic = 12582912.0f;
  return (t + kMagic) - kMagic;
}

[[gnu::always_inline]] inline float pow2i(int32_t e) { return __builtin_bit_cast(float, static_cast<int32_t>((e + 127) << 23)); }

// e^x for every float x. NaN flows through the arithmetic (clamps compare
// false on NaN); only the integer exponent is sanitized.
[[gnu::always_inline]] inline float exp_full(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const float n = round_nearest(xc * 1.44269504088896341f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n == n ? n : 0.0f);
  const int32_t n1 = ni >> 1;  // two factors, each a normal power of two
  return p * pow2i(n1) * pow2i(ni - n1);
}

[[gnu::always_inline]] inline float tanh_one(float x) {
  const float ax = __builtin_fabsf(x);
  // Small: odd polynomial.
  const float x2 = x * x;
  float p = -0.005704786585632287f;
  p = p * x2 + 0.020638919338448233f;
  p = p * x2 + -0.053739667294395194f;
  p = p * x2 + 0.1333144167115317f;
  p = p * x2 + -0.33333281924270397f;
  const float small = __builtin_copysignf(x + x * x2 * p, x);  // keeps -0
  // Large: through exp (NaN stays NaN through it).
  const float ac = ax > 9.1f ? 9.1f : ax;
  const float e = exp_full(2.0f * ac);
  const float big = __builtin_copysignf(1.0f - 2.0f / (e + 1.0f), x);
  return ax < 0.625f ? small : big;
}

[[gnu::always_inline]] inline float erf_one(float x) {
  const float ax = __builtin_fabsf(x);
  const float x2 = x * x;
  float p = -0.0006111135176192564f;
  p = p * x2 + 0.005016201001891901f;
  p = p * x2 + -0.02678194059061864f;
  p = p * x2 + 0.11282229578005037f;
  p = p * x2 + -0.37612532415596434f;
  p = p * x2 + 1.1283791553164912f;
  const float small = x * p;
  const float t = (ax > 3.95f ? 3.95f : ax) - 2.4f;
  float q = -7.434292736974157e-09f;
  q = q * t + 1.6268420632847835e-06f;
  q = q * t + -1.4551076880531255e-05f;
  q = q * t + 8.710640496079058e-05f;
  q = q * t + -0.0004695733878586905f;
  q = q * t + 0.002387395546697313f;
  q = q * t + -0.011768107579037512f;
  q = q * t + -0.9405018875939168f;
  q = q * t + -5.164236601275465f;
  q = q * t + -7.280975063968276f;
  // Past 3.95 erfc(x) < half an ulp of 1: the result is exactly +-1.
  const float big = __builtin_copysignf(ax > 3.95f ? 1.0f : 1.0f - exp_full(q), x);
  return ax < 0.9f ? small : big;
}

KILN_ISA_BODY void add_vv_body(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}
KILN_ISA_DISPATCH(add_vv, add_vv_body);
KILN_ISA_BODY void add_vs_body(const float* a, float b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b;
}
KILN_ISA_DISPATCH(add_vs, add_vs_body);
KILN_ISA_BODY void sub_vv_body(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] - b[i];
}
KILN_ISA_DISPATCH(sub_vv, sub_vv_body);
KILN_ISA_BODY void sub_vs_body(const float* a, float b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] - b;
}
KILN_ISA_DISPATCH(sub_vs, sub_vs_body);
KILN_ISA_BODY void sub_sv_body(float a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a - b[i];
}
KILN_ISA_DISPATCH(sub_sv, sub_sv_body);
KILN_ISA_BODY void mul_vv_body(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] * b[i];
}
KILN_ISA_DISPATCH(mul_vv, mul_vv_body);
KILN_ISA_BODY void mul_vs_body(const float* a, float b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] * b;
}
KILN_ISA_DISPATCH(mul_vs, mul_vs_body);
KILN_ISA_BODY void div_vv_body(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] / b[i];
}
KILN_ISA_DISPATCH(div_vv, div_vv_body);
KILN_ISA_BODY void div_vs_body(const float* a, float b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] / b;
}
KILN_ISA_DISPATCH(div_vs, div_vs_body);
KILN_ISA_BODY void div_sv_body(float a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a / b[i];
}
KILN_ISA_DISPATCH(div_sv, div_sv_body);

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

KILN_ISA_BODY void relu_f32_body(const float* x, float* y, int64_t n) {
  // x < 0 ? 0 : x keeps NaN (max(x, 0) would too, but spelled this way the
  // compiler needs no NaN-order guarantee to vectorize it).
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}
KILN_ISA_DISPATCH(relu_f32_isa, relu_f32_body);
void relu_f32(const float* x, float* y, int64_t n) { relu_f32_isa(x, y, n); }

KILN_ISA_BODY void leaky_relu_f32_body(const float* x, float* y, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? x[i] * alpha : x[i];
}
KILN_ISA_DISPATCH(leaky_relu_f32_isa, leaky_relu_f32_body);
void leaky_relu_f32(const float* x, float* y, int64_t n, float alpha) { leaky_relu_f32_isa(x, y, n, alpha); }

KILN_ISA_BODY void clip_f32_body(const float* x, float* y, int64_t n, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] < lo ? lo : x[i];
    y[i] = v > hi ? hi : v;
  }
}
KILN_ISA_DISPATCH(clip_f32_isa, clip_f32_body);
void clip_f32(const float* x, float* y, int64_t n, float lo, float hi) { clip_f32_isa(x, y, n, lo, hi); }

KILN_ISA_BODY void hard_sigmoid_f32_body(const float* x, float* y, int64_t n, float alpha, float beta) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = alpha * x[i] + beta;
    y[i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
  }
}
KILN_ISA_DISPATCH(hard_sigmoid_f32_isa, hard_sigmoid_f32_body);
void hard_sigmoid_f32(const float* x, float* y, int64_t n, float alpha, float beta) { hard_sigmoid_f32_isa(x, y, n, alpha, beta); }

KILN_ISA_BODY void hard_swish_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * (1.0f / 6.0f) + 0.5f;
    y[i] = x[i] * (v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v));
  }
}
KILN_ISA_DISPATCH(hard_swish_f32_isa, hard_swish_f32_body);
void hard_swish_f32(const float* x, float* y, int64_t n) { hard_swish_f32_isa(x, y, n); }

namespace {
KILN_ISA_BODY void fix_pow_half_body(const float* x, float* y, int64_t n) {
  // sqrt(-0) = -0 and sqrt(-inf) = NaN, but pow(x, 0.5) gives +0 and +inf.
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] == -__builtin_inff() ? __builtin_inff() : y[i] + 0.0f;
}
KILN_ISA_DISPATCH(fix_pow_half, fix_pow_half_body);
}  // namespace

// sqrt: GCC keeps the errno path of sqrtf in loops (and ignores
// no-math-errno per function), so the vector loops are spelled with
// intrinsics and picked by kernel_isa() (AVX, at the AVX2 level: the
// divider, not the vector width, bounds sqrt throughput).
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
}  // namespace

void sqrt_f32(const float* x, float* y, int64_t n) {
  if (cpu::kernel_isa() >= cpu::Isa::kAvx2) return sqrt_avx(x, y, n);
  sqrt_sse(x, y, n);
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

KILN_ISA_BODY void square_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
}
KILN_ISA_DISPATCH(square_f32_isa, square_f32_body);
void square_f32(const float* x, float* y, int64_t n) { square_f32_isa(x, y, n); }

KILN_ISA_BODY void exp_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_full(x[i]);
}
KILN_ISA_DISPATCH(exp_f32_isa, exp_f32_body);
void exp_f32(const float* x, float* y, int64_t n) { exp_f32_isa(x, y, n); }

KILN_ISA_BODY void sigmoid_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + exp_full(-x[i]));
}
KILN_ISA_DISPATCH(sigmoid_f32_isa, sigmoid_f32_body);
void sigmoid_f32(const float* x, float* y, int64_t n) { sigmoid_f32_isa(x, y, n); }

KILN_ISA_BODY void tanh_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_one(x[i]);
}
KILN_ISA_DISPATCH(tanh_f32_isa, tanh_f32_body);
void tanh_f32(const float* x, float* y, int64_t n) { tanh_f32_isa(x, y, n); }

KILN_ISA_BODY void erf_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = erf_one(x[i]);
}
KILN_ISA_DISPATCH(erf_f32_isa, erf_f32_body);
void erf_f32(const float* x, float* y, int64_t n) { erf_f32_isa(x, y, n); }

KILN_ISA_BODY void gelu_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erf_one(v * 0.70710678118654752f));
  }
}
KILN_ISA_DISPATCH(gelu_f32_isa, gelu_f32_body);
void gelu_f32(const float* x, float* y, int64_t n) { gelu_f32_isa(x, y, n); }

KILN_ISA_BODY void gelu_tanh_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanh_one(0.79788456080286536f * (v + 0.044715f * v * v * v)));
  }
}
KILN_ISA_DISPATCH(gelu_tanh_f32_isa, gelu_tanh_f32_body);
void gelu_tanh_f32(const float* x, float* y, int64_t n) { gelu_tanh_f32_isa(x, y, n); }

KILN_ISA_BODY void f32_to_bf16_body(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, &x[i], 4);
    const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    const uint32_t nan = (b >> 16) | 0x40u;
    y[i] = static_cast<uint16_t>((b & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}
KILN_ISA_DISPATCH(f32_to_bf16_isa, f32_to_bf16_body);
void f32_to_bf16(const float* x, uint16_t* y, int64_t n) { f32_to_bf16_isa(x, y, n); }

KILN_ISA_BODY void bf16_to_f32_body(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = static_cast<uint32_t>(x[i]) << 16;
    std::memcpy(&y[i], &b, 4);
  }
}
KILN_ISA_DISPATCH(bf16_to_f32_isa, bf16_to_f32_body);
void bf16_to_f32(const uint16_t* x, float* y, int64_t n) { bf16_to_f32_isa(x, y, n); }

// Half conversions: F16C's vcvtps2ph / vcvtph2ps at the AVX2 level and
// above (it includes F16C), the bit-exact scalar code elsewhere. Both round
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
#endif
}  // namespace

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
#if defined(KILN_SIMD_X86)
  if (cpu::kernel_isa() >= cpu::Isa::kAvx2) return f32_to_f16_f16c(x, y, n);
#endif
  f32_to_f16_scalar(x, y, n);
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
#if defined(KILN_SIMD_X86)
  if (cpu::kernel_isa() >= cpu::Isa::kAvx2) return f16_to_f32_f16c(x, y, n);
#endif
  f16_to_f32_scalar(x, y, n);
}

}  // namespace kiln::kernels::simd
