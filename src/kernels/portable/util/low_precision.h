// Element conversions for ONNX's low-precision types (float8 E4M3FN,
// E4M3FNUZ, E5M2, E5M2FNUZ, E8M0; float4 E2M1; int4/uint4; int2/uint2),
// one byte per element in memory (see kiln/dtype.h), and Cast between them
// and the other numeric types.
#pragma once

#include <cstdint>

#include "kernels/kernel.h"

namespace kiln::kernels {

/// The value of one element of low-precision type `t` (NaN for NaN codes).
double lp_decode(DType t, uint8_t code);

/// `x` as low-precision type `t`: floats round to nearest even; out of range
/// values saturate to the largest finite value when `saturate` (ONNX's Cast
/// default), else become inf (E5M2) or NaN; NaN maps to the type's NaN.
/// Integers truncate toward zero and wrap (keep the low 4 or 2 bits), as
/// ONNX's Cast does; int4/int2 come back sign-extended.
uint8_t lp_encode(DType t, double x, bool saturate);

/// Clamping conversion for QuantizeLinear: rounds half to even and clamps
/// integers to the type's range; floats as lp_encode with saturation.
uint8_t lp_quantize(DType t, double x);

/// Cast of `x` to `to` where either dtype is low precision; output 0 is
/// allocated with x's shape.
Status cast_low_precision(KernelContext& ctx, const Tensor& x, DType to, bool saturate);

}  // namespace kiln::kernels
