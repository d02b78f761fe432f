#include "onnx/type_proto.h"

#include <memory>

#include "onnx/tensor_proto.h"

namespace kiln::importer {

namespace {

Result<ir::ValueType> tensor_type(int32_t elem_type, bool has_shape, const onnx::TensorShapeProto& shape) {
  ir::ValueType t;
  t.kind = ir::ValueType::Kind::kTensor;
  if (elem_type != 0) {
    KILN_ASSIGN_OR_RETURN(t.dtype, dtype_from_onnx(elem_type));
  }
  t.has_shape = has_shape;
  if (has_shape) {
    t.dims.reserve(static_cast<size_t>(shape.dim_size()));
    for (const auto& d : shape.dim()) {
      ir::Dim dim;
      if (d.has_dim_value() && d.dim_value() >= 0) {
        dim.value = d.dim_value();
      } else if (d.has_dim_param()) {
        dim.param = d.dim_param();
      }
      t.dims.push_back(std::move(dim));
    }
  }
  return t;
}

Result<std::shared_ptr<ir::ValueType>> elem_type(bool has, const onnx::TypeProto& proto) {
  if (!has) return std::make_shared<ir::ValueType>();
  KILN_ASSIGN_OR_RETURN(ir::ValueType e, value_type_from_proto(proto));
  return std::make_shared<ir::ValueType>(std::move(e));
}

void dims_to_proto(const ir::ValueType& type, onnx::TensorShapeProto* shape) {
  for (const ir::Dim& d : type.dims) {
    auto* dim = shape->add_dim();
    if (d.known()) {
      dim->set_dim_value(d.value);
    } else if (!d.param.empty()) {
      dim->set_dim_param(d.param);
    }
  }
}

}  // namespace

Result<ir::ValueType> value_type_from_proto(const onnx::TypeProto& proto) {
  switch (proto.value_case()) {
    case onnx::TypeProto::kTensorType: {
      const auto& t = proto.tensor_type();
      return tensor_type(t.elem_type(), t.has_shape(), t.shape());
    }
    case onnx::TypeProto::kSparseTensorType: {
      const auto& t = proto.sparse_tensor_type();
      return tensor_type(t.elem_type(), t.has_shape(), t.shape());
    }
    case onnx::TypeProto::kSequenceType: {
      ir::ValueType t;
      t.kind = ir::ValueType::Kind::kSequence;
      KILN_ASSIGN_OR_RETURN(t.elem, elem_type(proto.sequence_type().has_elem_type(), proto.sequence_type().elem_type()));
      return t;
    }
    case onnx::TypeProto::kOptionalType: {
      ir::ValueType t;
      t.kind = ir::ValueType::Kind::kOptional;
      KILN_ASSIGN_OR_RETURN(t.elem, elem_type(proto.optional_type().has_elem_type(), proto.optional_type().elem_type()));
      return t;
    }
    case onnx::TypeProto::kMapType: {
      ir::ValueType t;
      t.kind = ir::ValueType::Kind::kMap;
      if (proto.map_type().key_type() != 0) {
        KILN_ASSIGN_OR_RETURN(t.dtype, dtype_from_onnx(proto.map_type().key_type()));
      }
      KILN_ASSIGN_OR_RETURN(t.elem, elem_type(proto.map_type().has_value_type(), proto.map_type().value_type()));
      return t;
    }
    case onnx::TypeProto::kOpaqueType:
    case onnx::TypeProto::VALUE_NOT_SET:
      break;
  }
  return ir::ValueType{};
}

ir::ValueType value_type_from_proto_or_unknown(const onnx::TypeProto& proto) {
  auto r = value_type_from_proto(proto);
  return r.ok() ? std::move(*r) : ir::ValueType{};
}

void value_type_to_proto(const ir::ValueType& type, onnx::TypeProto* out) {
  out->Clear();
  switch (type.kind) {
    case ir::ValueType::Kind::kUnknown: return;
    case ir::ValueType::Kind::kTensor: {
      auto* t = out->mutable_tensor_type();
      t->set_elem_type(static_cast<int32_t>(type.dtype));
      if (type.has_shape) dims_to_proto(type, t->mutable_shape());
      return;
    }
    case ir::ValueType::Kind::kSequence: {
      auto* s = out->mutable_sequence_type();
      if (type.elem) value_type_to_proto(*type.elem, s->mutable_elem_type());
      return;
    }
    case ir::ValueType::Kind::kOptional: {
      auto* o = out->mutable_optional_type();
      if (type.elem) value_type_to_proto(*type.elem, o->mutable_elem_type());
      return;
    }
    case ir::ValueType::Kind::kMap: {
      auto* m = out->mutable_map_type();
      m->set_key_type(static_cast<int32_t>(type.dtype));
      if (type.elem) value_type_to_proto(*type.elem, m->mutable_value_type());
      return;
    }
  }
}

}  // namespace kiln::importer
