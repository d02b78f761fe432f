// Scalar float32 exp, tanh, erf and sigmoid written so that GCC vectorizes a
// loop of them for each ISA level of a KILN_ISA_DISPATCH body (isa.h): selects the
// vectorizer may if-convert (no FP traps), no calls, no libm. Shared by the
// element-wise kernels (elementwise_simd.cpp), Softmax (softmax.cpp)
// and the LSTM cell (rnn_lstm_sliced.cpp), so all compute the same bits.
//
// Approximations (coefficients fitted near-minimax in extended precision):
// - exp: Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, degree-6
//   polynomial (Cephes expf), scale by 2^n in two steps so subnormal
//   results and overflow to inf come out right. ~1 ulp.
// - tanh: |x| < 0.625: x + x^3 P(x^2) (rel. error 4e-9); else
//   1 - 2 / (exp(2|x|) + 1), sign restored. |x| > 9.1 gives +-1.
// - erf: |x| < 0.9: x P(x^2) (rel. error 1.2e-8); else 1 - exp(Q(|x|))
//   with Q ~ log(erfc) on [0.9, 3.95] (abs. error 9e-9); beyond, +-1.
// NaN stays NaN in all of them.
//
// The functions are compiled here with FMA contraction and without FP
// traps, the options their callers' vectorized loops use: GCC inlines an
// always_inline function only into a caller with the same FP-contraction
// mode, so an including file sets the same options around its loops
// (`#pragma GCC optimize("fp-contract=fast", "no-trapping-math")`).
// __builtin_bit_cast, not std::bit_cast: std::bit_cast is compiled outside
// these options, is then not inlined, and the call stops the vectorizer.
#pragma once

#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KILN_SIMD_MATH_PRAGMAS 1
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif

namespace kiln::kernels::simd {

/// Rounds |t| < 2^22 to an integer in the current (nearest-even) mode:
/// adding and subtracting 1.5 * 2^23 vectorizes without SSE4.1 roundps.
[[gnu::always_inline]] inline float round_nearest(float t) {
  constexpr float kMagic = 12582912.0f;
  return (t + kMagic) - kMagic;
}

/// 2^e for a normal exponent e (-126..127).
[[gnu::always_inline]] inline float pow2i(int32_t e) {
  return __builtin_bit_cast(float, static_cast<int32_t>((e + 127) << 23));
}

/// e^(x - n ln2) for n = round(x / ln2) given as a float: the Cody-Waite
/// reduction (ln2 split in two, so x - n ln2 is exact) and the degree-6
/// polynomial on the reduced argument, |r| <= ln2/2. The caller scales by 2^n.
[[gnu::always_inline]] inline float exp_reduced(float x, float n) {
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

/// e^x for every float x. NaN flows through the arithmetic (clamps compare
/// false on NaN); only the integer exponent is sanitized.
[[gnu::always_inline]] inline float exp_full(float x) {
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const float n = round_nearest(xc * 1.44269504088896341f);
  const float p = exp_reduced(xc, n);
  const int32_t ni = static_cast<int32_t>(n == n ? n : 0.0f);
  const int32_t n1 = ni >> 1;  // two factors, each a normal power of two
  return p * pow2i(n1) * pow2i(ni - n1);
}

/// e^x for x <= 0 (softmax arguments after subtracting the row max), cheaper
/// than exp_full: x is clamped below at -87.34 on its bit pattern (an unsigned
/// min on the bits orders negative floats by magnitude), so the result never
/// goes subnormal and 2^n is one exponent field. NaN stays NaN.
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  const uint32_t bits = __builtin_bit_cast(uint32_t, x);
  x = __builtin_bit_cast(float, bits < 0xC2AEAC50u ? bits : 0xC2AEAC50u);  // -87.33654
  const float kShift = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
  float fn = x * 1.44269504088896341f + kShift;
  const int32_t n = static_cast<int32_t>(__builtin_bit_cast(uint32_t, fn) - __builtin_bit_cast(uint32_t, kShift));
  fn -= kShift;
  return exp_reduced(x, fn) * __builtin_bit_cast(float, static_cast<uint32_t>(n + 127) << 23);
}

/// 1 / (1 + e^-x).
[[gnu::always_inline]] inline float sigmoid_one(float x) { return 1.0f / (1.0f + exp_full(-x)); }

/// tanh(x); keeps the sign of zero.
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

/// erf(x).
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

}  // namespace kiln::kernels::simd

#if defined(KILN_SIMD_MATH_PRAGMAS)
#undef KILN_SIMD_MATH_PRAGMAS
#pragma GCC pop_options
#endif
