#include "kiln/npy.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace kiln {
namespace {

// Builds a .npy file by hand: magic, version, header length, header, data.
std::vector<uint8_t> make_npy(int major, const std::string& dict, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  std::string header = dict + "\n";
  const size_t len = header.size();
  out.push_back(static_cast<uint8_t>(len & 0xff));
  out.push_back(static_cast<uint8_t>(len >> 8));
  if (major >= 2) {
    out.push_back(0);
    out.push_back(0);
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::string error_of(const std::vector<uint8_t>& file) {
  Result<Tensor> r = parse_npy(file, "x.npy");
  return r.is_ok() ? std::string("(no error)") : r.status().message();
}

TEST(NpyTest, ReadsFloat32MatrixWrittenLikeNumpy) {
  // The exact header numpy 1.24 writes for np.arange(6, dtype='<f4').reshape(2, 3).
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  dict.append(128 - 10 - dict.size() - 1, ' ');
  auto file = make_npy(1, dict, bytes_of(std::vector<float>{0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(file.size(), 128u + 24u);
  Result<Tensor> t = parse_npy(file);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->dtype(), DType::kFloat32);
  EXPECT_EQ(t->shape(), (Shape{2, 3}));
  EXPECT_EQ(t->data<float>()[5], 5.0f);
}

TEST(NpyTest, ReadsVersion2And3Headers) {
  for (int major : {2, 3}) {
    auto file = make_npy(major, "{'shape': (3,), 'fortran_order': False, 'descr': '<i8'}",
                         bytes_of(std::vector<int64_t>{7, -8, 9}));
    Result<Tensor> t = parse_npy(file);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype(), DType::kInt64);
    EXPECT_EQ(t->shape(), (Shape{3}));
    EXPECT_EQ(t->data<int64_t>()[1], -8);
  }
}

TEST(NpyTest, ReadsScalarAndEmptyArrays) {
  Result<Tensor> s = parse_npy(make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': ()}",
                                        bytes_of(std::vector<double>{2.5})));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->rank(), 0u);
  EXPECT_EQ(s->data<double>()[0], 2.5);
  Result<Tensor> e = parse_npy(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4)}", {}));
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  EXPECT_EQ(e->shape(), (Shape{0, 4}));
}

TEST(NpyTest, RoundTripsEveryNumericDType) {
  const DType types[] = {DType::kBool,    DType::kInt8,    DType::kUInt8,   DType::kInt16,
                         DType::kUInt16,  DType::kInt32,   DType::kUInt32,  DType::kInt64,
                         DType::kUInt64,  DType::kFloat16, DType::kFloat32, DType::kFloat64,
                         DType::kComplex64, DType::kComplex128};
  for (DType dt : types) {
    Tensor t = Tensor::allocate(dt, Shape{2, 3, 2});
    auto* p = static_cast<uint8_t*>(t.raw_data());
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(dt == DType::kBool ? i % 2 : i * 7 + 1);
    Result<std::vector<uint8_t>> bytes = serialize_npy(t);
    ASSERT_TRUE(bytes.is_ok()) << dtype_name(dt) << ": " << bytes.status().to_string();
    Result<Tensor> back = parse_npy(*bytes);
    ASSERT_TRUE(back.is_ok()) << dtype_name(dt) << ": " << back.status().to_string();
    EXPECT_EQ(back->dtype(), dt);
    EXPECT_EQ(back->shape(), t.shape());
    ASSERT_EQ(back->nbytes(), t.nbytes());
    EXPECT_EQ(std::memcmp(back->raw_data(), t.raw_data(), t.nbytes()), 0) << dtype_name(dt);
  }
}

TEST(NpyTest, WritesHeaderAlignedTo64Bytes) {
  Tensor t = Tensor::from_vector<int32_t>({1, 2, 3});
  Result<std::vector<uint8_t>> bytes = serialize_npy(t);
  ASSERT_TRUE(bytes.is_ok());
  ASSERT_EQ((bytes->size() - 12) % 64, 0u);
  const std::string text(bytes->begin() + 10, bytes->end() - 12);
  EXPECT_NE(text.find("'descr': '<i4'"), std::string::npos) << text;
  EXPECT_NE(text.find("'shape': (3,)"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(NpyTest, RoundTripsUnicodeStrings) {
  Tensor t = Tensor::from_vector<std::string>({"abc", "", "h\xc3\xa9llo \xe2\x82\xac"});
  Result<std::vector<uint8_t>> bytes = serialize_npy(t);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  const std::string text(bytes->begin(), bytes->end());
  EXPECT_NE(text.find("'<U7'"), std::string::npos);
  Result<Tensor> back = parse_npy(*bytes);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  ASSERT_EQ(back->dtype(), DType::kString);
  EXPECT_EQ(back->data<std::string>()[0], "abc");
  EXPECT_EQ(back->data<std::string>()[1], "");
  EXPECT_EQ(back->data<std::string>()[2], "h\xc3\xa9llo \xe2\x82\xac");
}

TEST(NpyTest, ReadsByteStrings) {
  auto file = make_npy(1, "{'descr': '|S3', 'fortran_order': False, 'shape': (2,)}",
                       {'a', 'b', 'c', 'x', 0, 0});
  Result<Tensor> t = parse_npy(file);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->data<std::string>()[0], "abc");
  EXPECT_EQ(t->data<std::string>()[1], "x");
}

// Found by fuzz_npy: '|S' bytes that are not UTF-8 made a string tensor that
// serialize_npy then refused; an overlong "\xc0\x80" read back as "".
TEST(NpyTest, RejectsByteStringsThatAreNotUtf8) {
  const std::string dict = "{'descr': '|S3', 'fortran_order': False, 'shape': (1,)}";
  for (std::vector<uint8_t> item : {std::vector<uint8_t>{0xff, 'a'}, {0xc0, 0x80}, {0xe0, 0x80, 0x80}, {0xed, 0xa0, 0x80}}) {
    item.resize(3, 0);
    const std::string err = error_of(make_npy(1, dict, item));
    EXPECT_NE(err.find("element 0 of '|S3' is not valid UTF-8"), std::string::npos) << err;
  }
  Result<Tensor> ok = parse_npy(make_npy(1, dict, {0xc3, 0xa9, 0}));
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  Result<std::vector<uint8_t>> bytes = serialize_npy(*ok);
  ASSERT_TRUE(bytes.is_ok());
  Result<Tensor> back = parse_npy(*bytes);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->data<std::string>()[0], "\xc3\xa9");
}

// Found by fuzz_npy: '<U0' read through a null pointer (UBSan), and a
// zero-width dtype let a tiny file claim any number of strings.
TEST(NpyTest, RejectsZeroWidthStrings) {
  for (const char* descr : {"<U0", ">U0", "|S0"}) {
    const std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (3, 5)}";
    EXPECT_NE(error_of(make_npy(1, dict, {})).find("zero-width string dtype"), std::string::npos) << descr;
  }
  EXPECT_NE(error_of(make_npy(1, "{'descr': '|S0', 'fortran_order': False, 'shape': (1000000000000,)}", {}))
                .find("zero-width string dtype '|S0'"),
            std::string::npos);
  Result<Tensor> empty = parse_npy(make_npy(1, "{'descr': '<U0', 'fortran_order': False, 'shape': (0,)}", {}));
  ASSERT_TRUE(empty.is_ok()) << empty.status().to_string();
  EXPECT_EQ(empty->numel(), 0);
}

TEST(NpyTest, NormalizesBoolBytes) {
  auto file = make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}", {0, 1, 2});
  Result<Tensor> t = parse_npy(file);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(static_cast<const uint8_t*>(t->raw_data())[2], 1);
}

TEST(NpyTest, RejectsFortranOrder) {
  auto file = make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}",
                       bytes_of(std::vector<float>{1, 2, 3, 4}));
  EXPECT_NE(error_of(file).find("Fortran-order"), std::string::npos) << error_of(file);
}

TEST(NpyTest, RejectsBigEndian) {
  auto file = make_npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,)}", {0, 0, 0, 0});
  EXPECT_NE(error_of(file).find("big-endian"), std::string::npos) << error_of(file);
  // One-byte types have no byte order; '>i1' is fine.
  auto ok = make_npy(1, "{'descr': '>i1', 'fortran_order': False, 'shape': (1,)}", {5});
  EXPECT_TRUE(parse_npy(ok).is_ok());
}

TEST(NpyTest, RejectsObjectAndStructuredArrays) {
  auto obj = make_npy(1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", {0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_NE(error_of(obj).find("object arrays"), std::string::npos) << error_of(obj);
  auto rec = make_npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", {0, 0, 0, 0});
  EXPECT_NE(error_of(rec).find("structured"), std::string::npos) << error_of(rec);
}

TEST(NpyTest, RejectsTruncatedData) {
  auto file = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
                       bytes_of(std::vector<float>{1, 2, 3}));
  const std::string err = error_of(file);
  EXPECT_NE(err.find("truncated data"), std::string::npos) << err;
  EXPECT_NE(err.find("x.npy"), std::string::npos) << err;
  auto short_header = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", {});
  short_header.resize(20);
  EXPECT_NE(error_of(short_header).find("truncated .npy header"), std::string::npos);
}

TEST(NpyTest, RejectsMalformedHeaders) {
  std::vector<uint8_t> not_npy = {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_NE(error_of(not_npy).find("not a .npy file"), std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'shape': (1,)}", {0, 0, 0, 0})).find("fortran_order"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", {}))
                .find("non-negative"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f3', 'fortran_order': False, 'shape': (1,)}", {0, 0, 0}))
                .find("unsupported dtype '<f3'"),
            std::string::npos);
  EXPECT_NE(error_of(make_npy(4, "{}", {})).find("version 4.0"), std::string::npos);
  EXPECT_NE(error_of(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': "
                                 "(99999999999, 99999999999, 99999999999)}", {}))
                .find("too large"),
            std::string::npos);
}

TEST(NpyTest, QuotesHeaderBytesPrintably) {
  const std::string err = error_of(make_npy(1, "{'k\xd7\x01': 1}", {}));
  EXPECT_EQ(err, "x.npy: unknown header key 'k\\xd7\\x01'");
}

TEST(NpyTest, RefusesToWriteBFloat16) {
  Tensor t = Tensor::zeros(DType::kBFloat16, Shape{2});
  Result<std::vector<uint8_t>> bytes = serialize_npy(t);
  ASSERT_FALSE(bytes.is_ok());
  EXPECT_NE(bytes.status().message().find("bfloat16"), std::string::npos) << bytes.status().message();
}

TEST(NpyTest, ReadsAndWritesFiles) {
  const std::string path = ::testing::TempDir() + "/kiln_npy_test.npy";
  Tensor t = Tensor::from_vector<float>({1.5f, -2.0f}, Shape{1, 2});
  ASSERT_TRUE(write_npy_file(path, t).is_ok());
  Result<Tensor> back = read_npy_file(path);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->shape(), (Shape{1, 2}));
  EXPECT_EQ(back->data<float>()[1], -2.0f);
  std::remove(path.c_str());

  Result<Tensor> missing = read_npy_file(path);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIo);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

}  // namespace
}  // namespace kiln
