#include "onnx/tensor_proto.h"

#include <bit>
#include <complex>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "onnx/external_data.h"

namespace kiln::importer {

// raw_data and external data are little-endian (onnx.proto); the copies below
// are plain memcpy, which is right only on a little-endian host.
static_assert(std::endian::native == std::endian::little, "the ONNX importer assumes a little-endian host");

namespace {

// Dense tensors made from sparse ones are capped: a tiny file could
// otherwise ask for terabytes of zeros.
constexpr uint64_t kMaxSparseDenseBytes = uint64_t{4} << 30;

std::string describe(const onnx::TensorProto& p) {
  return p.name().empty() ? std::string("tensor") : "tensor '" + p.name() + "'";
}

std::string dims_string(const int64_t* dims, int rank) {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// Which typed field holds a dtype's values, and how many per element.
struct TypedField {
  const char* name;
  int count;  // values stored in the field (before dividing by per_elem)
  int per_elem;
};

TypedField typed_field(const onnx::TensorProto& p, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return {"float_data", p.float_data_size(), 1};
    case DType::kComplex64: return {"float_data", p.float_data_size(), 2};
    case DType::kInt32:
    case DType::kInt16:
    case DType::kInt8:
    case DType::kUInt16:
    case DType::kUInt8:
    case DType::kBool:
    case DType::kFloat16:
    case DType::kBFloat16: return {"int32_data", p.int32_data_size(), 1};
    case DType::kInt64: return {"int64_data", p.int64_data_size(), 1};
    case DType::kFloat64: return {"double_data", p.double_data_size(), 1};
    case DType::kComplex128: return {"double_data", p.double_data_size(), 2};
    case DType::kUInt32:
    case DType::kUInt64: return {"uint64_data", p.uint64_data_size(), 1};
    case DType::kString: return {"string_data", p.string_data_size(), 1};
    case DType::kUndefined: break;
    default:
      // Low-precision types: one value per int32 (float8), or one packed
      // byte per int32 (4-bit and 2-bit types).
      if (dtype_is_low_precision(dtype)) return {"int32_data", p.int32_data_size(), 1};
      break;
  }
  return {"(none)", 0, 1};
}

// The name of a typed field that holds values although it is not the one
// `dtype` uses, or null.
const char* misplaced_field(const onnx::TensorProto& p, const char* expected) {
  struct F {
    const char* name;
    int n;
  };
  const F fields[] = {{"float_data", p.float_data_size()},   {"int32_data", p.int32_data_size()},
                      {"int64_data", p.int64_data_size()},   {"double_data", p.double_data_size()},
                      {"uint64_data", p.uint64_data_size()}, {"string_data", p.string_data_size()}};
  for (const F& f : fields)
    if (f.n > 0 && std::strcmp(f.name, expected) != 0) return f.name;
  return nullptr;
}

template <class Dst, class Src>
void cast_copy(const Src* src, size_t n, Dst* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<Dst>(src[i]);
}

void normalize_bools(Tensor& t) {
  auto* b = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) b[i] = b[i] != 0;
}

Status copy_typed(const onnx::TensorProto& p, Tensor& t) {
  const auto n = static_cast<size_t>(t.numel());
  switch (t.dtype()) {
    case DType::kFloat32:
    case DType::kComplex64:
      if (n) std::memcpy(t.raw_data(), p.float_data().data(), t.nbytes());
      break;
    case DType::kInt32:
      if (n) std::memcpy(t.raw_data(), p.int32_data().data(), t.nbytes());
      break;
    case DType::kInt16: cast_copy(p.int32_data().data(), n, t.data<int16_t>()); break;
    case DType::kInt8: cast_copy(p.int32_data().data(), n, t.data<int8_t>()); break;
    case DType::kUInt16: cast_copy(p.int32_data().data(), n, t.data<uint16_t>()); break;
    case DType::kUInt8: cast_copy(p.int32_data().data(), n, t.data<uint8_t>()); break;
    case DType::kBool: {
      auto* d = static_cast<uint8_t*>(t.raw_data());
      for (size_t i = 0; i < n; ++i) d[i] = p.int32_data(static_cast<int>(i)) != 0;
      break;
    }
    case DType::kFloat16:
    case DType::kBFloat16: {
      // 16 bits per value, in the low half of each int32 (onnx.proto).
      auto* d = static_cast<uint16_t*>(t.raw_data());
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint16_t>(p.int32_data(static_cast<int>(i)) & 0xffff);
      break;
    }
    case DType::kInt64:
      if (n) std::memcpy(t.raw_data(), p.int64_data().data(), t.nbytes());
      break;
    case DType::kFloat64:
    case DType::kComplex128:
      if (n) std::memcpy(t.raw_data(), p.double_data().data(), t.nbytes());
      break;
    case DType::kUInt32: cast_copy(p.uint64_data().data(), n, t.data<uint32_t>()); break;
    case DType::kUInt64:
      if (n) std::memcpy(t.raw_data(), p.uint64_data().data(), t.nbytes());
      break;
    case DType::kString: {
      auto* d = t.data<std::string>();
      for (size_t i = 0; i < n; ++i) d[i] = p.string_data(static_cast<int>(i));
      break;
    }
    case DType::kUndefined: return internal_error("copy_typed: undefined dtype");
    default: return internal_error("copy_typed: low-precision dtype ", dtype_name(t.dtype()));
  }
  return Status::ok();
}

// Bytes of `numel` elements of `dtype` in TensorProto data (packed for the
// 4-bit and 2-bit types).
size_t packed_bytes(DType dtype, int64_t numel) {
  const int bits = dtype_packed_bits(dtype);
  return bits >= 8 ? static_cast<size_t>(numel) * dtype_size(dtype)
                   : (static_cast<size_t>(numel) * static_cast<size_t>(bits) + 7) / 8;
}

// Packed bytes (first element in the lowest bits) -> one byte per element;
// int4/int2 sign-extended.
void unpack_elements(DType dtype, const uint8_t* packed, int64_t n, uint8_t* out) {
  const int bits = dtype_packed_bits(dtype);
  if (bits >= 8) {
    if (n) std::memcpy(out, packed, static_cast<size_t>(n));
    return;
  }
  const int per_byte = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  const bool sign = dtype == DType::kInt4 || dtype == DType::kInt2;
  for (int64_t i = 0; i < n; ++i) {
    unsigned v = (packed[i / per_byte] >> ((i % per_byte) * bits)) & mask;
    if (sign && (v >> (bits - 1))) v |= ~mask;
    out[i] = static_cast<uint8_t>(v);
  }
}

Result<Tensor> low_precision_from_proto(const onnx::TensorProto& p, DType dtype, const Shape& shape, int64_t numel,
                                        const std::string& what) {
  const size_t want = packed_bytes(dtype, numel);
  std::vector<uint8_t> bytes;
  if (p.has_raw_data() && !(p.raw_data().empty() && p.int32_data_size() > 0)) {
    if (p.raw_data().size() != want)
      return invalid_argument(what, " has raw_data of ", p.raw_data().size(), " bytes, but ", numel, " elements of ",
                              onnx_dtype_name(p.data_type()), " need ", want, " bytes");
    bytes.assign(p.raw_data().begin(), p.raw_data().end());
  } else {
    if (static_cast<size_t>(p.int32_data_size()) != want)
      return invalid_argument(what, " has ", numel, " elements of ", onnx_dtype_name(p.data_type()),
                              " (", want, " stored values) but int32_data holds ", p.int32_data_size(), " values");
    bytes.resize(want);
    for (size_t i = 0; i < want; ++i) bytes[i] = static_cast<uint8_t>(p.int32_data(static_cast<int>(i)) & 0xff);
  }
  Tensor t = Tensor::allocate(dtype, shape);
  unpack_elements(dtype, bytes.data(), numel, static_cast<uint8_t*>(t.raw_data()));
  return t;
}

}  // namespace

const char* onnx_dtype_name(int64_t data_type) {
  switch (data_type) {
    case 0: return "UNDEFINED";
    case 1: return "FLOAT";
    case 2: return "UINT8";
    case 3: return "INT8";
    case 4: return "UINT16";
    case 5: return "INT16";
    case 6: return "INT32";
    case 7: return "INT64";
    case 8: return "STRING";
    case 9: return "BOOL";
    case 10: return "FLOAT16";
    case 11: return "DOUBLE";
    case 12: return "UINT32";
    case 13: return "UINT64";
    case 14: return "COMPLEX64";
    case 15: return "COMPLEX128";
    case 16: return "BFLOAT16";
    // Added after ONNX 1.12 (IR versions 9 to 11).
    case 17: return "FLOAT8E4M3FN";
    case 18: return "FLOAT8E4M3FNUZ";
    case 19: return "FLOAT8E5M2";
    case 20: return "FLOAT8E5M2FNUZ";
    case 21: return "UINT4";
    case 22: return "INT4";
    case 23: return "FLOAT4E2M1";
    case 24: return "FLOAT8E8M0";
    case 25: return "UINT2";
    case 26: return "INT2";
    default: return "unknown";
  }
}

Result<DType> dtype_from_onnx(int64_t data_type) {
  if (data_type >= 1 && data_type < kNumDTypes) return static_cast<DType>(data_type);
  if (data_type == 0) return invalid_argument("element type is UNDEFINED (0)");
  return unimplemented("element type ", data_type, " (", onnx_dtype_name(data_type), ") is not supported");
}

Result<int64_t> checked_numel(const int64_t* dims, int rank, size_t elem_size, const std::string& what) {
  // Bound numel * elem_size by 2^62 so byte counts never overflow. The
  // product of the non-zero dims is bounded too, even when a dim is 0:
  // Shape::numel() multiplies left to right in int64.
  const uint64_t limit = (uint64_t{1} << 62) / (elem_size ? elem_size : 1);
  uint64_t n = 1;
  bool zero = false;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 0)
      return invalid_argument(what, " has a negative dimension ", dims[i], " in dims ", dims_string(dims, rank));
    if (dims[i] == 0) {
      zero = true;
      continue;
    }
    const auto d = static_cast<uint64_t>(dims[i]);
    if (n > limit / d)
      return invalid_argument(what, " has dims ", dims_string(dims, rank), " whose element count is too large");
    n *= d;
  }
  return zero ? int64_t{0} : static_cast<int64_t>(n);
}

Result<Tensor> tensor_from_proto(const onnx::TensorProto& p, ExternalData* external) {
  const std::string what = describe(p);
  auto dt = dtype_from_onnx(p.data_type());
  if (!dt.ok()) return std::move(dt).status().with_context(what);
  const DType dtype = *dt;
  const size_t elem = dtype_size(dtype);
  KILN_ASSIGN_OR_RETURN(int64_t numel, checked_numel(p.dims().data(), p.dims_size(), elem, what));
  const Shape shape(std::span<const int64_t>(p.dims().data(), static_cast<size_t>(p.dims_size())));
  const size_t nbytes = static_cast<size_t>(numel) * elem;
  const std::string dims = dims_string(p.dims().data(), p.dims_size());

  if (p.has_segment())
    return unimplemented(what, " is segmented (TensorProto.segment), which is not supported");

  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    if (dtype_packed_bits(dtype) < 8 && dtype != DType::kString)
      return unimplemented(what, " keeps packed ", onnx_dtype_name(p.data_type()),
                           " values in external data, which Kiln does not read yet");
    if (dtype == DType::kString)
      return invalid_argument(what, " is a STRING tensor stored as external data, which ONNX does not allow");
    if (!external) return invalid_argument(what, " is stored as external data, but no model folder is known here");
    return external->load(p, dtype, shape, nbytes);
  }

  if (dtype_is_low_precision(dtype)) {
    try {
      return low_precision_from_proto(p, dtype, shape, numel, what);
    } catch (const std::bad_alloc&) {
      return make_status(StatusCode::kOutOfRange, what, ": out of memory allocating ", nbytes, " bytes");
    }
  }
  const TypedField field = typed_field(p, dtype);
  const bool use_raw = p.has_raw_data() && !(p.raw_data().empty() && field.count > 0);
  try {
    if (use_raw) {
      if (dtype == DType::kString)
        return invalid_argument(what, " is a STRING tensor with raw_data; strings must be in string_data");
      if (p.raw_data().size() != nbytes)
        return invalid_argument(what, " has raw_data of ", p.raw_data().size(), " bytes, but dims ", dims, " of ",
                                onnx_dtype_name(p.data_type()), " need ", nbytes, " bytes");
      Tensor t = Tensor::allocate(dtype, shape);
      if (nbytes) std::memcpy(t.raw_data(), p.raw_data().data(), nbytes);
      if (dtype == DType::kBool) normalize_bools(t);
      return t;
    }
    const uint64_t want = static_cast<uint64_t>(numel) * static_cast<uint64_t>(field.per_elem);
    if (static_cast<uint64_t>(field.count) != want) {
      if (field.count == 0 && numel > 0) {
        if (const char* other = misplaced_field(p, field.name))
          return invalid_argument(what, " of type ", onnx_dtype_name(p.data_type()), " keeps its values in ",
                                  other, ", but ONNX stores this type in ", field.name, " or raw_data");
        return invalid_argument(what, " has dims ", dims, " (", numel, " elements) but no data");
      }
      return invalid_argument(what, " has dims ", dims, " (", numel, " elements", field.per_elem == 2 ? ", 2 values each" : "",
                              ") but ", field.name, " holds ", field.count, " values");
    }
    Tensor t = Tensor::allocate(dtype, shape);
    KILN_RETURN_IF_ERROR(copy_typed(p, t));
    return t;
  } catch (const std::bad_alloc&) {
    return make_status(StatusCode::kOutOfRange, what, ": out of memory allocating ", nbytes, " bytes");
  }
}

Result<Tensor> tensor_from_sparse_proto(const onnx::SparseTensorProto& p, ExternalData* external) {
  const std::string what =
      p.values().name().empty() ? std::string("sparse tensor") : "sparse tensor '" + p.values().name() + "'";
  auto values_r = tensor_from_proto(p.values(), external);
  if (!values_r.ok()) return std::move(values_r).status().with_context(what + " values");
  const Tensor& values = *values_r;
  if (values.rank() != 1)
    return invalid_argument(what, ": values must be 1-D, but have shape ", values.shape().to_string());
  const int64_t nnz = values.numel();
  const int rank = p.dims_size();
  const size_t elem = dtype_size(values.dtype());
  KILN_ASSIGN_OR_RETURN(int64_t numel, checked_numel(p.dims().data(), rank, elem, what));
  if (static_cast<uint64_t>(numel) * elem > kMaxSparseDenseBytes)
    return make_status(StatusCode::kOutOfRange, what, " would need ", static_cast<uint64_t>(numel) * elem,
                       " bytes as a dense tensor; more than the ", kMaxSparseDenseBytes, " supported");
  const Shape shape(std::span<const int64_t>(p.dims().data(), static_cast<size_t>(rank)));

  Tensor indices;
  if (nnz > 0 || p.has_indices()) {
    auto idx_r = tensor_from_proto(p.indices(), external);
    if (!idx_r.ok()) return std::move(idx_r).status().with_context(what + " indices");
    indices = std::move(*idx_r);
    if (indices.dtype() != DType::kInt64)
      return invalid_argument(what, ": indices must be INT64, not ", dtype_name(indices.dtype()));
  }
  bool linear = true;
  if (nnz > 0 || indices.defined()) {
    if (indices.rank() == 1 && indices.dim(0) == nnz) {
      linear = true;
    } else if (indices.rank() == 2 && indices.dim(0) == nnz && indices.dim(1) == rank) {
      linear = false;
    } else {
      return invalid_argument(what, ": indices have shape ", indices.shape().to_string(), "; expected [", nnz,
                              "] or [", nnz, ", ", rank, "] for ", nnz, " values");
    }
  }

  Tensor dense;
  try {
    dense = Tensor::zeros(values.dtype(), shape);
  } catch (const std::bad_alloc&) {
    return make_status(StatusCode::kOutOfRange, what, ": out of memory for the dense form");
  }
  const int64_t* idx = indices.defined() ? indices.data<int64_t>() : nullptr;
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t pos = 0;
    if (linear) {
      pos = idx[k];
    } else {
      for (int d = 0; d < rank; ++d) {
        const int64_t i = idx[k * rank + d];
        if (i < 0 || i >= p.dims(d))
          return invalid_argument(what, ": index ", i, " of value ", k, " is out of range for dimension ", d,
                                  " of size ", p.dims(d));
        pos = pos * p.dims(d) + i;
      }
    }
    if (pos < 0 || pos >= numel)
      return invalid_argument(what, ": index ", pos, " of value ", k, " is out of range for ", numel, " elements");
    if (values.dtype() == DType::kString) {
      dense.data<std::string>()[pos] = values.data<std::string>()[k];
    } else {
      std::memcpy(static_cast<uint8_t*>(dense.raw_data()) + static_cast<size_t>(pos) * elem,
                  static_cast<const uint8_t*>(values.raw_data()) + static_cast<size_t>(k) * elem, elem);
    }
  }
  return dense;
}

Status tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* out) {
  if (!t.defined()) return invalid_argument("cannot write undefined tensor '", name, "'");
  out->Clear();
  out->set_name(name);
  out->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) out->add_dims(d);
  if (t.dtype() == DType::kString) {
    const auto* s = t.data<std::string>();
    for (int64_t i = 0; i < t.numel(); ++i) out->add_string_data(s[i]);
  } else if (dtype_packed_bits(t.dtype()) < 8) {
    const int bits = dtype_packed_bits(t.dtype());
    const int per_byte = 8 / bits;
    std::string packed(packed_bytes(t.dtype(), t.numel()), '\0');
    const auto* e = static_cast<const uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.numel(); ++i)
      packed[static_cast<size_t>(i / per_byte)] = static_cast<char>(
          static_cast<uint8_t>(packed[static_cast<size_t>(i / per_byte)]) |
          ((e[i] & ((1u << bits) - 1)) << ((i % per_byte) * bits)));
    out->set_raw_data(std::move(packed));
  } else {
    out->set_raw_data(static_cast<const char*>(t.raw_data()), t.nbytes());
  }
  return Status::ok();
}

}  // namespace kiln::importer
