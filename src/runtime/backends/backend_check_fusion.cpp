// The backend conformance kit (kiln/backend_check.h): fusion probes. Each
// probe is a small multi-node graph (chains, a residual, a diamond, a value
// read both inside and outside a group, a CNN head, and a chain built from
// the elementwise ops the plugin claims one by one), built through the
// plugin and on portable kernels and compared; then every partition runs
// once more on its own with its outputs between guard bytes, so a plugin
// that writes past an output buffer is named with the op and the output.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <random>

#include "kiln/backend_check.h"
#include "kernels/registry.h"
#include "runtime/backends/backend_check_util.h"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/selection.h"
#include "runtime/backends/subgroup.h"
#include "runtime/program.h"

namespace kiln::backend_check {
namespace {

using Dims = std::vector<int64_t>;

Tensor random_tensor(const Dims& d, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::allocate(DType::kFloat32, Shape(d));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Builds a float32 graph with static shapes, node by node.
class Builder {
 public:
  Builder() : g_(std::make_shared<ir::Graph>()) {
    g_->name = "kiln_check_fusion";
    g_->opsets[""] = 17;
  }
  ir::ValueId input(const std::string& n, const Dims& d) {
    ir::ValueId id = value(n, d);
    g_->inputs.push_back(id);
    return id;
  }
  ir::ValueId constant(const Dims& d, float lo = -1.f, float hi = 1.f) {
    ir::ValueId id = value("c" + std::to_string(seed_), d);
    g_->initializers.emplace(id, random_tensor(d, seed_++, lo, hi));
    return id;
  }
  ir::ValueId node(const std::string& op, std::vector<ir::ValueId> in, const Dims& out_dims,
                   std::vector<ir::Attribute> attrs = {}) {
    std::string lower = op + std::to_string(g_->nodes.size());
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    ir::ValueId out = value(lower + "_out", out_dims);
    ir::Node n;
    n.name = lower;
    n.op_type = op;
    n.opset = 17;
    n.inputs = std::move(in);
    n.outputs = {out};
    n.attributes = std::move(attrs);
    g_->nodes.push_back(std::move(n));
    return out;
  }
  void output(ir::ValueId v) { g_->outputs.push_back(v); }
  std::shared_ptr<ir::Graph> graph() const { return std::make_shared<ir::Graph>(*g_); }

  static ir::Attribute ints(const std::string& name, std::vector<int64_t> v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kInts;
    a.ints = std::move(v);
    return a;
  }
  static ir::Attribute int1(const std::string& name, int64_t v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kInt;
    a.i = v;
    return a;
  }

 private:
  ir::ValueId value(const std::string& n, const Dims& d) {
    std::vector<ir::Dim> dims;
    for (int64_t x : d) dims.push_back(ir::Dim{x, {}});
    return g_->add_value(n, ir::ValueType::tensor(DType::kFloat32, dims));
  }
  std::shared_ptr<ir::Graph> g_;
  uint32_t seed_ = 100;
};

// Elementwise ops the chain probe may use: (op, number of inputs).
const std::pair<const char*, int> kElementwise[] = {
    {"Relu", 1}, {"Sigmoid", 1}, {"Tanh", 1}, {"Abs", 1}, {"Neg", 1}, {"Exp", 1}, {"Add", 2},
    {"Sub", 2},  {"Mul", 2},     {"Max", 2},  {"Min", 2}, {"LeakyRelu", 1}, {"Elu", 1}, {"HardSigmoid", 1}};

std::shared_ptr<ir::Graph> conv_relu_add() {
  Builder b;
  ir::ValueId x = b.input("x", {1, 4, 8, 8});
  ir::ValueId c = b.node("Conv", {x, b.constant({4, 4, 3, 3}), b.constant({4})}, {1, 4, 8, 8},
                         {Builder::ints("kernel_shape", {3, 3}), Builder::ints("pads", {1, 1, 1, 1})});
  b.output(b.node("Add", {b.node("Relu", {c}, {1, 4, 8, 8}), x}, {1, 4, 8, 8}));
  return b.graph();
}

std::shared_ptr<ir::Graph> conv_bn_relu_pool() {
  Builder b;
  ir::ValueId x = b.input("x", {1, 3, 8, 8});
  ir::ValueId c = b.node("Conv", {x, b.constant({8, 3, 3, 3}), b.constant({8})}, {1, 8, 8, 8},
                         {Builder::ints("kernel_shape", {3, 3}), Builder::ints("pads", {1, 1, 1, 1})});
  ir::ValueId bn = b.node("BatchNormalization",
                          {c, b.constant({8}, 0.5f, 1.5f), b.constant({8}), b.constant({8}), b.constant({8}, 0.5f, 2.f)},
                          {1, 8, 8, 8});
  ir::ValueId r = b.node("Relu", {bn}, {1, 8, 8, 8});
  b.output(b.node("MaxPool", {r}, {1, 8, 4, 4}, {Builder::ints("kernel_shape", {2, 2}), Builder::ints("strides", {2, 2})}));
  return b.graph();
}

std::shared_ptr<ir::Graph> matmul_add_relu() {
  Builder b;
  ir::ValueId x = b.input("x", {4, 16});
  ir::ValueId m = b.node("MatMul", {x, b.constant({16, 8})}, {4, 8});
  b.output(b.node("Relu", {b.node("Add", {m, b.constant({8})}, {4, 8})}, {4, 8}));
  return b.graph();
}

std::shared_ptr<ir::Graph> gemm_relu_gemm_softmax() {
  Builder b;
  ir::ValueId x = b.input("x", {4, 16});
  ir::ValueId g1 = b.node("Gemm", {x, b.constant({8, 16}), b.constant({8})}, {4, 8}, {Builder::int1("transB", 1)});
  ir::ValueId r = b.node("Relu", {g1}, {4, 8});
  ir::ValueId g2 = b.node("Gemm", {r, b.constant({4, 8}), b.constant({4})}, {4, 4}, {Builder::int1("transB", 1)});
  b.output(b.node("Softmax", {g2}, {4, 4}));
  return b.graph();
}

// The elementwise probes use an image-shaped tensor and same-shape
// constants (no broadcasting), so NHWC-minded plugins claim them too.
const Dims kImg = {1, 8, 4, 4};

std::shared_ptr<ir::Graph> diamond() {
  Builder b;
  ir::ValueId x = b.input("x", kImg);
  ir::ValueId a = b.node("Add", {x, b.constant(kImg)}, kImg);
  ir::ValueId l = b.node("Relu", {a}, kImg);
  ir::ValueId r = b.node("Sigmoid", {a}, kImg);
  ir::ValueId m = b.node("Mul", {l, r}, kImg);
  b.output(b.node("Add", {m, a}, kImg));
  return b.graph();
}

std::shared_ptr<ir::Graph> shared_output() {
  Builder b;
  ir::ValueId x = b.input("x", kImg);
  ir::ValueId r = b.node("Relu", {x}, kImg);
  ir::ValueId s = b.node("Add", {r, b.constant(kImg)}, kImg);
  b.output(r);  // an intermediate of the group is also a graph output
  b.output(b.node("Mul", {s, s}, kImg));
  return b.graph();
}

std::shared_ptr<ir::Graph> cnn_head() {
  Builder b;
  ir::ValueId x = b.input("x", {1, 3, 8, 8});
  ir::ValueId c = b.node("Conv", {x, b.constant({4, 3, 3, 3}), b.constant({4})}, {1, 4, 8, 8},
                         {Builder::ints("kernel_shape", {3, 3}), Builder::ints("pads", {1, 1, 1, 1})});
  ir::ValueId p = b.node("GlobalAveragePool", {b.node("Relu", {c}, {1, 4, 8, 8})}, {1, 4, 1, 1});
  ir::ValueId f = b.node("Flatten", {p}, {1, 4});
  b.output(b.node("Gemm", {f, b.constant({2, 4}), b.constant({2})}, {1, 2}, {Builder::int1("transB", 1)}));
  return b.graph();
}

// Every elementwise op of the catalogue applied to x once, side by side.
std::shared_ptr<ir::Graph> catalogue() {
  Builder b;
  ir::ValueId x = b.input("x", kImg);
  for (const auto& [op, arity] : kElementwise) {
    std::vector<ir::ValueId> in{x};
    if (arity == 2) in.push_back(b.constant(kImg));
    b.output(b.node(op, in, kImg));
  }
  return b.graph();
}

// A chain of the claimed elementwise ops (two passes over them, at most 16
// nodes), with a residual Add every third node when Add is claimed.
std::shared_ptr<ir::Graph> chain_of(const std::vector<std::pair<std::string, int>>& ops) {
  Builder b;
  ir::ValueId x = b.input("x", kImg);
  ir::ValueId prev = x, cur = x;
  const bool add = std::any_of(ops.begin(), ops.end(), [](const auto& o) { return o.first == "Add"; });
  const size_t n = std::min<size_t>(16, 2 * ops.size());
  for (size_t i = 0; i < n; ++i) {
    const auto& [op, arity] = ops[i % ops.size()];
    std::vector<ir::ValueId> in{cur};
    if (arity == 2) in.push_back(b.constant(kImg, -0.5f, 0.5f));
    ir::ValueId next = b.node(op, in, kImg);
    if (add && i % 3 == 2) next = b.node("Add", {next, prev}, kImg);
    prev = cur;
    cur = next;
  }
  b.output(cur);
  return b.graph();
}

struct Probe {
  const char* name;
  std::function<std::shared_ptr<ir::Graph>()> build;
};

const std::vector<Probe>& probes() {
  static const std::vector<Probe> all = {{"conv_relu_add", conv_relu_add},
                                         {"conv_bn_relu_pool", conv_bn_relu_pool},
                                         {"matmul_add_relu", matmul_add_relu},
                                         {"gemm_relu_gemm_softmax", gemm_relu_gemm_softmax},
                                         {"diamond", diamond},
                                         {"shared_output", shared_output},
                                         {"cnn_head", cnn_head},
                                         {"elementwise_chain", nullptr}};
  return all;
}

// The elementwise ops of the catalogue the plugin claims, in catalogue order.
Result<std::vector<std::pair<std::string, int>>> claimed_elementwise(const Loaded& l, const Options& o) {
  KILN_ASSIGN_OR_RETURN(auto inst, l.plugin->create_instance(0, o.backend_options));
  auto g = catalogue();
  std::vector<int32_t> all(g->nodes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  auto view = runtime::make_graph_view(*g, nullptr, all, {});
  KILN_ASSIGN_OR_RETURN(runtime::Capability cap, inst->get_capability(view.get()));
  std::vector<int8_t> claimed(all.size(), 0);
  for (const auto& grp : cap.groups)
    for (size_t n : grp) claimed[n] = 1;
  std::vector<std::pair<std::string, int>> ops;
  for (size_t i = 0; i < all.size(); ++i)
    if (claimed[i]) ops.emplace_back(kElementwise[i].first, kElementwise[i].second);
  return ops;
}

std::string op_list(const ir::Graph& g) {
  std::string s;
  for (const ir::Node& n : g.nodes)
    if (s.find(n.op_type) == std::string::npos) s += (s.empty() ? "" : ", ") + n.op_type;
  return s;
}

}  // namespace

// Each partition alone on random inputs, outputs between guard bytes.
std::string guard_problems(const runtime::Program& program) {
  runtime::SubgroupRunner runner(program);
  runtime::ValuesByName values;
  uint32_t seed = 7;
  std::string problems;
  for (const PartitionInfo& p : program.placement().partitions) {
    const runtime::PartitionKernel* pk = runner.kernel_of(p.id);
    if (!pk) continue;
    for (ir::ValueId v : pk->node()->inputs) {
      const ir::ValueType& t = program.graph().value(v).type;
      if (t.is_static()) values.emplace(program.graph().value_name(v), random_tensor(t.static_shape().to_vector(), seed++));
    }
    runtime::GroupRun run = runner.run_partition(*pk, values);
    if (!run.status.is_ok() && run.status.message().find("outside its output buffers") != std::string::npos)
      problems += (problems.empty() ? "" : "; ") + ("partition of " + p.nodes.front() + ": " + run.status.message());
  }
  return problems;
}

std::vector<std::string> fusion_probes() {
  std::vector<std::string> names;
  for (const Probe& p : probes()) names.push_back(p.name);
  return names;
}

void check_fusion(const Options& o, const std::string& name, Report& r) {
  const std::string row = "fusion " + name;
  auto it = std::find_if(probes().begin(), probes().end(), [&](const Probe& p) { return name == p.name; });
  if (it == probes().end()) return r.fail(row, "no such fusion probe");
  LogCapture capture;
  Loaded l;
  if (!load_usable(o, capture, r, row.c_str(), &l)) return;
  std::shared_ptr<ir::Graph> graph;
  if (it->build) {
    graph = it->build();
  } else {
    auto ops = claimed_elementwise(l, o);
    if (!ops.is_ok()) return r.fail(row, ops.status().message());
    if (ops->empty()) return r.skip(row, "the plugin claims none of the elementwise ops tried one by one");
    graph = chain_of(*ops);
  }
  std::vector<BackendOption> bopts;
  for (const auto& [k, v] : o.backend_options) bopts.push_back({l.plugin->name(), k, v});
  auto request = runtime::select_backends(*l.registry, {l.plugin->name()}, bopts, FallbackPolicy::kAllow);
  if (!request.is_ok()) return r.fail(row, request.status().message());
  runtime::ProgramOptions portable;
  portable.registry = &kernels::portable_registry();
  runtime::ProgramOptions with = portable;
  with.keep_owned_constants = true;  // guard_problems compiles each partition again
  with.partition = &*request;
  auto program = runtime::Program::build(std::make_shared<ir::Graph>(*graph), with);
  auto reference = runtime::Program::build(std::make_shared<ir::Graph>(*graph), portable);
  if (!program.is_ok()) return r.fail(row, "building the probe through the plugin failed: " + program.status().message());
  if (!reference.is_ok()) return r.fail(row, "portable kernels cannot build the probe: " + reference.status().message());
  const PlacementReport& rep = (*program)->placement();
  size_t on_plugin = 0, largest = 0;
  for (const PartitionInfo& p : rep.partitions) {
    on_plugin += p.nodes.size();
    largest = std::max(largest, p.nodes.size());
  }
  if (on_plugin == 0) return r.skip(row, "the plugin claims none of its nodes (" + op_list(*graph) + ")");
  const std::string shape = std::to_string(on_plugin) + " of " + std::to_string(graph->nodes.size()) + " nodes (" +
                            op_list(*graph) + ") in " + std::to_string(rep.partitions.size()) +
                            " partitions, largest " + std::to_string(largest);
  // Guards first: a plugin that writes past its outputs would corrupt the run's arena.
  if (std::string guard = guard_problems(**program); !guard.empty()) return r.fail(row, shape + "; " + guard);
  std::vector<Value> inputs;
  for (ir::ValueId v : graph->inputs)
    inputs.push_back(Value(random_tensor(graph->value(v).type.static_shape().to_vector(), 3)));
  auto got = (*program)->run(inputs, {}, nullptr);
  auto want = (*reference)->run(inputs, {}, nullptr);
  if (!want.is_ok()) return r.skip(row, "portable kernels fail on the probe: " + want.status().message());
  if (!got.is_ok()) return r.fail(row, shape + "; the run failed: " + got.status().message());
  std::string diff;
  double max_abs = 0;
  for (size_t i = 0; i < got->size() && diff.empty(); ++i) {
    const Tensor& a = (*got)[i].tensor();
    const Tensor& b = (*want)[i].tensor();
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
      diff = "output " + std::to_string(i) + " is " + a.shape().to_string() + ", portable gives " + b.shape().to_string();
      break;
    }
    for (int64_t k = 0; k < a.numel(); ++k) {
      const double d = std::fabs(double(a.data<float>()[k]) - b.data<float>()[k]);
      max_abs = std::max(max_abs, std::isnan(d) ? INFINITY : d);
      if (!(d <= 1e-4 + 1e-3 * std::fabs(b.data<float>()[k]))) {
        diff = "output " + std::to_string(i) + " element " + std::to_string(k) + ": got " +
               std::to_string(a.data<float>()[k]) + ", portable gives " + std::to_string(b.data<float>()[k]);
        break;
      }
    }
  }
  if (!diff.empty()) return r.fail(row, shape + "; " + diff);
  char figures[64];
  std::snprintf(figures, sizeof(figures), "; outputs match (max abs diff %.2g), guards intact", max_abs);
  r.pass(row, shape + figures);
}

}  // namespace kiln::backend_check
