#include "onnx/tensor_proto_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <span>

#include "core/tensor_access.h"
#include "onnx/external_data.h"
#include "onnx/model_parser.h"
#include "onnx/onnx-data_pb.h"
#include "onnx/tensor_proto.h"

namespace kiln::importer {

namespace {

using Bytes = std::span<const uint8_t>;

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash == 0 ? 1 : slash);
}

// A TensorProto that parsed but says nothing (no type) is taken as "not a
// TensorProto", so that the caller can try the other layouts.
Result<Value> value_from_tensor_bytes(Bytes bytes, ExternalData* external, std::string* name) {
  onnx::TensorProto p;
  if (!parse_message(bytes, &p)) return invalid_argument("not a TensorProto");
  if (p.data_type() == 0) return invalid_argument("not a TensorProto: it has no data_type");
  KILN_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(p, external));
  if (name) *name = p.name();
  return Value(std::move(t));
}

Result<Value> value_from_sequence(const onnx::SequenceProto& p, DType elem_hint, ExternalData* external) {
  std::vector<Tensor> items;
  switch (p.elem_type()) {
    case onnx::SequenceProto::UNDEFINED:
    case onnx::SequenceProto::TENSOR:
      for (int i = 0; i < p.tensor_values_size(); ++i) {
        auto t = tensor_from_proto(p.tensor_values(i), external);
        if (!t.ok()) return std::move(t).status().with_context("sequence element " + std::to_string(i));
        items.push_back(std::move(*t));
      }
      break;
    case onnx::SequenceProto::SPARSE_TENSOR:
      for (int i = 0; i < p.sparse_tensor_values_size(); ++i) {
        auto t = tensor_from_sparse_proto(p.sparse_tensor_values(i), external);
        if (!t.ok()) return std::move(t).status().with_context("sequence element " + std::to_string(i));
        items.push_back(std::move(*t));
      }
      break;
    default:
      return unimplemented("sequences of sequences, maps or optionals (elem_type ", p.elem_type(),
                           ") are not supported");
  }
  DType elem = items.empty() ? elem_hint : items.front().dtype();
  for (size_t i = 1; i < items.size(); ++i)
    if (items[i].dtype() != elem)
      return invalid_argument("sequence element ", i, " is ", dtype_name(items[i].dtype()), " but element 0 is ",
                              dtype_name(elem));
  return Value::sequence(std::move(items), elem);
}

DType elem_dtype_hint(const ir::ValueType* expected) {
  const ir::ValueType* t = expected;
  while (t && (t->kind == ir::ValueType::Kind::kSequence || t->kind == ir::ValueType::Kind::kOptional)) t = t->elem.get();
  return t && t->kind == ir::ValueType::Kind::kTensor ? t->dtype : DType::kUndefined;
}

Result<Value> value_from_sequence_bytes(Bytes bytes, DType hint, ExternalData* external, std::string* name) {
  onnx::SequenceProto p;
  if (!parse_message(bytes, &p)) return invalid_argument("not a SequenceProto");
  if (!p.has_elem_type() && p.tensor_values_size() == 0 && p.sparse_tensor_values_size() == 0)
    return invalid_argument("not a SequenceProto: it has no elem_type");
  KILN_ASSIGN_OR_RETURN(Value v, value_from_sequence(p, hint, external));
  if (name) *name = p.name();
  return v;
}

Result<Value> value_from_optional_bytes(Bytes bytes, DType hint, ExternalData* external, std::string* name) {
  onnx::OptionalProto p;
  if (!parse_message(bytes, &p)) return invalid_argument("not an OptionalProto");
  if (name) *name = p.name();
  if (p.has_tensor_value()) {
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(p.tensor_value(), external));
    return Value(std::move(t));
  }
  if (p.has_sparse_tensor_value()) {
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_from_sparse_proto(p.sparse_tensor_value(), external));
    return Value(std::move(t));
  }
  if (p.has_sequence_value()) return value_from_sequence(p.sequence_value(), hint, external);
  if (p.has_map_value() || p.has_optional_value())
    return unimplemented("optionals holding a map or an optional are not supported");
  return Value::none();
}

// ONNX 1.12's backend-test generator writes bfloat16 data as UINT16 (numpy
// has no bfloat16): same bits, so relabel when bfloat16 is expected.
Tensor adapt(Tensor t, DType expected) {
  if (expected == DType::kBFloat16 && t.dtype() == DType::kUInt16) {
    std::shared_ptr<void> holder = core::TensorAccess::holder(t);
    return Tensor::wrap(DType::kBFloat16, t.shape(), t.raw_data(), std::move(holder));
  }
  return t;
}

Value adapt(Value v, DType expected) {
  if (v.is_tensor()) return Value(adapt(std::move(v.tensor()), expected));
  if (v.is_sequence()) {
    std::vector<Tensor> items;
    for (Tensor& t : v.sequence_items()) items.push_back(adapt(std::move(t), expected));
    const DType elem = expected == DType::kBFloat16 && v.elem_dtype() == DType::kUInt16 ? expected : v.elem_dtype();
    return Value::sequence(std::move(items), elem);
  }
  return v;
}

Result<Value> read_value(Bytes bytes, const ir::ValueType* expected, ExternalData* external, std::string* name);

Result<Value> read_adapted(Bytes bytes, const ir::ValueType* expected, ExternalData* external, std::string* name) {
  KILN_ASSIGN_OR_RETURN(Value v, read_value(bytes, expected, external, name));
  return adapt(std::move(v), elem_dtype_hint(expected));
}

Result<Value> read_value(Bytes bytes, const ir::ValueType* expected, ExternalData* external, std::string* name) {
  using Kind = ir::ValueType::Kind;
  const Kind kind = expected ? expected->kind : Kind::kTensor;
  const DType hint = elem_dtype_hint(expected);
  switch (kind) {
    case Kind::kSequence: return value_from_sequence_bytes(bytes, hint, external, name);
    case Kind::kOptional: return value_from_optional_bytes(bytes, hint, external, name);
    case Kind::kMap: return unimplemented("map values are not supported");
    case Kind::kTensor:
    case Kind::kUnknown: break;
  }
  // A tensor is expected, or nothing is known: try the layouts in turn and
  // report the TensorProto error if none fits. Protobuf accepts bytes of one
  // message as another more often than not, so a fallback counts only when
  // every field is one its message type knows and it says something.
  auto t = value_from_tensor_bytes(bytes, external, name);
  if (t.ok()) return t;
  onnx::SequenceProto s;
  if (parse_message(bytes, &s) && s.unknown_fields().empty() && s.has_elem_type()) {
    if (auto v = value_from_sequence_bytes(bytes, hint, external, name); v.ok()) return v;
  }
  onnx::OptionalProto o;
  if (parse_message(bytes, &o) && o.unknown_fields().empty() && o.has_elem_type()) {
    if (auto v = value_from_optional_bytes(bytes, hint, external, name); v.ok()) return v;
  }
  return t;
}

Status write_bytes(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return make_status(StatusCode::kIo, "cannot create '", path, "': ", std::strerror(errno));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return make_status(StatusCode::kIo, "cannot write '", path, "': ", std::strerror(errno));
  return Status::ok();
}

}  // namespace

Result<Value> read_value_file(const std::string& path, const ir::ValueType* expected, std::string* name) {
  try {
    auto file = MappedFile::open(path);
    if (!file.ok()) return make_status(file.status().code(), "value file ", file.status().message());
    if ((*file)->size() == 0) return invalid_argument("value file '", path, "' is empty");
    ExternalData external(folder_of(path));
    auto v = read_adapted(Bytes((*file)->data(), (*file)->size()), expected, &external, name);
    if (!v.ok()) return std::move(v).status().with_context("value file '" + path + "'");
    // Tensors that map the file's neighbours stay valid: they hold the mapping.
    return v;
  } catch (const std::exception& e) {
    return internal_error("reading value file '", path, "' failed: ", e.what());
  }
}

Result<Value> read_value_bytes(std::span<const uint8_t> bytes, const std::string& base_dir,
                               const ir::ValueType* expected, std::string* name) {
  try {
    ExternalData external(base_dir);
    return read_adapted(bytes, expected, &external, name);
  } catch (const std::exception& e) {
    return internal_error("reading a value failed: ", e.what());
  }
}

Status write_value_file(const std::string& path, const Value& value, const std::string& name) {
  try {
    std::string bytes;
    if (value.is_tensor()) {
      onnx::TensorProto p;
      KILN_RETURN_IF_ERROR(tensor_to_proto(value.tensor(), name, &p));
      p.SerializeToString(&bytes);
    } else if (value.is_sequence()) {
      onnx::SequenceProto p;
      p.set_name(name);
      p.set_elem_type(onnx::SequenceProto::TENSOR);
      for (size_t i = 0; i < value.sequence_items().size(); ++i)
        KILN_RETURN_IF_ERROR(tensor_to_proto(value.sequence_items()[i], "", p.add_tensor_values()));
      p.SerializeToString(&bytes);
    } else {
      onnx::OptionalProto p;
      p.set_name(name);
      p.SerializeToString(&bytes);
    }
    return write_bytes(path, bytes);
  } catch (const std::exception& e) {
    return internal_error("writing value file '", path, "' failed: ", e.what());
  }
}

}  // namespace kiln::importer
