// DType: element types of tensors. Values equal ONNX TensorProto.DataType, so
// conversion to and from ONNX is a cast.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/float16.h"

namespace kiln {

enum class DType : uint8_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  // Low-precision types of ONNX IR 9 to 12. In memory every element takes
  // one byte (the 4-bit and 2-bit ones in its low bits: int4/int2 sign-
  // extended); only TensorProto data packs them (2 or 4 per byte, the first
  // element in the lowest bits), as ONNX specifies.
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};
inline constexpr int kNumDTypes = 27;

/// Bytes per element; sizeof(std::string) for kString, 0 for kUndefined.
size_t dtype_size(DType t);
/// ONNX-style lower-case name: "float32", "int64", "bool", "string", ...
const char* dtype_name(DType t);
/// Parses a name from dtype_name (also "float", "double", "half"); kUndefined if unknown.
DType dtype_from_name(std::string_view name);

bool dtype_is_float(DType t);     ///< float16/bfloat16/float32/float64
bool dtype_is_integer(DType t);   ///< signed or unsigned integer (not bool)
bool dtype_is_signed(DType t);    ///< signed integer or float
/// float8 (4 kinds and E8M0), float4, int4/uint4, int2/uint2.
bool dtype_is_low_precision(DType t);
/// Bits of one element in packed TensorProto storage: 4 for int4/uint4/
/// float4e2m1, 2 for int2/uint2, else 8 * dtype_size (0 for strings).
int dtype_packed_bits(DType t);

/// A set of dtypes as a bit mask (bit i = DType value i).
using DTypeSet = uint32_t;
constexpr DTypeSet dtype_bit(DType t) { return DTypeSet{1} << static_cast<int>(t); }
template <class... T>
constexpr DTypeSet dtype_set(T... t) { return (dtype_bit(t) | ... | 0u); }
/// Every dtype (bits 1 to kNumDTypes - 1).
inline constexpr DTypeSet kAllDTypes = 0x7fffffeu;
/// The types Kiln had before the low-precision ones (bits 1 to 16).
inline constexpr DTypeSet kClassicDTypes = 0x1fffeu;
inline constexpr DTypeSet kLowPrecisionDTypes = kAllDTypes & ~kClassicDTypes;
inline constexpr DTypeSet kFloatDTypes =
    dtype_set(DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16);
inline constexpr DTypeSet kIntDTypes =
    dtype_set(DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kUInt8,
              DType::kUInt16, DType::kUInt32, DType::kUInt64);
inline constexpr DTypeSet kNumericDTypes = kFloatDTypes | kIntDTypes;

/// Maps a C++ element type to its DType at compile time.
template <class T> struct DTypeOf;
#define KILN_DTYPE_OF_(T, D) \
  template <> struct DTypeOf<T> { static constexpr DType value = DType::D; }
KILN_DTYPE_OF_(float, kFloat32);
KILN_DTYPE_OF_(double, kFloat64);
KILN_DTYPE_OF_(Float16, kFloat16);
KILN_DTYPE_OF_(BFloat16, kBFloat16);
KILN_DTYPE_OF_(int8_t, kInt8);
KILN_DTYPE_OF_(int16_t, kInt16);
KILN_DTYPE_OF_(int32_t, kInt32);
KILN_DTYPE_OF_(int64_t, kInt64);
KILN_DTYPE_OF_(uint8_t, kUInt8);
KILN_DTYPE_OF_(uint16_t, kUInt16);
KILN_DTYPE_OF_(uint32_t, kUInt32);
KILN_DTYPE_OF_(uint64_t, kUInt64);
KILN_DTYPE_OF_(bool, kBool);
KILN_DTYPE_OF_(std::string, kString);
KILN_DTYPE_OF_(std::complex<float>, kComplex64);
KILN_DTYPE_OF_(std::complex<double>, kComplex128);
#undef KILN_DTYPE_OF_
template <class T> inline constexpr DType dtype_of = DTypeOf<T>::value;

/// Calls `f(T{})` with the C++ type of `t` and returns its result. Types not
/// in the switch (kUndefined) call `f(Unsupported{})`. `f` must accept every
/// type; use `if constexpr` to reject some.
struct UnsupportedDType {};
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kFloat16: return f(Float16{});
    case DType::kBFloat16: return f(BFloat16{});
    case DType::kInt8: return f(int8_t{});
    case DType::kInt16: return f(int16_t{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kUInt8: return f(uint8_t{});
    case DType::kUInt16: return f(uint16_t{});
    case DType::kUInt32: return f(uint32_t{});
    case DType::kUInt64: return f(uint64_t{});
    case DType::kBool: return f(bool{});
    case DType::kString: return f(std::string{});
    case DType::kComplex64: return f(std::complex<float>{});
    case DType::kComplex128: return f(std::complex<double>{});
    default: return f(UnsupportedDType{});
  }
}

}  // namespace kiln
