// Helpers for the ABI tests: graphs built by hand, registries over the test
// plugins, programs with and without backends, and comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/backends.h"
#include "runtime/backends/registry.h"
#include "runtime/backends/selection.h"
#include "runtime/program.h"

namespace kiln::abi_test {

inline std::string fake(const std::string& name) { return std::string(KILN_FAKES_DIR) + "/libkiln_fake_" + name + ".so"; }
inline std::string template_plugin() { return KILN_TEMPLATE_PLUGIN; }

/// A registry holding exactly `paths` (no environment, no default folders).
inline std::shared_ptr<BackendRegistry> registry_of(std::vector<std::string> paths) {
  BackendDiscovery d;
  d.paths = std::move(paths);
  d.use_environment = false;
  d.use_default_dirs = false;
  return BackendRegistry::create(d);
}

/// Builds an ir::Graph node by node (float32 by default, static shapes).
class GraphBuilder {
 public:
  GraphBuilder() : g_(std::make_shared<ir::Graph>()) {
    g_->opsets[""] = 17;
    g_->opsets["kiln.template"] = 1;
  }
  static std::vector<ir::Dim> dims_of(const std::vector<int64_t>& d) {
    std::vector<ir::Dim> out;
    for (int64_t x : d) out.push_back(ir::Dim{x, {}});
    return out;
  }
  ir::ValueId input(const std::string& name, std::vector<int64_t> dims, DType dt = DType::kFloat32) {
    ir::ValueId id = g_->add_value(name, ir::ValueType::tensor(dt, dims_of(dims)));
    g_->inputs.push_back(id);
    return id;
  }
  ir::ValueId constant(const std::string& name, Tensor t) {
    std::vector<int64_t> d = t.shape().to_vector();
    ir::ValueId id = g_->add_value(name, ir::ValueType::tensor(t.dtype(), dims_of(d)));
    g_->initializers.emplace(id, std::move(t));
    return id;
  }
  ir::ValueId node(const std::string& op, std::vector<ir::ValueId> ins, const std::string& name,
                   std::vector<int64_t> out_dims, DType dt = DType::kFloat32, const std::string& domain = "",
                   std::vector<ir::Attribute> attrs = {}) {
    ir::ValueId out = g_->add_value(name + "_out", ir::ValueType::tensor(dt, dims_of(out_dims)));
    ir::Node n;
    n.name = name;
    n.op_type = op;
    n.domain = domain;
    n.opset = g_->opsets[domain];
    n.inputs = std::move(ins);
    n.outputs = {out};
    n.attributes = std::move(attrs);
    g_->nodes.push_back(std::move(n));
    return out;
  }
  void output(ir::ValueId v) { g_->outputs.push_back(v); }
  std::shared_ptr<ir::Graph> graph() const { return std::make_shared<ir::Graph>(*g_); }

 private:
  std::shared_ptr<ir::Graph> g_;
};

inline Tensor random_tensor(std::vector<int64_t> dims, uint32_t seed) {
  Tensor t = Tensor::allocate(DType::kFloat32, Shape(dims));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

/// A program over `g` with the given backends (none: portable only).
inline Result<std::unique_ptr<runtime::Program>> build(std::shared_ptr<ir::Graph> g, const BackendRegistry* registry,
                                                       std::vector<std::string> backends,
                                                       std::vector<BackendOption> options = {},
                                                       FallbackPolicy fallback = FallbackPolicy::kAllow) {
  runtime::ProgramOptions po;
  po.registry = &kernels::portable_registry();
  if (!registry) return runtime::Program::build(std::move(g), po);
  KILN_ASSIGN_OR_RETURN(runtime::PartitionRequest req,
                        runtime::select_backends(*registry, backends, options, fallback));
  po.partition = &req;
  return runtime::Program::build(std::move(g), po);
}

inline void expect_close(const Tensor& a, const Tensor& b, float tol = 1e-4f) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape()) << a.shape().to_string() << " vs " << b.shape().to_string();
  for (int64_t i = 0; i < a.numel(); ++i) {
    float x = a.data<float>()[i], y = b.data<float>()[i];
    ASSERT_LE(std::fabs(x - y), tol * (1.f + std::fabs(y))) << "element " << i << ": " << x << " vs " << y;
  }
}

/// Sets an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace kiln::abi_test
