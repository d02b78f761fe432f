// The oneDNN plugin's run-time behaviour: OpenMP workers sleep between runs
// (a variant of tests/perf/idle_cpu_test.cpp with the plugin in use), and
// exported blobs record the oneDNN version and ISA and refuse a mismatch.
#include <sys/resource.h>

#include <chrono>
#include <thread>

#include "kiln/c/backend_sdk.hpp"
#include "onednn_program.h"
#include "onednn_test_util.h"

namespace kiln::onednn_test {
namespace {

double process_cpu_ms() {
  rusage u{};
  EXPECT_EQ(getrusage(RUSAGE_SELF, &u), 0);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

TEST(OnednnIdleCpu, TwoThreadSessionOnThePluginUsesNoCpuWhileIdle) {
  Model m;
  m.input("x", {1, 32, 28, 28});
  m.init("W", {32, 32, 3, 3}, -0.1f, 0.1f);
  Model::ints(m.node("Conv", {"x", "W"}, "y"), "pads", {1, 1, 1, 1});
  m.node("Relu", {"y"}, "z");
  m.init("W2", {32, 64});
  m.init_ints("shape", {32, 784});
  m.node("Reshape", {"z", "shape"}, "r");
  auto* t = m.node("Transpose", {"r"}, "rt");
  Model::ints(t, "perm", {1, 0});
  m.node("MatMul", {"rt", "W2"}, "out");
  m.output("out");
  auto s = load(m.bytes(), true, 2);
  ASSERT_TRUE(s.ok()) << s.status().message();
  std::vector<NamedValue> in = feeds(m);
  for (int i = 0; i < 20; ++i) {
    auto out = (*s)->run(in);
    ASSERT_TRUE(out.ok()) << out.status().message();
  }
  const double before = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double idle = process_cpu_ms() - before;
  EXPECT_LT(idle, 20.0) << "the process used " << idle << " ms of CPU in one idle second after oneDNN runs: an OpenMP worker spins";
  auto out = (*s)->run(in);
  ASSERT_TRUE(out.ok()) << out.status().message();
}

kiln_onednn::Program tiny_program() {
  kiln_onednn::Program p;
  p.onednn_version = "2.6.3";
  p.isa = "avx512_core";
  p.num_values = 2;
  p.dims = {{2, 3}, {2, 3}};
  p.inputs = {0};
  kiln_onednn::Op op;
  op.kind = kiln_onednn::OpKind::kEltwise;
  op.alg = 0x1f;  // dnnl_eltwise_relu
  op.in = {0};
  op.out = 1;
  op.floats = {0.f, 0.f};
  p.ops.push_back(op);
  p.outputs = {1};
  return p;
}

TEST(OnednnExport, BlobRecordsVersionAndIsaAndRefusesAMismatch) {
  const std::vector<uint8_t> bytes = tiny_program().serialize();
  kiln_onednn::Program q = kiln_onednn::Program::parse(bytes.data(), bytes.size());
  EXPECT_EQ(q.onednn_version, "2.6.3");
  EXPECT_EQ(q.isa, "avx512_core");
  EXPECT_EQ(kiln_onednn::target_mismatch(q, "2.6.3", "avx512_core"), "");
  EXPECT_EQ(kiln_onednn::target_mismatch(q, "2.7.0", "avx512_core"),
            "compiled partition was built for oneDNN 2.6.3 on avx512_core; this machine has oneDNN 2.7.0 on avx512_core");
  EXPECT_NE(kiln_onednn::target_mismatch(q, "2.6.3", "avx2").find("this machine has oneDNN 2.6.3 on avx2"), std::string::npos);
}

TEST(OnednnExport, CorruptBlobsAreRefusedWithAReason) {
  std::vector<uint8_t> bytes = tiny_program().serialize();
  auto refuse = [](const std::vector<uint8_t>& b, const std::string& why) {
    try {
      kiln_onednn::Program::parse(b.data(), b.size());
      ADD_FAILURE() << "parsed a bad blob (" << why << ")";
    } catch (const ::kiln::sdk::Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  std::vector<uint8_t> flipped = bytes;
  flipped[20] ^= 1;
  refuse(flipped, "checksum");
  refuse(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 8), "bad magic or too short");
  kiln_onednn::Program bad = tiny_program();
  bad.ops[0].in = {1};  // reads its own output
  try {
    bad.validate();
    ADD_FAILURE() << "validated a program that reads a value before defining it";
  } catch (const ::kiln::sdk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("before it is defined"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::onednn_test
