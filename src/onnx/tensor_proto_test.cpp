#include "onnx/tensor_proto.h"

#include <gtest/gtest.h>

#include <complex>
#include <cstring>

#include "onnx/external_data.h"
#include "onnx/test_util.h"

namespace kiln::importer {
namespace {

using testing::TempDir;

onnx::TensorProto make(int data_type, std::vector<int64_t> dims, const std::string& name = "t") {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(data_type);
  for (int64_t d : dims) p.add_dims(d);
  return p;
}

template <class T>
std::vector<T> values_of(const Tensor& t) {
  const T* d = t.data<T>();
  return std::vector<T>(d, d + t.numel());
}

// Converts `p`, then writes the tensor back as raw_data and converts that:
// both must give `expected`.
template <class T>
void expect_typed_and_raw(const onnx::TensorProto& p, DType dtype, const std::vector<T>& expected) {
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), dtype);
  ASSERT_EQ(t->numel(), static_cast<int64_t>(expected.size()));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % kTensorAlignment, 0u);
  EXPECT_EQ(values_of<T>(*t), expected);

  onnx::TensorProto raw;
  ASSERT_TRUE(tensor_to_proto(*t, "r", &raw).is_ok());
  EXPECT_TRUE(raw.has_raw_data());
  EXPECT_EQ(raw.raw_data().size(), expected.size() * sizeof(T));
  auto back = tensor_from_proto(raw, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->dtype(), dtype);
  EXPECT_EQ(back->shape(), t->shape());
  EXPECT_EQ(values_of<T>(*back), expected);
}

// 4-bit and 2-bit types are packed in TensorProto data (first element in the
// lowest bits) and unpacked to one byte per element, int4/int2 sign-extended.
TEST(TensorProtoTest, PackedInt4AndUInt2RoundTrip) {
  auto p = make(22, {3});  // INT4
  p.set_raw_data(std::string("\x87\x0f", 2));
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), DType::kInt4);
  EXPECT_EQ(values_of<int8_t>(*t), (std::vector<int8_t>{7, -8, -1}));
  onnx::TensorProto back;
  ASSERT_TRUE(tensor_to_proto(*t, "t", &back).is_ok());
  EXPECT_EQ(back.raw_data(), std::string("\x87\x0f", 2));

  auto u2 = make(25, {5});  // UINT2 in int32_data: one packed byte per value
  u2.add_int32_data(0x39);
  u2.add_int32_data(0x02);
  auto v = tensor_from_proto(u2, nullptr);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(values_of<uint8_t>(*v), (std::vector<uint8_t>{1, 2, 3, 0, 2}));

  auto short_raw = make(22, {5});
  short_raw.set_raw_data("ab");
  auto bad = tensor_from_proto(short_raw, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("need 3 bytes"), std::string::npos);
}

TEST(TensorProtoTest, Float8FromRawAndInt32Data) {
  auto p = make(17, {2});  // FLOAT8E4M3FN
  p.add_int32_data(0x7e);
  p.add_int32_data(0x80);
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), DType::kFloat8E4M3FN);
  EXPECT_EQ(values_of<uint8_t>(*t), (std::vector<uint8_t>{0x7e, 0x80}));
}

TEST(TensorProtoTest, FloatFromFloatData) {
  auto p = make(onnx::TensorProto::FLOAT, {2, 2});
  for (float v : {1.5f, -2.f, 0.f, 3.25f}) p.add_float_data(v);
  expect_typed_and_raw<float>(p, DType::kFloat32, {1.5f, -2.f, 0.f, 3.25f});
}

TEST(TensorProtoTest, DoubleFromDoubleData) {
  auto p = make(onnx::TensorProto::DOUBLE, {3});
  for (double v : {1e300, -0.5, 7.0}) p.add_double_data(v);
  expect_typed_and_raw<double>(p, DType::kFloat64, {1e300, -0.5, 7.0});
}

TEST(TensorProtoTest, Float16BitsFromInt32Data) {
  auto p = make(onnx::TensorProto::FLOAT16, {3});
  for (int v : {0x3C00, 0xC000, 0x7C00}) p.add_int32_data(v);  // 1, -2, inf
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(static_cast<float>(t->data<Float16>()[0]), 1.f);
  EXPECT_EQ(static_cast<float>(t->data<Float16>()[1]), -2.f);
  EXPECT_TRUE(std::isinf(static_cast<float>(t->data<Float16>()[2])));
  expect_typed_and_raw<uint16_t>(p, DType::kFloat16, {0x3C00, 0xC000, 0x7C00});
}

TEST(TensorProtoTest, BFloat16BitsFromInt32Data) {
  auto p = make(onnx::TensorProto::BFLOAT16, {2});
  for (int v : {0x3F80, 0xC040}) p.add_int32_data(v);  // 1, -3
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(static_cast<float>(t->data<BFloat16>()[0]), 1.f);
  EXPECT_EQ(static_cast<float>(t->data<BFloat16>()[1]), -3.f);
  expect_typed_and_raw<uint16_t>(p, DType::kBFloat16, {0x3F80, 0xC040});
}

TEST(TensorProtoTest, SmallIntegersFromInt32Data) {
  {
    auto p = make(onnx::TensorProto::INT8, {3});
    for (int v : {-128, 0, 127}) p.add_int32_data(v);
    expect_typed_and_raw<int8_t>(p, DType::kInt8, {-128, 0, 127});
  }
  {
    auto p = make(onnx::TensorProto::UINT8, {2});
    for (int v : {0, 255}) p.add_int32_data(v);
    expect_typed_and_raw<uint8_t>(p, DType::kUInt8, {0, 255});
  }
  {
    auto p = make(onnx::TensorProto::INT16, {2});
    for (int v : {-32768, 32767}) p.add_int32_data(v);
    expect_typed_and_raw<int16_t>(p, DType::kInt16, {-32768, 32767});
  }
  {
    auto p = make(onnx::TensorProto::UINT16, {2});
    for (int v : {0, 65535}) p.add_int32_data(v);
    expect_typed_and_raw<uint16_t>(p, DType::kUInt16, {0, 65535});
  }
  {
    auto p = make(onnx::TensorProto::INT32, {2});
    for (int v : {INT32_MIN, INT32_MAX}) p.add_int32_data(v);
    expect_typed_and_raw<int32_t>(p, DType::kInt32, {INT32_MIN, INT32_MAX});
  }
}

TEST(TensorProtoTest, BoolFromInt32DataIsNormalized) {
  auto p = make(onnx::TensorProto::BOOL, {3});
  for (int v : {0, 1, 5}) p.add_int32_data(v);
  expect_typed_and_raw<uint8_t>(p, DType::kBool, {0, 1, 1});
  // raw_data bytes other than 0/1 are normalized too.
  auto r = make(onnx::TensorProto::BOOL, {2});
  r.set_raw_data(std::string("\x00\x07", 2));
  auto t = tensor_from_proto(r, nullptr);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(values_of<uint8_t>(*t), (std::vector<uint8_t>{0, 1}));
}

TEST(TensorProtoTest, Int64AndUnsignedFromTheirFields) {
  {
    auto p = make(onnx::TensorProto::INT64, {2});
    for (int64_t v : {INT64_MIN, INT64_MAX}) p.add_int64_data(v);
    expect_typed_and_raw<int64_t>(p, DType::kInt64, {INT64_MIN, INT64_MAX});
  }
  {
    auto p = make(onnx::TensorProto::UINT32, {2});
    for (uint64_t v : {0ull, 4294967295ull}) p.add_uint64_data(v);
    expect_typed_and_raw<uint32_t>(p, DType::kUInt32, {0u, 4294967295u});
  }
  {
    auto p = make(onnx::TensorProto::UINT64, {1});
    p.add_uint64_data(UINT64_MAX);
    expect_typed_and_raw<uint64_t>(p, DType::kUInt64, {UINT64_MAX});
  }
}

TEST(TensorProtoTest, ComplexFromPairs) {
  {
    auto p = make(onnx::TensorProto::COMPLEX64, {2});
    for (float v : {1.f, 2.f, -3.f, 4.f}) p.add_float_data(v);
    expect_typed_and_raw<std::complex<float>>(p, DType::kComplex64, {{1.f, 2.f}, {-3.f, 4.f}});
  }
  {
    auto p = make(onnx::TensorProto::COMPLEX128, {1});
    for (double v : {0.5, -0.25}) p.add_double_data(v);
    expect_typed_and_raw<std::complex<double>>(p, DType::kComplex128, {{0.5, -0.25}});
  }
  auto odd = make(onnx::TensorProto::COMPLEX64, {2});
  for (float v : {1.f, 2.f, 3.f}) odd.add_float_data(v);
  auto t = tensor_from_proto(odd, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("float_data holds 3 values"), std::string::npos) << t.status().message();
}

TEST(TensorProtoTest, StringsFromStringData) {
  auto p = make(onnx::TensorProto::STRING, {2});
  p.add_string_data("hello");
  p.add_string_data(std::string("a\0b", 3));
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->data<std::string>()[0], "hello");
  EXPECT_EQ(t->data<std::string>()[1], std::string("a\0b", 3));
  onnx::TensorProto back;
  ASSERT_TRUE(tensor_to_proto(*t, "s", &back).is_ok());
  EXPECT_FALSE(back.has_raw_data());
  ASSERT_EQ(back.string_data_size(), 2);
  EXPECT_EQ(back.string_data(1), std::string("a\0b", 3));
}

TEST(TensorProtoTest, StringRawDataIsRejected) {
  auto p = make(onnx::TensorProto::STRING, {1});
  p.set_raw_data("abc");
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("STRING tensor with raw_data"), std::string::npos);
}

TEST(TensorProtoTest, ScalarAndEmptyTensors) {
  auto scalar = make(onnx::TensorProto::INT64, {});
  scalar.add_int64_data(42);
  auto s = tensor_from_proto(scalar, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank(), 0u);
  EXPECT_EQ(s->data<int64_t>()[0], 42);

  auto empty = make(onnx::TensorProto::FLOAT, {0, 3});
  auto e = tensor_from_proto(empty, nullptr);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->numel(), 0);
  EXPECT_EQ(e->shape(), (Shape{0, 3}));
}

TEST(TensorProtoTest, RawDataSizeMismatchNamesBothSizes) {
  auto p = make(onnx::TensorProto::FLOAT, {2, 3}, "weights");
  p.set_raw_data(std::string(20, '\0'));
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_FALSE(t.ok());
  const std::string& m = t.status().message();
  EXPECT_NE(m.find("tensor 'weights'"), std::string::npos) << m;
  EXPECT_NE(m.find("raw_data of 20 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("need 24 bytes"), std::string::npos) << m;
}

TEST(TensorProtoTest, TypedCountMismatchIsAnError) {
  auto p = make(onnx::TensorProto::INT64, {4}, "idx");
  p.add_int64_data(1);
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("int64_data holds 1 values"), std::string::npos) << t.status().message();

  auto none = make(onnx::TensorProto::FLOAT, {2}, "w");
  auto n = tensor_from_proto(none, nullptr);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("no data"), std::string::npos) << n.status().message();
}

TEST(TensorProtoTest, ValuesInTheWrongFieldAreNamed) {
  auto p = make(onnx::TensorProto::FLOAT, {2}, "w");
  p.add_int64_data(1);
  p.add_int64_data(2);
  auto t = tensor_from_proto(p, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("keeps its values in int64_data"), std::string::npos) << t.status().message();
}

TEST(TensorProtoTest, BadDimsAndTypesAreErrors) {
  auto neg = make(onnx::TensorProto::FLOAT, {2, -1});
  auto a = tensor_from_proto(neg, nullptr);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("negative dimension -1"), std::string::npos);

  auto huge = make(onnx::TensorProto::FLOAT, {int64_t{1} << 40, int64_t{1} << 40});
  auto b = tensor_from_proto(huge, nullptr);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("too large"), std::string::npos);

  auto unknown = make(40, {1});
  unknown.set_raw_data("x");
  auto c = tensor_from_proto(unknown, nullptr);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("element type 40"), std::string::npos);

  auto undef = make(0, {1});
  auto d = tensor_from_proto(undef, nullptr);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("UNDEFINED"), std::string::npos);
}

TEST(TensorProtoTest, SparseToDenseWithLinearAndCoordinateIndices) {
  onnx::SparseTensorProto sp;
  sp.add_dims(2);
  sp.add_dims(3);
  *sp.mutable_values() = make(onnx::TensorProto::FLOAT, {2}, "s");
  sp.mutable_values()->add_float_data(5.f);
  sp.mutable_values()->add_float_data(7.f);
  *sp.mutable_indices() = make(onnx::TensorProto::INT64, {2}, "");
  sp.mutable_indices()->add_int64_data(1);
  sp.mutable_indices()->add_int64_data(5);
  auto t = tensor_from_sparse_proto(sp, nullptr);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<float>(*t), (std::vector<float>{0, 5, 0, 0, 0, 7}));

  // The same values with [NNZ, rank] coordinates.
  *sp.mutable_indices() = make(onnx::TensorProto::INT64, {2, 2}, "");
  for (int64_t v : {0, 1, 1, 2}) sp.mutable_indices()->add_int64_data(v);
  auto c = tensor_from_sparse_proto(sp, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(values_of<float>(*c), (std::vector<float>{0, 5, 0, 0, 0, 7}));

  // An index outside the dense shape is an error, not a write out of bounds.
  sp.mutable_indices()->set_int64_data(3, 3);
  auto bad = tensor_from_sparse_proto(sp, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("out of range"), std::string::npos) << bad.status().message();
}

TEST(TensorProtoTest, SparseDenseSizeIsCapped) {
  onnx::SparseTensorProto sp;
  sp.add_dims(int64_t{1} << 40);
  *sp.mutable_values() = make(onnx::TensorProto::FLOAT, {0}, "big");
  auto t = tensor_from_sparse_proto(sp, nullptr);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("as a dense tensor"), std::string::npos) << t.status().message();
}

onnx::TensorProto external(const std::string& location, int64_t offset, int64_t length, std::vector<int64_t> dims,
                           const std::string& name = "w") {
  auto p = make(onnx::TensorProto::FLOAT, std::move(dims), name);
  p.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = p.add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  if (offset >= 0) {
    kv = p.add_external_data();
    kv->set_key("offset");
    kv->set_value(std::to_string(offset));
  }
  if (length >= 0) {
    kv = p.add_external_data();
    kv->set_key("length");
    kv->set_value(std::to_string(length));
  }
  return p;
}

std::string float_bytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(TensorProtoTest, ExternalDataAlignedIsMappedUnalignedIsCopied) {
  TempDir dir;
  std::string file(64, '\0');
  file += float_bytes({1, 2, 3, 4});
  file += float_bytes({5, 6});
  dir.write("weights.bin", file);
  ExternalData ext(dir.path());

  auto a = tensor_from_proto(external("weights.bin", 64, 16, {2, 2}), &ext);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(values_of<float>(*a), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(ext.num_mapped(), 1u);
  EXPECT_TRUE(a->owns_memory());  // holds the mapping

  auto b = tensor_from_proto(external("weights.bin", 80, -1, {2}), &ext);  // offset 80: not 64-aligned
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(values_of<float>(*b), (std::vector<float>{5, 6}));
  EXPECT_EQ(ext.num_mapped(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->raw_data()) % kTensorAlignment, 0u);
}

TEST(TensorProtoTest, MappedTensorOutlivesTheLoader) {
  TempDir dir;
  dir.write("w.bin", float_bytes({9, 8, 7}));
  Tensor t;
  {
    ExternalData ext(dir.path());
    auto r = tensor_from_proto(external("w.bin", 0, -1, {3}), &ext);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    t = std::move(*r);
  }
  EXPECT_EQ(values_of<float>(t), (std::vector<float>{9, 8, 7}));
}

TEST(TensorProtoTest, ExternalDataErrorsNameTheProblem) {
  TempDir dir;
  dir.write("short.bin", float_bytes({1, 2}));
  ExternalData ext(dir.path());

  auto missing = tensor_from_proto(external("nope.bin", 0, -1, {2}), &ext);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.bin' does not exist"), std::string::npos)
      << missing.status().message();

  auto short_file = tensor_from_proto(external("short.bin", 4, -1, {2}), &ext);
  ASSERT_FALSE(short_file.ok());
  EXPECT_NE(short_file.status().message().find("too short"), std::string::npos) << short_file.status().message();

  auto bad_length = tensor_from_proto(external("short.bin", 0, 12, {2}), &ext);
  ASSERT_FALSE(bad_length.ok());
  EXPECT_NE(bad_length.status().message().find("length 12"), std::string::npos) << bad_length.status().message();

  auto escape = tensor_from_proto(external("../etc/passwd", 0, -1, {2}), &ext);
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.status().message().find("relative path inside"), std::string::npos);

  auto absolute = tensor_from_proto(external("/etc/passwd", 0, -1, {2}), &ext);
  ASSERT_FALSE(absolute.ok());

  auto p = external("short.bin", 0, -1, {2});
  p.mutable_external_data(1)->set_value("12abc");
  auto bad_offset = tensor_from_proto(p, &ext);
  ASSERT_FALSE(bad_offset.ok());
  EXPECT_NE(bad_offset.status().message().find("offset '12abc'"), std::string::npos);

  auto no_loader = tensor_from_proto(external("short.bin", 0, -1, {2}), nullptr);
  ASSERT_FALSE(no_loader.ok());
  EXPECT_NE(no_loader.status().message().find("external data"), std::string::npos);
}

}  // namespace
}  // namespace kiln::importer
