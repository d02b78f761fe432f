// Small ONNX models built in code, run through the oneDNN plugin (every node
// required on it) and through portable kernels, and compared.
#pragma once

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kiln/session.h"

namespace kiln::onednn_test {

class Model {
 public:
  explicit Model(int64_t opset = 13) {
    m_.set_ir_version(8);
    m_.add_opset_import()->set_version(opset);
    g_ = m_.mutable_graph();
    g_->set_name("onednn_test");
  }
  void input(const std::string& name, const std::vector<int64_t>& dims) {
    auto* v = g_->add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
    inputs_.emplace_back(name, dims);
  }
  void output(const std::string& name) {
    auto* v = g_->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  // A float initializer with deterministic pseudo-random values in [lo, hi).
  void init(const std::string& name, const std::vector<int64_t>& dims, float lo = -1.f, float hi = 1.f) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    for (int64_t i = 0; i < n; ++i) t->add_float_data(lo + (hi - lo) * next());
  }
  void init_values(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float f : values) t->add_float_data(f);
  }
  void init_ints(const std::string& name, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::string& out) {
    onnx::NodeProto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (const std::string& s : in) n->add_input(s);
    n->add_output(out);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void i(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void f(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  std::string bytes() const { return m_.SerializeAsString(); }
  const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs() const { return inputs_; }
  float next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((state_ >> 40) & 0xffffff) / 16777216.f;
  }

 private:
  onnx::ModelProto m_;
  onnx::GraphProto* g_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputs_;
  uint64_t state_ = 12345;
};

inline std::string plugin_path() { return KILN_ONEDNN_PLUGIN; }

inline Result<std::unique_ptr<Session>> load(const std::string& bytes, bool onednn, int threads = 1,
                                             std::vector<BackendOption> options = {}) {
  SessionOptions o;
  o.threads = threads;
  if (onednn) {
    o.backends = {"onednn"};
    o.backend_paths = {plugin_path()};
    o.fallback = FallbackPolicy::kRequire;
    o.backend_options = std::move(options);
  } else {
    o.backends = {"portable"};
  }
  return Session::load_from_bytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), o);
}

inline std::vector<NamedValue> feeds(Model& m) {
  std::vector<NamedValue> f;
  for (const auto& [name, dims] : m.inputs()) {
    Tensor t = Tensor::allocate(DType::kFloat32, Shape(dims));
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = m.next() * 2.f - 1.f;
    f.emplace_back(name, Value(std::move(t)));
  }
  return f;
}

/// Runs `m` on the plugin (all nodes required there) and on portable kernels;
/// expects every output within tol * max(1, max|portable|).
inline void expect_matches_portable(Model& m, float tol = 1e-4f, int threads = 1, std::vector<BackendOption> options = {}) {
  const std::string bytes = m.bytes();
  auto a = load(bytes, true, threads, std::move(options));
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = load(bytes, false);
  ASSERT_TRUE(b.ok()) << b.status().message();
  std::vector<NamedValue> in = feeds(m);
  auto ya = (*a)->run(in);
  ASSERT_TRUE(ya.ok()) << ya.status().message();
  auto yb = (*b)->run(in);
  ASSERT_TRUE(yb.ok()) << yb.status().message();
  ASSERT_EQ(ya->size(), yb->size());
  for (size_t k = 0; k < ya->size(); ++k) {
    const Tensor& ta = (*ya)[k].tensor();
    const Tensor& tb = (*yb)[k].tensor();
    ASSERT_EQ(ta.shape(), tb.shape()) << "output " << k;
    float scale = 1.f, worst = 0.f;
    for (int64_t i = 0; i < tb.numel(); ++i) scale = std::max(scale, std::fabs(tb.data<float>()[i]));
    for (int64_t i = 0; i < tb.numel(); ++i) worst = std::max(worst, std::fabs(ta.data<float>()[i] - tb.data<float>()[i]));
    EXPECT_LE(worst, tol * scale) << "output " << k << ": worst |onednn - portable| " << worst << " (scale " << scale << ")";
  }
}

}  // namespace kiln::onednn_test
