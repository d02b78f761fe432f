#include "concurrency_models.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <vector>

namespace kiln::testing {
namespace {

void tensor_io(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

// Deterministic weights in [-scale, scale) (a 32-bit LCG).
void weights(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims, float scale,
             uint32_t seed) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  uint32_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    t->add_float_data(scale * (static_cast<float>(s >> 8) / 8388608.f - 1.f));
  }
}

onnx::NodeProto* node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out + "_" + op);
  for (auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

void conv_attrs(onnx::NodeProto* n) {
  auto* k = n->add_attribute();
  k->set_name("kernel_shape");
  k->set_type(onnx::AttributeProto::INTS);
  k->add_ints(3);
  k->add_ints(3);
  auto* p = n->add_attribute();
  p->set_name("pads");
  p->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) p->add_ints(1);
}

}  // namespace

std::string conv_matmul_model_bytes() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("conv_matmul");
  tensor_io(g->add_input(), "x", {2, 2, 8, 8});
  tensor_io(g->add_output(), "y", {2, 10});
  weights(g, "w1", {4, 2, 3, 3}, 0.5f, 1);
  weights(g, "b1", {4}, 0.1f, 2);
  weights(g, "w2", {4, 4, 3, 3}, 0.3f, 3);
  weights(g, "w3", {256, 16}, 0.1f, 4);
  weights(g, "b3", {16}, 0.1f, 5);
  weights(g, "w4", {16, 10}, 0.3f, 6);
  weights(g, "s4", {10}, 1.f, 7);
  conv_attrs(node(g, "Conv", {"x", "w1", "b1"}, "c1"));
  node(g, "Relu", {"c1"}, "r1");
  conv_attrs(node(g, "Conv", {"r1", "w2"}, "c2"));
  node(g, "Add", {"c2", "r1"}, "a2");
  node(g, "Flatten", {"a2"}, "f");
  node(g, "MatMul", {"f", "w3"}, "m3");
  node(g, "Add", {"m3", "b3"}, "a3");
  node(g, "Relu", {"a3"}, "r3");
  node(g, "MatMul", {"r3", "w4"}, "m4");
  node(g, "Mul", {"m4", "s4"}, "y");
  return m.SerializeAsString();
}

}  // namespace kiln::testing
