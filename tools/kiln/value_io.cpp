#include "value_io.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <system_error>
#include <filesystem>

#include "kiln/npy.h"
#include "onnx/tensor_proto_io.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

// The declared type of a model input or output as the .pb reader wants it.
ir::ValueType value_type_of(const IoInfo& info) {
  std::vector<ir::Dim> dims;
  for (size_t i = 0; i < info.dims.size(); ++i) {
    ir::Dim d;
    d.value = info.dims[i];
    if (i < info.dim_params.size()) d.param = info.dim_params[i];
    dims.push_back(std::move(d));
  }
  ir::ValueType tensor = ir::ValueType::tensor(info.dtype, std::move(dims));
  tensor.has_shape = info.has_shape;
  switch (info.kind) {
    case IoInfo::Kind::kTensor: return tensor;
    case IoInfo::Kind::kSequence: {
      ir::ValueType seq;
      seq.kind = ir::ValueType::Kind::kSequence;
      seq.elem = std::make_shared<ir::ValueType>(std::move(tensor));
      return seq;
    }
    case IoInfo::Kind::kOptional: {
      ir::ValueType opt;
      opt.kind = ir::ValueType::Kind::kOptional;
      // IoInfo flattens optional(seq(T)) to its tensor type; the type string keeps it.
      if (info.type_string.rfind("optional(seq(", 0) == 0) {
        ir::ValueType seq;
        seq.kind = ir::ValueType::Kind::kSequence;
        seq.elem = std::make_shared<ir::ValueType>(std::move(tensor));
        opt.elem = std::make_shared<ir::ValueType>(std::move(seq));
      } else {
        opt.elem = std::make_shared<ir::ValueType>(std::move(tensor));
      }
      return opt;
    }
    case IoInfo::Kind::kOther: break;
  }
  return ir::ValueType();
}

}  // namespace

Result<Value> read_value_for(const std::string& path, const IoInfo& info) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_status(StatusCode::kNotFound, "file '", path, "' does not exist");
  if (fs::is_directory(path, ec)) return make_status(StatusCode::kIo, "'", path, "' is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_status(StatusCode::kIo, "cannot open '", path, "': ", std::strerror(errno));
  uint8_t magic[6] = {};
  in.read(reinterpret_cast<char*>(magic), sizeof(magic));
  const auto got = static_cast<size_t>(in.gcount());
  in.close();
  if (has_npy_magic({magic, got})) {
    KILN_ASSIGN_OR_RETURN(Tensor t, read_npy_file(path));
    if (info.kind == IoInfo::Kind::kSequence) {
      return invalid_argument("'", path, "' is a .npy array, but input '", info.name, "' is a sequence (",
                              info.type_string, "); give a SequenceProto .pb file");
    }
    return Value(std::move(t));
  }
  const ir::ValueType type = value_type_of(info);
  Result<Value> v = importer::read_value_file(path, type.kind == ir::ValueType::Kind::kUnknown ? nullptr : &type);
  if (!v.is_ok()) {
    const std::string& m = v.status().message();
    // Keep the importer's message; make sure it names the file.
    if (m.find(path) != std::string::npos) return std::move(v).status();
    return make_status(v.status().code(), "'", path, "': ", m);
  }
  return v;
}

namespace {

bool dims_match(const IoInfo& info, const Shape& shape) {
  if (!info.has_shape) return true;
  if (shape.rank() != info.dims.size()) return false;
  for (size_t i = 0; i < info.dims.size(); ++i)
    if (info.dims[i] >= 0 && info.dims[i] != shape[i]) return false;
  return true;
}

Status check_tensor(const IoInfo& info, const Tensor& t, const std::string& what) {
  if (info.dtype != DType::kUndefined && t.dtype() != info.dtype) {
    return invalid_argument(what, " has dtype ", dtype_name(t.dtype()), "; the model expects ", info.type_string);
  }
  if (!dims_match(info, t.shape())) {
    return invalid_argument(what, " has shape ", t.shape().to_string(), "; the model expects ", info.type_string);
  }
  return Status::ok();
}

}  // namespace

Status check_value_for(const IoInfo& info, const Value& value, const std::string& source) {
  const std::string what = "input '" + info.name + "' from '" + source + "'";
  switch (info.kind) {
    case IoInfo::Kind::kTensor:
      if (!value.is_tensor()) return invalid_argument(what, " is not a tensor; the model expects ", info.type_string);
      return check_tensor(info, value.tensor(), what);
    case IoInfo::Kind::kSequence:
      if (!value.is_sequence()) return invalid_argument(what, " is not a sequence; the model expects ", info.type_string);
      for (size_t i = 0; i < value.sequence_items().size(); ++i) {
        KILN_RETURN_IF_ERROR(check_tensor(info, value.sequence_items()[i], what + " item " + std::to_string(i)));
      }
      return Status::ok();
    case IoInfo::Kind::kOptional:
      if (value.is_tensor() && info.type_string.rfind("optional(seq(", 0) != 0) {
        return check_tensor(info, value.tensor(), what);
      }
      return Status::ok();
    case IoInfo::Kind::kOther: return Status::ok();
  }
  return Status::ok();
}

namespace {

Result<Tensor> random_tensor(const IoInfo& info, std::mt19937_64& rng) {
  Shape shape;
  if (info.has_shape) {
    for (int64_t d : info.dims) shape.push_back(d >= 0 ? d : 1);
  } else {
    shape.push_back(1);
  }
  if (info.dtype == DType::kUndefined) {
    return invalid_argument("cannot make a random value for input '", info.name, "': its type (",
                            info.type_string, ") has no element type; give it with --input");
  }
  Tensor t = Tensor::allocate(info.dtype, shape);
  const int64_t n = t.numel();
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 3);
  std::uniform_int_distribution<int> coin(0, 1);
  static const char* const kWords[] = {"kiln", "onnx", "tensor", "model", "fire", "clay"};
  bool ok = true;
  visit_dtype(info.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, UnsupportedDType>) {
      ok = false;
    } else {
      T* d = t.data<T>();
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, std::string>) {
          d[i] = kWords[small(rng)];
        } else if constexpr (std::is_same_v<T, bool>) {
          d[i] = coin(rng) != 0;
        } else if constexpr (std::is_integral_v<T>) {
          d[i] = static_cast<T>(small(rng));
        } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
          const double re = real(rng);
          const double im = real(rng);
          d[i] = T(static_cast<typename T::value_type>(re), static_cast<typename T::value_type>(im));
        } else if constexpr (std::is_same_v<T, double>) {
          d[i] = real(rng);
        } else {
          d[i] = T(static_cast<float>(real(rng)));
        }
      }
    }
  });
  if (!ok) return invalid_argument("cannot make a random ", dtype_name(info.dtype), " value for input '", info.name, "'");
  return t;
}

}  // namespace

Result<Value> make_random_value(const IoInfo& info, uint64_t seed) {
  std::mt19937_64 rng(seed);
  switch (info.kind) {
    case IoInfo::Kind::kTensor:
    case IoInfo::Kind::kOptional: {
      KILN_ASSIGN_OR_RETURN(Tensor t, random_tensor(info, rng));
      if (info.type_string.rfind("optional(seq(", 0) == 0) return Value::sequence({std::move(t)}, info.dtype);
      return Value(std::move(t));
    }
    case IoInfo::Kind::kSequence: {
      KILN_ASSIGN_OR_RETURN(Tensor t, random_tensor(info, rng));
      return Value::sequence({std::move(t)}, info.dtype);
    }
    case IoInfo::Kind::kOther: break;
  }
  return invalid_argument("cannot make a random value for input '", info.name, "' of type ", info.type_string,
                          "; give it with --input");
}

}  // namespace kiln::cli
