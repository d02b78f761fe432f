// Session tests over small ONNX models built in memory with the ONNX protobuf
// API: loading errors, input validation messages, runs, concurrency.
#include "kiln/session.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace kiln {
namespace {

void add_tensor_io(onnx::ValueInfoProto* v, const std::string& name, int elem, std::vector<int64_t> dims,
                   std::vector<std::string> params = {}) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem);
  auto* shape = t->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = shape->add_dim();
    if (i < params.size() && !params[i].empty()) d->set_dim_param(params[i]);
    else d->set_dim_value(dims[i]);
  }
}

// z = Relu(x + y), x and y float32[N, 3].
std::string add_relu_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("add_relu");
  add_tensor_io(g->add_input(), "x", onnx::TensorProto::FLOAT, {-1, 3}, {"N"});
  add_tensor_io(g->add_input(), "y", onnx::TensorProto::FLOAT, {-1, 3}, {"N"});
  add_tensor_io(g->add_output(), "z", onnx::TensorProto::FLOAT, {-1, 3}, {"N"});
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("the_add");
  add->add_input("x");
  add->add_input("y");
  add->add_output("s");
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("s");
  relu->add_output("z");
  return m.SerializeAsString();
}

Result<std::unique_ptr<Session>> load(const std::string& bytes, SessionOptions o = {}) {
  return Session::load_from_bytes(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), o);
}

Tensor filled(Shape s, float start) {
  Tensor t = Tensor::allocate(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

TEST(SessionTest, ListsInputsAndOutputs) {
  auto s = load(add_relu_model());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_EQ((*s)->inputs().size(), 2u);
  EXPECT_EQ((*s)->inputs()[0].name, "x");
  EXPECT_EQ((*s)->inputs()[0].dtype, DType::kFloat32);
  EXPECT_EQ((*s)->inputs()[0].dims, (std::vector<int64_t>{-1, 3}));
  EXPECT_EQ((*s)->inputs()[0].dim_params[0], "N");
  EXPECT_EQ((*s)->inputs()[0].type_string, "float32[N, 3]");
  EXPECT_EQ((*s)->outputs()[0].name, "z");
}

TEST(SessionTest, RunsWithDynamicBatch) {
  auto s = load(add_relu_model());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  for (int64_t n : {1, 4, 2}) {
    auto out = (*s)->run({{"x", filled({n, 3}, -5.f)}, {"y", filled({n, 3}, 0.f)}});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    const Tensor& z = (*out)[0].tensor();
    ASSERT_EQ(z.shape(), (Shape{n, 3}));
    for (int64_t i = 0; i < z.numel(); ++i) EXPECT_FLOAT_EQ(z.data<float>()[i], std::max(0.f, 2.f * i - 5.f));
  }
}

TEST(SessionTest, BadInputsNameTheProblem) {
  auto s = load(add_relu_model());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto expect_error = [&](std::vector<NamedValue> in, const std::string& needle) {
    auto out = (*s)->run(in);
    ASSERT_FALSE(out.is_ok()) << "expected an error containing: " << needle;
    EXPECT_NE(out.status().message().find(needle), std::string::npos) << out.status().message();
  };
  Tensor ok = filled({2, 3}, 0.f);
  expect_error({{"x", ok}}, "missing input 'y' (float32[N, 3])");
  expect_error({{"x", ok}, {"y", ok}, {"w", ok}}, "unknown input 'w'; the model's inputs are 'x', 'y'");
  expect_error({{"x", ok}, {"x", ok}}, "input 'x' is given more than once");
  expect_error({{"x", Tensor::zeros(DType::kInt64, Shape{2, 3})}, {"y", ok}},
               "input 'x' has dtype int64, expected float32");
  expect_error({{"x", filled({2, 4}, 0.f)}, {"y", ok}}, "input 'x' has shape [2, 4], expected float32[N, 3]");
  expect_error({{"x", filled({6}, 0.f)}, {"y", ok}}, "input 'x' has shape [6], expected float32[N, 3]");
  // Dims that agree with the model but not with each other fail in the node.
  expect_error({{"x", filled({2, 3}, 0.f)}, {"y", filled({3, 3}, 0.f)}}, "the_add");
}

TEST(SessionTest, MalformedModelsAreErrors) {
  auto missing = Session::load("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.onnx"), std::string::npos);
  auto garbage = load("this is not an onnx model at all");
  ASSERT_FALSE(garbage.is_ok());
  std::string bytes = add_relu_model();
  auto truncated = load(bytes.substr(0, bytes.size() / 2));
  ASSERT_FALSE(truncated.is_ok());
}

// Run control through the public API: a set cancel flag or a passed deadline
// stops the run with its own code; otherwise RunOptions changes nothing.
TEST(SessionTest, RunOptionsCancelAndDeadline) {
  auto s = load(add_relu_model());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  std::vector<NamedValue> feeds{{"x", Value(filled(Shape({2, 3}), -3))}, {"y", Value(filled(Shape({2, 3}), 0))}};
  std::atomic<bool> cancel{false};
  RunOptions options;
  options.cancel = &cancel;
  auto ok = (*s)->run(feeds, options);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok.value()[0].tensor().data<float>()[5], 7.f);
  cancel = true;
  auto cancelled = (*s)->run(feeds, options);
  EXPECT_EQ(cancelled.status().code(), StatusCode::kCancelled);
  EXPECT_NE(cancelled.status().message().find("before node Add 'the_add'"), std::string::npos)
      << cancelled.status().message();
  cancel = false;
  options.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto late = (*s)->run(feeds, options);
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_STREQ(status_code_name(StatusCode::kDeadlineExceeded), "deadline exceeded");
}

TEST(SessionTest, ConcurrentRunsAgree) {
  SessionOptions o;
  o.threads = 2;
  auto s = load(add_relu_model(), o);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 50; ++r) {
        auto out = (*s)->run({{"x", filled({5, 3}, static_cast<float>(t))}, {"y", filled({5, 3}, 0.f)}});
        if (!out.is_ok()) {
          ++bad;
          continue;
        }
        for (int64_t i = 0; i < 15; ++i)
          if ((*out)[0].tensor().data<float>()[i] != static_cast<float>(t + 2 * i)) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(SessionTest, ProfileHasOneEventPerNode) {
  auto s = load(add_relu_model());
  ASSERT_TRUE(s.is_ok());
  std::vector<NamedValue> in = {{"x", filled({2, 3}, 0.f)}, {"y", filled({2, 3}, 0.f)}};
  RunProfile profile;
  auto out = (*s)->run(in, &profile);
  ASSERT_TRUE(out.is_ok());
  ASSERT_EQ(profile.events.size(), 2u);
  EXPECT_EQ(profile.events[0].name, "the_add");
  EXPECT_EQ(profile.events[1].op_type, "Relu");
}

}  // namespace
}  // namespace kiln
