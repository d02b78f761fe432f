// value_constant_info (ABI 1.1): content hashes equal exactly when contents
// are, across models; the ONNX external-data location of a constant read
// from a side file, NULL for one stored in the model; errors for values that
// are not constant.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "abi_test_util.h"
#include "onnx/importer.h"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/host.h"

namespace kiln::abi_test {
namespace {

const kiln_host_api_t& api() { return *runtime::host_api(); }

// The constant named `name` of a view of all of g's nodes, and its info.
struct Info {
  kiln_constant_info_t info{};
  Status status;
};

Info info_of(const kiln_graph_t* view, const char* name) {
  Info r;
  r.info.struct_size = sizeof(r.info);
  const kiln_value_t* v = api().graph_find_value(view, name);
  EXPECT_NE(v, nullptr) << name;
  r.status = runtime::take_status(api().value_constant_info(v, &r.info));
  return r;
}

std::unique_ptr<kiln_graph> view_of(const ir::Graph& g) {
  std::vector<int32_t> all(g.nodes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  return runtime::make_graph_view(g, nullptr, all, {});
}

std::shared_ptr<ir::Graph> add_model(const std::string& cname, Tensor c) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {3});
  ir::ValueId k = b.constant(cname, std::move(c));
  b.output(b.node("Add", {x, k}, "add", {3}));
  return b.graph();
}

bool same(const kiln_constant_info_t& a, const kiln_constant_info_t& b) {
  return a.content_hash[0] == b.content_hash[0] && a.content_hash[1] == b.content_hash[1];
}

TEST(ConstantInfoTest, EqualContentsHashEquallyAcrossModels) {
  auto g1 = add_model("w", Tensor::from_vector<float>({1, 2, 3}));
  auto g2 = add_model("other_name", Tensor::from_vector<float>({1, 2, 3}));
  auto g3 = add_model("w", Tensor::from_vector<float>({1, 2, 4}));
  auto g4 = add_model("w", Tensor::from_vector<int32_t>({1, 2, 3}));
  auto v1 = view_of(*g1), v2 = view_of(*g2), v3 = view_of(*g3), v4 = view_of(*g4);
  Info a = info_of(v1.get(), "w"), b = info_of(v2.get(), "other_name"), c = info_of(v3.get(), "w"),
       d = info_of(v4.get(), "w");
  ASSERT_TRUE(a.status.is_ok()) << a.status.to_string();
  ASSERT_TRUE(b.status.is_ok() && c.status.is_ok() && d.status.is_ok());
  EXPECT_TRUE(same(a.info, b.info));   // the name is not content
  EXPECT_FALSE(same(a.info, c.info));  // one element differs
  EXPECT_FALSE(same(a.info, d.info));  // the dtype differs
  EXPECT_NE(a.info.content_hash[0] | a.info.content_hash[1], 0u);
  EXPECT_EQ(a.info.external_path, nullptr);  // built in memory: no file
  EXPECT_EQ(a.info.external_offset, 0u);
  EXPECT_EQ(a.info.external_length, 0u);

  // Same bytes, other dims: another hash.
  Tensor reshaped = Tensor::from_vector<float>({1, 2, 3, 4}).reshaped(Shape{2, 2});
  auto g5 = add_model("w", Tensor::from_vector<float>({1, 2, 3, 4}));
  auto g6 = add_model("w", reshaped);
  auto v5 = view_of(*g5), v6 = view_of(*g6);
  EXPECT_FALSE(same(info_of(v5.get(), "w").info, info_of(v6.get(), "w").info));
}

TEST(ConstantInfoTest, HashIsComputedOncePerConstantAndShared) {
  auto g = add_model("w", Tensor::from_vector<float>({1, 2, 3}));
  auto shared = std::make_shared<runtime::ConstantHashes>();
  std::vector<int32_t> all{0};
  auto v1 = runtime::make_graph_view(*g, nullptr, all, {}, shared);
  auto v2 = runtime::make_graph_view(*g, nullptr, all, {}, shared);
  Info a = info_of(v1.get(), "w");
  ASSERT_EQ(shared->by_tensor.size(), 1u);
  // A second view over the same constants answers from the cache.
  auto& entry = shared->by_tensor.begin()->second;
  entry[0] ^= 1;  // visible only if the cached words are what is returned
  Info b = info_of(v2.get(), "w");
  EXPECT_EQ(b.info.content_hash[0], a.info.content_hash[0] ^ 1);
  EXPECT_EQ(shared->by_tensor.size(), 1u);
}

TEST(ConstantInfoTest, NonConstantsAndBadArgumentsAreInvalid) {
  auto g = add_model("w", Tensor::from_vector<float>({1, 2, 3}));
  auto v = view_of(*g);
  Info x = info_of(v.get(), "x");
  EXPECT_EQ(x.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(x.status.message().find("'x' is not a constant"), std::string::npos) << x.status.message();
  Info out = info_of(v.get(), "add_out");
  EXPECT_EQ(out.status.code(), StatusCode::kInvalidArgument);
  kiln_constant_info_t info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(runtime::take_status(api().value_constant_info(nullptr, &info)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runtime::take_status(api().value_constant_info(api().graph_find_value(v.get(), "w"), nullptr)).code(),
            StatusCode::kInvalidArgument);
  info.struct_size = 8;  // too small for the hash
  EXPECT_EQ(runtime::take_status(api().value_constant_info(api().graph_find_value(v.get(), "w"), &info)).code(),
            StatusCode::kInvalidArgument);
}

TEST(ConstantInfoTest, AnOlderCallersStructIsWrittenOnlyWithinItsSize) {
  auto g = add_model("w", Tensor::from_vector<float>({1, 2, 3}));
  auto v = view_of(*g);
  struct {
    kiln_constant_info_t info;
    char canary[8];
  } buf;
  std::memset(&buf, 0x5a, sizeof(buf));
  buf.info.struct_size = offsetof(kiln_constant_info_t, external_path);
  ASSERT_EQ(api().value_constant_info(api().graph_find_value(v.get(), "w"), &buf.info), nullptr);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&buf.info);
  for (size_t i = offsetof(kiln_constant_info_t, external_path); i < sizeof(buf); ++i)
    EXPECT_EQ(bytes[i], 0x5a) << "byte " << i << " past struct_size was written";
}

// --- a model saved with external data, written without protobuf ------------

// Protocol-buffer wire format, enough for a small ModelProto.
class Pb {
 public:
  Pb& varint(int field, uint64_t v) {
    key(field, 0);
    put(v);
    return *this;
  }
  Pb& bytes(int field, const std::string& s) {
    key(field, 2);
    put(s.size());
    out_ += s;
    return *this;
  }
  Pb& msg(int field, const Pb& m) { return bytes(field, m.out_); }
  const std::string& str() const { return out_; }

 private:
  void key(int field, int wire) { put(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
  void put(uint64_t v) {
    while (v >= 0x80) {
      out_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    out_ += static_cast<char>(v);
  }
  std::string out_;
};

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// TensorProto: float32 [n], named `name`; in the model (raw_data) or in
// `file` at `offset` (data_location EXTERNAL = 1).
Pb tensor(const std::string& name, size_t n, const std::string& raw, const std::string& file = "",
          uint64_t offset = 0) {
  Pb t;
  t.varint(1, n).varint(2, 1 /* FLOAT */).bytes(8, name);
  if (file.empty()) {
    t.bytes(9, raw);
  } else {
    t.msg(13, Pb().bytes(1, "location").bytes(2, file));
    t.msg(13, Pb().bytes(1, "offset").bytes(2, std::to_string(offset)));
    t.msg(13, Pb().bytes(1, "length").bytes(2, std::to_string(raw.size())));
    t.varint(14, 1);
  }
  return t;
}

Pb value_info(const std::string& name, size_t n) {
  Pb shape;
  shape.msg(1, Pb().varint(1, n));
  Pb tensor_type;
  tensor_type.varint(1, 1).msg(2, shape);
  return Pb().bytes(1, name).msg(2, Pb().msg(1, tensor_type));
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln_constinfo_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(file(name), std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::string path_;
};

TEST(ConstantInfoTest, ExternalDataLocationsComeFromTheImport) {
  TempDir dir;
  // weights.bin: A at offset 0 (64-byte aligned: mapped), B at offset 20
  // (unaligned: copied at import); C stays inside the model.
  const std::string a = floats({1, 2, 3, 4}), b = floats({5, 6, 7, 8}), c = floats({9, 10, 11, 12});
  std::string side = a + std::string(4, '\0') + b;
  dir.write("weights.bin", side);
  Pb graph;
  graph.msg(1, Pb().bytes(1, "X").bytes(1, "A").bytes(2, "S1").bytes(3, "n1").bytes(4, "Add"));
  graph.msg(1, Pb().bytes(1, "S1").bytes(1, "B").bytes(2, "S2").bytes(3, "n2").bytes(4, "Add"));
  graph.msg(1, Pb().bytes(1, "S2").bytes(1, "C").bytes(2, "Y").bytes(3, "n3").bytes(4, "Add"));
  graph.bytes(2, "g");
  graph.msg(5, tensor("A", 4, a, "weights.bin", 0));
  graph.msg(5, tensor("B", 4, b, "weights.bin", 20));
  graph.msg(5, tensor("C", 4, c));
  graph.msg(11, value_info("X", 4));
  graph.msg(12, value_info("Y", 4));
  Pb model;
  model.varint(1, 8).msg(8, Pb().bytes(1, "").varint(2, 17)).msg(7, graph);
  dir.write("model.onnx", model.str());

  auto m = importer::import_model_file(dir.file("model.onnx"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto v = view_of(m->graph);
  const std::string real = std::filesystem::canonical(dir.file("weights.bin")).string();

  Info ia = info_of(v.get(), "A");
  ASSERT_TRUE(ia.status.is_ok()) << ia.status.to_string();
  ASSERT_NE(ia.info.external_path, nullptr);
  EXPECT_EQ(std::string(ia.info.external_path), real);
  EXPECT_EQ(ia.info.external_offset, 0u);
  EXPECT_EQ(ia.info.external_length, 16u);

  Info ib = info_of(v.get(), "B");
  ASSERT_NE(ib.info.external_path, nullptr);
  EXPECT_EQ(std::string(ib.info.external_path), real);
  EXPECT_EQ(ib.info.external_offset, 20u);
  EXPECT_EQ(ib.info.external_length, 16u);
  // The file really holds those bytes there.
  EXPECT_EQ(side.substr(ib.info.external_offset, ib.info.external_length), b);

  Info ic = info_of(v.get(), "C");
  ASSERT_TRUE(ic.status.is_ok());
  EXPECT_EQ(ic.info.external_path, nullptr);
  EXPECT_EQ(ic.info.external_length, 0u);

  // The hash does not depend on where the bytes live: C imported with A's
  // contents from the model hashes as A does.
  auto same_as_a = add_model("w", Tensor::from_vector<float>({1, 2, 3, 4}));
  auto vs = view_of(*same_as_a);
  EXPECT_TRUE(same(info_of(vs.get(), "w").info, ia.info));
  EXPECT_FALSE(same(ia.info, ib.info));
}

TEST(ConstantInfoTest, AConstantRewrittenAfterImportHasNoFileLocation) {
  auto g = add_model("w", Tensor::from_vector<float>({1, 2, 3}));
  ir::ValueId w = g->find_value("w");
  // Recorded as if imported from a file, but the bytes are not those any more.
  g->external_data[w] = ir::ExternalLocation{"/nowhere/w.bin", 0, 12, nullptr, false};
  auto v = view_of(*g);
  EXPECT_EQ(info_of(v.get(), "w").info.external_path, nullptr);
  g->external_data[w].data = g->initializer(w)->raw_data();
  auto v2 = view_of(*g);
  ASSERT_NE(info_of(v2.get(), "w").info.external_path, nullptr);
  EXPECT_STREQ(info_of(v2.get(), "w").info.external_path, "/nowhere/w.bin");
}

}  // namespace
}  // namespace kiln::abi_test
