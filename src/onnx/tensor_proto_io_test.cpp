#include "onnx/tensor_proto_io.h"

#include <gtest/gtest.h>

#include "onnx/onnx-data_pb.h"
#include "onnx/test_util.h"

namespace kiln::importer {
namespace {

using testing::TempDir;

ir::ValueType seq_of(DType d) {
  ir::ValueType t;
  t.kind = ir::ValueType::Kind::kSequence;
  t.elem = std::make_shared<ir::ValueType>(ir::ValueType::tensor(d, {}));
  return t;
}

ir::ValueType optional_of(ir::ValueType inner) {
  ir::ValueType t;
  t.kind = ir::ValueType::Kind::kOptional;
  t.elem = std::make_shared<ir::ValueType>(std::move(inner));
  return t;
}

TEST(TensorProtoIoTest, TensorRoundTrip) {
  TempDir dir;
  Tensor t = Tensor::from_vector<float>({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, Shape{2, 3});
  ASSERT_TRUE(write_value_file(dir.file("t.pb"), Value(t), "x").is_ok());
  std::string name;
  auto v = read_value_file(dir.file("t.pb"), nullptr, &name);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(name, "x");
  ASSERT_TRUE(v->is_tensor());
  EXPECT_EQ(v->tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(v->tensor().data<float>()[5], 6.f);
}

TEST(TensorProtoIoTest, StringTensorRoundTrip) {
  TempDir dir;
  Tensor t = Tensor::from_vector<std::string>({"a", "bc"});
  ASSERT_TRUE(write_value_file(dir.file("s.pb"), Value(t), "s").is_ok());
  auto v = read_value_file(dir.file("s.pb"));
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->tensor().data<std::string>()[1], "bc");
}

TEST(TensorProtoIoTest, SequenceRoundTripAndFallback) {
  TempDir dir;
  Value seq = Value::sequence({Tensor::from_vector<int64_t>({1, 2}), Tensor::from_vector<int64_t>({3})},
                              DType::kInt64);
  ASSERT_TRUE(write_value_file(dir.file("q.pb"), seq, "q").is_ok());
  const ir::ValueType type = seq_of(DType::kInt64);
  auto v = read_value_file(dir.file("q.pb"), &type);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_TRUE(v->is_sequence());
  ASSERT_EQ(v->sequence_items().size(), 2u);
  EXPECT_EQ(v->sequence_items()[1].data<int64_t>()[0], 3);
  EXPECT_EQ(v->elem_dtype(), DType::kInt64);
  // Expecting nothing in particular, the SequenceProto is still recognized.
  auto guessed = read_value_file(dir.file("q.pb"));
  ASSERT_TRUE(guessed.ok()) << guessed.status().to_string();
  EXPECT_TRUE(guessed->is_sequence());
}

TEST(TensorProtoIoTest, EmptySequenceKeepsTheExpectedElementType) {
  TempDir dir;
  ASSERT_TRUE(write_value_file(dir.file("e.pb"), Value::sequence({}, DType::kFloat32), "e").is_ok());
  const ir::ValueType type = seq_of(DType::kFloat32);
  auto v = read_value_file(dir.file("e.pb"), &type);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v->is_sequence());
  EXPECT_TRUE(v->sequence_items().empty());
  EXPECT_EQ(v->elem_dtype(), DType::kFloat32);
}

TEST(TensorProtoIoTest, OptionalValues) {
  TempDir dir;
  ASSERT_TRUE(write_value_file(dir.file("none.pb"), Value::none(), "o").is_ok());
  const ir::ValueType type = optional_of(ir::ValueType::tensor(DType::kFloat32, {}));
  auto none = read_value_file(dir.file("none.pb"), &type);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_TRUE(none->is_none());

  onnx::OptionalProto p;
  p.set_name("o");
  p.set_elem_type(onnx::OptionalProto::TENSOR);
  auto* t = p.mutable_tensor_value();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1);
  t->add_float_data(4.5f);
  std::string bytes;
  p.SerializeToString(&bytes);
  dir.write("some.pb", bytes);
  auto some = read_value_file(dir.file("some.pb"), &type);
  ASSERT_TRUE(some.ok()) << some.status().to_string();
  ASSERT_TRUE(some->is_tensor());
  EXPECT_EQ(some->tensor().data<float>()[0], 4.5f);
}

TEST(TensorProtoIoTest, Bfloat16WrittenAsUint16IsRelabeled) {
  // ONNX 1.12's test generator stores bfloat16 data as UINT16.
  TempDir dir;
  Tensor bits = Tensor::from_vector<uint16_t>({0x3F80, 0x4000});
  ASSERT_TRUE(write_value_file(dir.file("b.pb"), Value(bits), "b").is_ok());
  const ir::ValueType type = ir::ValueType::tensor(DType::kBFloat16, {});
  auto v = read_value_file(dir.file("b.pb"), &type);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->tensor().dtype(), DType::kBFloat16);
  EXPECT_EQ(static_cast<float>(v->tensor().data<BFloat16>()[1]), 2.f);
  // Without the expectation it stays what the file says.
  auto raw = read_value_file(dir.file("b.pb"));
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->tensor().dtype(), DType::kUInt16);
}

TEST(TensorProtoIoTest, ErrorsNameTheFile) {
  TempDir dir;
  auto missing = read_value_file(dir.file("nope.pb"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.pb' does not exist"), std::string::npos);

  dir.write("empty.pb", "");
  auto empty = read_value_file(dir.file("empty.pb"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);

  dir.write("junk.pb", std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11));
  auto junk = read_value_file(dir.file("junk.pb"));
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("junk.pb"), std::string::npos);

  onnx::TensorProto bad;
  bad.set_data_type(onnx::TensorProto::FLOAT);
  bad.add_dims(3);
  bad.set_raw_data("abc");
  std::string bytes;
  bad.SerializeToString(&bytes);
  dir.write("bad.pb", bytes);
  auto wrong = read_value_file(dir.file("bad.pb"));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("raw_data of 3 bytes"), std::string::npos) << wrong.status().message();

  auto unwritable = write_value_file(dir.file("no/such/dir/x.pb"), Value(Tensor::scalar(1.f)), "x");
  ASSERT_FALSE(unwritable.is_ok());
  EXPECT_EQ(unwritable.code(), StatusCode::kIo);
}

}  // namespace
}  // namespace kiln::importer
