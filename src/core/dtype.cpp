#include "kiln/dtype.h"

namespace kiln {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kUndefined: return 0;
    case DType::kFloat32: return 4;
    case DType::kUInt8: return 1;
    case DType::kInt8: return 1;
    case DType::kUInt16: return 2;
    case DType::kInt16: return 2;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kString: return sizeof(std::string);
    case DType::kBool: return 1;
    case DType::kFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kUInt32: return 4;
    case DType::kUInt64: return 8;
    case DType::kComplex64: return 8;
    case DType::kComplex128: return 16;
    case DType::kBFloat16: return 2;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kUInt4:
    case DType::kInt4:
    case DType::kFloat4E2M1:
    case DType::kFloat8E8M0:
    case DType::kUInt2:
    case DType::kInt2: return 1;  // one byte per element in memory
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kUndefined: return "undefined";
    case DType::kFloat32: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kComplex64: return "complex64";
    case DType::kComplex128: return "complex128";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat8E4M3FN: return "float8e4m3fn";
    case DType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::kFloat8E5M2: return "float8e5m2";
    case DType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::kUInt4: return "uint4";
    case DType::kInt4: return "int4";
    case DType::kFloat4E2M1: return "float4e2m1";
    case DType::kFloat8E8M0: return "float8e8m0";
    case DType::kUInt2: return "uint2";
    case DType::kInt2: return "int2";
  }
  return "invalid";
}

DType dtype_from_name(std::string_view name) {
  if (name == "float") return DType::kFloat32;
  if (name == "double") return DType::kFloat64;
  if (name == "half") return DType::kFloat16;
  for (int i = 1; i < kNumDTypes; ++i) {
    if (name == dtype_name(static_cast<DType>(i))) return static_cast<DType>(i);
  }
  return DType::kUndefined;
}

bool dtype_is_float(DType t) { return (kFloatDTypes & dtype_bit(t)) != 0; }
bool dtype_is_integer(DType t) { return (kIntDTypes & dtype_bit(t)) != 0; }
bool dtype_is_signed(DType t) {
  return dtype_is_float(t) || t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 ||
         t == DType::kInt64;
}

bool dtype_is_low_precision(DType t) { return (kLowPrecisionDTypes & dtype_bit(t)) != 0; }

int dtype_packed_bits(DType t) {
  switch (t) {
    case DType::kUInt4:
    case DType::kInt4:
    case DType::kFloat4E2M1: return 4;
    case DType::kUInt2:
    case DType::kInt2: return 2;
    case DType::kString: return 0;
    default: return static_cast<int>(8 * dtype_size(t));
  }
}

}  // namespace kiln
