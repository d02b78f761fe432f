// A .kiln program's stored memory plan and packed weights are used at load
// and give the ONNX path's outputs.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>

#include "api/program_session.h"
#include "kiln/program.h"
#include "kiln/session.h"

namespace kiln {
namespace {

// z = Relu(MatMul(x, W)) + x, x float32[2, 4], W a constant.
std::string write_model(const std::string& path) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("mlp");
  for (const char* name : {"x", "z"}) {
    auto* v = std::string(name) == "x" ? g->add_input() : g->add_output();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(2);
    t->mutable_shape()->add_dim()->set_dim_value(4);
  }
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(4);
  for (int i = 0; i < 16; ++i) w->add_float_data(static_cast<float>(i % 5) * 0.25f - 0.5f);
  auto node = [&](const char* op, std::vector<std::string> in, const char* out) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
  };
  node("MatMul", {"x", "W"}, "h");
  node("Relu", {"h"}, "r");
  node("Add", {"r", "x"}, "z");
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

TEST(ProgramSession, UsesTheStoredPlanAndMatchesOnnx) {
  const std::string dir = ::testing::TempDir();
  const std::string model = write_model(dir + "/plan_mlp.onnx");
  SessionOptions o;
  o.backends = {"portable"};
  auto summary = compile_program(model, dir + "/plan_mlp.kiln", o);
  ASSERT_TRUE(summary.is_ok()) << summary.status().message();
  EXPECT_TRUE(summary->has_memory_plan);
  EXPECT_GT(summary->arena_bytes, 0u);
  EXPECT_EQ(summary->num_packed, 1u);  // MatMul's W

  auto prog = api::load_program_session(dir + "/plan_mlp.kiln", o);
  ASSERT_TRUE(prog.is_ok()) << prog.status().message();
  EXPECT_TRUE(api::session_program(**prog).used_stored_plan());
  auto onnx = Session::load(model, o);
  ASSERT_TRUE(onnx.is_ok());
  EXPECT_FALSE(api::session_program(**onnx).used_stored_plan());

  Tensor x = Tensor::allocate(DType::kFloat32, Shape{2, 4});
  for (int i = 0; i < 8; ++i) x.data<float>()[i] = static_cast<float>(i) * 0.3f - 1.f;
  const std::vector<NamedValue> in = {{"x", Value(x)}};
  auto a = (*prog)->run(in);
  auto b = (*onnx)->run(in);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const Tensor& ta = (*a)[0].tensor();
  const Tensor& tb = (*b)[0].tensor();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(ta.data<float>()[i], tb.data<float>()[i]) << i;
}

}  // namespace
}  // namespace kiln
