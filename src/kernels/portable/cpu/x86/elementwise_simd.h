// float32 hot loops of the element-wise kernels, compiled for several x86-64
// levels (AVX-512, AVX2+FMA, baseline) and picked at run time by
// cpu::kernel_isa() (cpu/x86/isa.h).
//
// All loops read n contiguous floats and write n contiguous floats; output
// may equal an input (in-place). The transcendental ones use polynomial
// approximations (see elementwise_simd.cpp) accurate to a few ulp over the
// whole float range, with IEEE behaviour for NaN, +-inf and +-0.
#pragma once

#include <cstdint>

namespace kiln::kernels::simd {

enum class Arith : uint8_t { kAdd, kSub, kMul, kDiv };

/// o[i] = a[i*sa] (op) b[i*sb] for i < n; sa and sb are 0 (scalar) or 1.
void arith_f32(Arith op, const float* a, int64_t sa, const float* b, int64_t sb, float* o, int64_t n);

void relu_f32(const float* x, float* y, int64_t n);
void leaky_relu_f32(const float* x, float* y, int64_t n, float alpha);
/// y = min(max(x, lo), hi); NaN stays NaN.
void clip_f32(const float* x, float* y, int64_t n, float lo, float hi);
/// y = clamp(alpha * x + beta, 0, 1) (HardSigmoid); NaN stays NaN.
void hard_sigmoid_f32(const float* x, float* y, int64_t n, float alpha, float beta);
/// y = x * clamp(x / 6 + 1/2, 0, 1) (HardSwish); NaN stays NaN.
void hard_swish_f32(const float* x, float* y, int64_t n);
/// y = x * sigmoid(x) (SiLU / Swish, FusedConv's Silu), the Sigmoid kernel's
/// sigmoid; NaN stays NaN.
void silu_f32(const float* x, float* y, int64_t n);
void sqrt_f32(const float* x, float* y, int64_t n);
void square_f32(const float* x, float* y, int64_t n);
void exp_f32(const float* x, float* y, int64_t n);
void sigmoid_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);
void erf_f32(const float* x, float* y, int64_t n);
/// 0.5 x (1 + erf(x / sqrt 2)) (Gelu), one pass; in place allowed.
void gelu_f32(const float* x, float* y, int64_t n);
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (Gelu, approximate
/// "tanh"), one pass; in place allowed.
void gelu_tanh_f32(const float* x, float* y, int64_t n);
/// pow(x, 0.5) (sqrt, except +0 for -0 and +inf for -inf).
void pow_half_f32(const float* x, float* y, int64_t n);

/// float32 <-> IEEE half (bits), round to nearest even; F16C when present.
void f32_to_f16(const float* x, uint16_t* y, int64_t n);
void f16_to_f32(const uint16_t* x, float* y, int64_t n);
/// float32 <-> bfloat16 (bits), round to nearest even, NaN stays NaN.
void f32_to_bf16(const float* x, uint16_t* y, int64_t n);
void bf16_to_f32(const uint16_t* x, float* y, int64_t n);

}  // namespace kiln::kernels::simd
