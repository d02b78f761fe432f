// float32 hot loops, one variant per x86-64 level (cpu/x86/isa.h picks one
// by kernel_isa()). The loops are plain scalar C++ without branches in the
// body, which GCC vectorizes for each target. The exp, tanh, erf and
// sigmoid approximations they use are in simd_math.h.
#include "kernels/portable/cpu/x86/elementwise_simd.h"

#include <cmath>
#include <cstring>

#include "kernels/portable/cpu/x86/isa.h"
#include "kernels/portable/cpu/x86/simd_math.h"
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

KILN_ISA_BODY void silu_f32_body(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid_one(x[i]);
}
KILN_ISA_DISPATCH(silu_f32_isa, silu_f32_body);
void silu_f32(const float* x, float* y, int64_t n) { silu_f32_isa(x, y, n); }

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
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid_one(x[i]);
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
