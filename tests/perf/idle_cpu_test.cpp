// Kiln's threads use no CPU while a session is idle between runs: the pool's
// workers sleep on a condition variable instead of spinning (ONNX Runtime's
// default pool spins). This is a correctness property, so the bound below is
// generous: a spinning worker burns ~1000 ms of CPU in the idle second, a
// sleeping one ~0.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/session.h"

namespace kiln {
namespace {

constexpr int64_t kRows = 256, kDepth = 256, kCols = 256;

// y = Relu(x @ W + b) with x float32[256, 256]: a MatMul big enough that the
// kernels split it over the pool's threads.
std::string matmul_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("idle_cpu");
  auto io = [](onnx::ValueInfoProto* v, const char* name, int64_t rows, int64_t cols) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(rows);
    t->mutable_shape()->add_dim()->set_dim_value(cols);
  };
  io(g->add_input(), "x", kRows, kDepth);
  io(g->add_output(), "y", kRows, kCols);
  onnx::TensorProto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(kDepth);
  w->add_dims(kCols);
  for (int64_t i = 0; i < kDepth * kCols; ++i) w->add_float_data(static_cast<float>(i % 7) * 0.01f - 0.03f);
  onnx::TensorProto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(kCols);
  for (int64_t i = 0; i < kCols; ++i) b->add_float_data(0.1f);
  auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    for (const std::string& s : in) n->add_input(s);
    n->add_output(out);
  };
  node("MatMul", {"x", "W"}, "xw");
  node("Add", {"xw", "b"}, "s");
  node("Relu", {"s"}, "y");
  return m.SerializeAsString();
}

// CPU time (user + system) of every thread of this process so far.
double process_cpu_ms() {
  rusage u{};
  EXPECT_EQ(getrusage(RUSAGE_SELF, &u), 0);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

// Threads of this process (from /proc/self/status), or -1.
int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

TEST(IdleCpuTest, TwoThreadSessionUsesNoCpuWhileIdle) {
  const int threads_before = thread_count();
  SessionOptions options;
  options.threads = 2;
  const std::string bytes = matmul_model();
  Result<std::unique_ptr<Session>> session = Session::load_from_bytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  // The pool's worker exists, so the idle second below tests something.
  ASSERT_GT(threads_before, 0) << "cannot read Threads: from /proc/self/status";
  ASSERT_GT(thread_count(), threads_before) << "threads = 2 started no worker thread";

  Tensor x = Tensor::allocate(DType::kFloat32, Shape{kRows, kDepth});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  const std::vector<NamedValue> feeds = {{"x", Value(std::move(x))}};
  for (int i = 0; i < 20; ++i) {
    Result<std::vector<Value>> out = (*session)->run(feeds);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(out->size(), 1u);
  }

  const double before = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double idle_cpu = process_cpu_ms() - before;
  EXPECT_LT(idle_cpu, 20.0) << "the process used " << idle_cpu
                            << " ms of CPU in one idle second with a 2-thread session: a pool thread spins";

  // And the session still runs after the idle time (the workers wake up).
  Result<std::vector<Value>> out = (*session)->run(feeds);
  ASSERT_TRUE(out.ok()) << out.status().message();
}

}  // namespace
}  // namespace kiln
