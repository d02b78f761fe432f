// libFuzzer entry point over TensorProto bytes (the .pb files of the ONNX
// backend tests, and every initializer inside a model): dense, sparse,
// sequence and optional layouts, each dtype's value fields, raw_data and
// external-data references. Any bytes must convert or fail with a Status,
// never crash, hang, leak or allocate more than the bytes justify; a tensor
// that converts must survive tensor_to_proto and back bit for bit.
// Built only with -DKILN_FUZZ=ON and clang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/fuzz_oracle.h"
#include "onnx/external_data.h"
#include "onnx/model_parser.h"
#include "onnx/tensor_proto.h"
#include "onnx/tensor_proto_io.h"

namespace {

constexpr const char* kNoDir = "/nonexistent-kiln-fuzz";  // never read real side files

// A tensor that converted must convert back to the same tensor.
void check_round_trip(const kiln::Tensor& t) {
  onnx::TensorProto p;
  if (!kiln::importer::tensor_to_proto(t, "t", &p).is_ok()) std::abort();
  auto back = kiln::importer::tensor_from_proto(p, nullptr);
  if (!back.ok() || !kiln::core::same_tensor(t, *back)) std::abort();
}

void read_as(std::span<const uint8_t> bytes, const kiln::ir::ValueType* expected) {
  auto v = kiln::importer::read_value_bytes(bytes, kNoDir, expected);
  if (!v.ok()) return;
  if (v->is_tensor()) check_round_trip(v->tensor());
  if (v->is_sequence())
    for (const kiln::Tensor& t : v->sequence_items()) check_round_trip(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kiln::ir::ValueType;
  static const ValueType seq = [] {
    ValueType t;
    t.kind = ValueType::Kind::kSequence;
    t.elem = std::make_shared<ValueType>(ValueType::tensor(kiln::DType::kFloat32, {}));
    return t;
  }();
  static const ValueType opt = [] {
    ValueType t;
    t.kind = ValueType::Kind::kOptional;
    t.elem = std::make_shared<ValueType>(ValueType::tensor(kiln::DType::kBFloat16, {}));
    return t;
  }();
  const std::span<const uint8_t> bytes(data, size);
  read_as(bytes, nullptr);  // TensorProto, else SequenceProto, else OptionalProto
  read_as(bytes, &seq);
  read_as(bytes, &opt);
  onnx::SparseTensorProto sparse;
  if (kiln::importer::parse_message(bytes, &sparse)) {
    kiln::importer::ExternalData external(kNoDir);
    auto t = kiln::importer::tensor_from_sparse_proto(sparse, &external);
    if (t.ok()) check_round_trip(*t);
  }
  return 0;
}
