// The hostile-input table (docs/security.md): one test per kind of broken or
// malicious model. Each case runs in a child process under an address-space
// cap (plain builds) and reports its peak RSS (every build), so a case that
// crashes, hangs or allocates gigabytes fails here instead of taking the
// suite down; a refused model must give one line that names the problem.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/child_process.h"
#include "kiln/session.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_HOSTILE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KILN_HOSTILE_SANITIZED 1
#endif
#endif

namespace kiln {
namespace {

namespace fs = std::filesystem;

constexpr long kMaxPeakRssKb = 1L << 20;  // 1 GiB: a case that needs more is a failure

// What a case did in its child.
struct Outcome {
  bool exited_cleanly = false;
  std::string how;      // how the child ended, for messages
  bool ok = false;      // the body's status
  std::string message;  // its message when not ok
  long peak_rss_kb = 0;
};

#ifndef KILN_HOSTILE_SANITIZED
constexpr size_t kCapBytes = size_t{2} << 30;  // address space beyond what the child already maps

size_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}
#endif

Outcome in_child(const std::function<Status()>& body) {
  auto r = run_in_child(
      [&](int fd) {
#ifndef KILN_HOSTILE_SANITIZED
        // Sanitizers reserve terabytes of shadow memory: no cap there (the
        // peak RSS check still applies, and ASan refuses absurd sizes itself).
        const rlim_t cap = mapped_bytes() + kCapBytes;
        struct rlimit rl = {cap, cap};
        ::setrlimit(RLIMIT_AS, &rl);
#endif
        Status st = body();
        struct rusage u{};
        ::getrusage(RUSAGE_SELF, &u);
        std::string out = std::to_string(u.ru_maxrss) + "\n" + (st.is_ok() ? std::string("OK") : st.message());
        return write_all(fd, out) ? 0 : 1;
      },
      300);
  Outcome o;
  if (!r.is_ok()) {
    o.how = r.status().to_string();
    return o;
  }
  o.exited_cleanly = r->exited_cleanly();
  o.how = r->describe(300);
  const size_t nl = r->output.find('\n');
  if (nl == std::string::npos) return o;
  o.peak_rss_kb = std::atol(r->output.substr(0, nl).c_str());
  const std::string rest = r->output.substr(nl + 1);
  o.ok = rest == "OK";
  if (!o.ok) o.message = rest;
  return o;
}

void expect_refused(const Outcome& o, const std::string& text) {
  std::printf("refused (peak RSS %ld KB): %s\n", o.peak_rss_kb, o.message.c_str());
  ASSERT_TRUE(o.exited_cleanly) << "the child did not survive: " << o.how;
  EXPECT_FALSE(o.ok) << "expected an error containing: " << text;
  EXPECT_NE(o.message.find(text), std::string::npos) << "message: " << o.message << "\nexpected: " << text;
  EXPECT_EQ(o.message.find('\n'), std::string::npos) << "not one line: " << o.message;
  EXPECT_LT(o.peak_rss_kb, kMaxPeakRssKb) << "peak RSS " << o.peak_rss_kb << " KB";
}

void expect_runs(const Outcome& o) {
  ASSERT_TRUE(o.exited_cleanly) << "the child did not survive: " << o.how;
  EXPECT_TRUE(o.ok) << o.message;
  EXPECT_LT(o.peak_rss_kb, kMaxPeakRssKb) << "peak RSS " << o.peak_rss_kb << " KB";
}

onnx::ModelProto parse(const char* text) {
  onnx::ModelProto m;
  auto s = onnx::OnnxParser::Parse(m, text);
  EXPECT_TRUE(s.IsOK()) << s.ErrorMessage();
  return m;
}

std::string bytes_of(const onnx::ModelProto& m) { return m.SerializeAsString(); }

Tensor filled(Shape s, float v) {
  Tensor t = Tensor::allocate(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
  return t;
}

// Loads `bytes` (external data from `base_dir`) and, if `inputs` are given, runs once.
Status load_and_run(const std::string& bytes, std::vector<NamedValue> inputs = {}, const std::string& base_dir = "") {
  SessionOptions o;
  o.backends = {"portable"};
  auto s = Session::load_from_bytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), o, base_dir);
  if (!s.is_ok()) return std::move(s).status();
  if (inputs.empty()) return Status::ok();
  auto out = (*s)->run(inputs);
  return out.is_ok() ? Status::ok() : std::move(out).status();
}

Outcome load_text(const char* text) {
  const std::string bytes = bytes_of(parse(text));
  return in_child([&] { return load_and_run(bytes); });
}

// A fresh folder, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln_hostile_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(HostileInputTest, GraphWithACycle) {
  expect_refused(load_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) {
  A = Add(X, B)
  B = Relu(A)
  Y = Relu(A)
}
)"), "graph has a cycle through node Add");
}

TEST(HostileInputTest, DanglingValueName) {
  expect_refused(load_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) {
  Y = Add(X, Nowhere)
}
)"), "node Add: input 1 reads 'Nowhere', which no node output, graph input or initializer defines");
}

TEST(HostileInputTest, NodeWithTooFewInputs) {
  expect_refused(load_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) {
  Y = Add(X)
}
)"), "node Add has 1 inputs; Add-14 takes 2 to 2");
}

TEST(HostileInputTest, AttributeOfTheWrongType) {
  expect_refused(load_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] X) => (float[2, 3] Y) {
  Y = Flatten <axis = 1.5> (X)
}
)"), "attribute 'axis' has type FLOAT, expected INT");
}

TEST(HostileInputTest, AttributeOutOfRange) {
  const std::string bytes = bytes_of(parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] X) => (float[2, 3] Y) {
  Y = Flatten <axis = 9> (X)
}
)"));
  expect_refused(in_child([&] { return load_and_run(bytes, {{"X", filled({2, 3}, 1.f)}}); }),
                 "node Flatten: axis 9 is out of range for rank 2");
}

TEST(HostileInputTest, DimsWhoseProductOverflowsSizeT) {
  // Folded at load: ConstantOfShape would make 2^96 elements.
  expect_refused(load_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) {
  S = Constant <value = int64[3] {4294967296, 4294967296, 4294967296}> ()
  Z = ConstantOfShape(S)
  Y = Relu(X)
  W = Relu(Z)
}
)"), "node ConstantOfShape: output shape [4294967296, 4294967296, 4294967296] has too many elements");
}

TEST(HostileInputTest, InitializerDimsWhoseProductOverflowsSizeT) {
  onnx::ModelProto m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) {
  Y = Add(X, W)
}
)");
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 3; ++i) w->add_dims(int64_t{1} << 40);
  const std::string bytes = bytes_of(m);
  expect_refused(in_child([&] { return load_and_run(bytes); }),
                 "tensor 'W' has dims [1099511627776, 1099511627776, 1099511627776] whose element count is too large");
}

TEST(HostileInputTest, TensorClaimingGigabytesInATinyFile) {
  onnx::ModelProto m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) {
  Y = Add(X, W)
}
)");
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(int64_t{1} << 30);  // 4 GiB of float32
  w->set_raw_data(std::string(4, '\0'));
  const std::string bytes = bytes_of(m);
  expect_refused(in_child([&] { return load_and_run(bytes); }),
                 "tensor 'W' has raw_data of 4 bytes, but dims [1073741824] of FLOAT need 4294967296 bytes");
}

TEST(HostileInputTest, ExternalTensorClaimingGigabytesInATinyFile) {
  TempDir dir;
  std::ofstream(dir.path() + "/w.bin") << "0123456789abcdef";
  onnx::ModelProto m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) {
  Y = Add(X, W)
}
)");
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(int64_t{1} << 30);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  const std::string bytes = bytes_of(m);
  expect_refused(in_child([&] { return load_and_run(bytes, {}, dir.path()); }),
                 "is too short for tensor 'W': it has 16 bytes");
}

// A model whose initializer W lives at external `location`, loaded from `dir`.
Outcome with_external_location(const std::string& dir, const std::string& location) {
  onnx::ModelProto m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) {
  Y = Add(X, W)
}
)");
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  const std::string bytes = bytes_of(m);
  return in_child([&] { return load_and_run(bytes, {}, dir); });
}

TEST(HostileInputTest, ExternalDataEscapingTheModelFolder) {
  TempDir dir;
  TempDir outside;
  std::ofstream(outside.path() + "/secret.bin") << "01234567";
  expect_refused(with_external_location(dir.path(), "../../etc/passwd"), "must be a relative path inside");
  expect_refused(with_external_location(dir.path(), "/etc/passwd"), "must be a relative path inside");
  // A symlink inside the folder that points out of it, to a file or a folder.
  fs::create_symlink(outside.path() + "/secret.bin", dir.path() + "/link.bin");
  expect_refused(with_external_location(dir.path(), "link.bin"), "leaves the model's folder");
  fs::create_directory_symlink(outside.path(), dir.path() + "/sub");
  expect_refused(with_external_location(dir.path(), "sub/secret.bin"), "leaves the model's folder");
  // The same bytes in the folder itself load.
  std::ofstream(dir.path() + "/inside.bin") << "01234567";
  expect_runs(with_external_location(dir.path(), "inside.bin"));
}

TEST(HostileInputTest, InputsWithNanAndInf) {
  const std::string bytes = bytes_of(parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] X) => (int64[2] A, int32[2, 4] I, uint8[2, 4] U, float[2, 4] S, float[2] M, int64[2, 1] K) {
  S = Softmax(X)
  A = ArgMax <axis = 1, keepdims = 0> (S)
  I = Cast <to = 6> (X)
  U = Cast <to = 2> (X)
  M = ReduceMax <axes = [1], keepdims = 0> (X)
  two = Constant <value = int64[1] {1}> ()
  V, K = TopK <axis = 1> (X, two)
}
)"));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {nan, inf, -inf, 1.f, nan, nan, -inf, inf};
  expect_runs(in_child([&] {
    Tensor x = Tensor::allocate(DType::kFloat32, {2, 4});
    for (size_t i = 0; i < values.size(); ++i) x.data<float>()[i] = values[i];
    return load_and_run(bytes, {{"X", x}});
  }));
}

TEST(HostileInputTest, ZeroSizeDims) {
  const std::string bytes = bytes_of(parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3] X, float[B, 2, 4, 4] C) => (float[N, 4] Y, float[1, 4] R, float[B, 3, 4, 4] O, float[N, 3] S) {
  W = Constant <value = float[3, 4] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}> ()
  M = MatMul(X, W)
  Y = Relu(M)
  R = ReduceSum <keepdims = 1> (Y, zero)
  zero = Constant <value = int64[1] {0}> ()
  K = Constant <value = float[3, 2, 3, 3] {1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,
                                          1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1}> ()
  O = Conv <pads = [1, 1, 1, 1]> (C, K)
  S = Softmax(X)
}
)"));
  expect_runs(in_child([&] {
    return load_and_run(bytes, {{"X", filled({0, 3}, 1.f)}, {"C", filled({0, 2, 4, 4}, 1.f)}});
  }));
}

// x -> If(c) { If(c) { ... Identity(x) ... } } else { Identity(x) }, `depth` Ifs deep.
std::string nested_if_model(int depth) {
  onnx::ModelProto m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[2] x) => (float[2] y) {
  y = Identity(x)
}
)");
  auto leaf = [](const std::string& out) {
    onnx::GraphProto g;
    g.set_name("leaf");
    auto* n = g.add_node();
    n->set_op_type("Identity");
    n->add_input("x");
    n->add_output(out);
    auto* o = g.add_output();
    o->set_name(out);
    auto* t = o->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(2);
    return g;
  };
  onnx::GraphProto inner = leaf("v0");
  for (int d = 1; d <= depth; ++d) {
    onnx::GraphProto g = leaf("e" + std::to_string(d));
    g.clear_node();
    g.set_name("level" + std::to_string(d));
    g.mutable_output(0)->set_name("v" + std::to_string(d));
    auto* n = g.add_node();
    n->set_op_type("If");
    n->add_input("c");
    n->add_output("v" + std::to_string(d));
    auto* then_attr = n->add_attribute();
    then_attr->set_name("then_branch");
    then_attr->set_type(onnx::AttributeProto::GRAPH);
    *then_attr->mutable_g() = inner;
    auto* else_attr = n->add_attribute();
    else_attr->set_name("else_branch");
    else_attr->set_type(onnx::AttributeProto::GRAPH);
    *else_attr->mutable_g() = leaf("w" + std::to_string(d));
    inner = std::move(g);
  }
  // The main graph's node is the outermost If.
  auto* main = m.mutable_graph();
  main->clear_node();
  *main->add_node() = inner.node(0);
  main->mutable_node(0)->set_output(0, "y");
  return bytes_of(m);
}

TEST(HostileInputTest, SubgraphsNestedDeeperThanTheLimit) {
  const std::string deep = nested_if_model(200);
  expect_refused(in_child([&] { return load_and_run(deep); }), "nested more than 16 deep");
  // A sane depth loads and runs.
  const std::string fine = nested_if_model(8);
  expect_runs(in_child([&] {
    Tensor c = Tensor::allocate(DType::kBool, {});
    c.data<bool>()[0] = true;
    return load_and_run(fine, {{"c", c}, {"x", filled({2}, 3.f)}});
  }));
}

TEST(HostileInputTest, ProtobufLargerThan2GiB) {
  // A sparse file: 2 GiB + 8 bytes long, a few KB on disk. Its size alone
  // is refused (before the bytes are read or mapped).
  TempDir dir;
  const std::string path = dir.path() + "/huge.onnx";
  {
    std::ofstream f(path, std::ios::binary);
    f << std::string(bytes_of(parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (float[2] Y) { Y = Relu(X) }
)")));
  }
  fs::resize_file(path, (uintmax_t{1} << 31) + 8);
  expect_refused(in_child([&] {
    SessionOptions o;
    o.backends = {"portable"};
    auto s = Session::load(path, o);
    return s.is_ok() ? Status::ok() : std::move(s).status();
  }), "protobuf cannot parse more than 2 GiB");
}

}  // namespace
}  // namespace kiln
