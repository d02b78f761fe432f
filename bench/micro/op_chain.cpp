#include "op_chain.h"

#include <onnx/onnx_pb.h>

#include <random>

namespace kiln::bench {

namespace {

void float_io(onnx::ValueInfoProto* v, const std::string& name, int width) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_value(1);
  t->mutable_shape()->add_dim()->set_dim_value(width);
}

void constant(onnx::GraphProto* g, const std::string& name, int width, float lo, float hi, std::mt19937* rng) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(1);
  t->add_dims(width);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int i = 0; i < width; ++i) t->add_float_data(dist(*rng));
}

void binary(onnx::GraphProto* g, const char* op, const std::string& name, const std::string& a,
            const std::string& b, const std::string& out) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  n->add_input(a);
  n->add_input(b);
  n->add_output(out);
}

}  // namespace

std::string op_chain_model(int pairs, int width) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("kiln bench/micro");
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("op_chain_" + std::to_string(2 * pairs));
  float_io(g->add_input(), "input", width);
  float_io(g->add_output(), "output", width);
  std::mt19937 rng(0);
  std::string current = "input";
  for (int i = 0; i < pairs; ++i) {
    const std::string s = std::to_string(i);
    constant(g, "add_" + s + ".b", width, -0.01f, 0.01f, &rng);
    constant(g, "mul_" + s + ".b", width, 0.99f, 1.01f, &rng);
    binary(g, "Add", "add_" + s, current, "add_" + s + ".b", "add_" + s);
    const std::string out = i == pairs - 1 ? "output" : "mul_" + s;
    binary(g, "Mul", "mul_" + s, "add_" + s, "mul_" + s + ".b", out);
    current = out;
  }
  return m.SerializeAsString();
}

}  // namespace kiln::bench
