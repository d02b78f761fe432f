// An SDK plugin with one deliberately wrong op, for `kiln verify`: it claims
// every float32 Add, Mul, Relu, Sigmoid and Tanh node of the view as ONE
// group (the host splits it when it is not convex) and runs it with a small
// interpreter, exactly except for Tanh, which it computes as x / (1 + |x|)
// (a "fast approximation" that is off by up to ~0.2). Any sub-group of the
// nodes compiles, so verify can bisect a fused group through the public ABI
// and must name the Tanh node. Elementwise ops; a smaller operand
// broadcasts along the trailing dims. With KILN_FAKE_CRASH_FUSED set, every
// group of more than one node crashes in execute (single nodes still work):
// the plugin `kiln check-backend` used to pass before it had fusion probes.
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/c/backend_sdk.hpp"

namespace {

using namespace kiln::sdk;

struct Step {
  std::string op;
  std::vector<int> in;
  int out;
};

float apply_unary(const std::string& op, float x) {
  if (op == "Relu") return x > 0 ? x : 0;
  if (op == "Sigmoid") return 1.f / (1.f + std::exp(-x));
  return x / (1.f + std::fabs(x));  // "Tanh": the deliberate bug
}

class Interp final : public Compiled {
 public:
  Interp(size_t nin, std::vector<Step> steps, std::vector<int> outs, std::map<int, std::vector<float>> consts, int slots)
      : nin_(nin), steps_(std::move(steps)), outs_(std::move(outs)), consts_(std::move(consts)), slots_(slots) {}

  void execute(ExecContext& ctx, const Inputs& in) override {
    if (steps_.size() > 1 && std::getenv("KILN_FAKE_CRASH_FUSED")) {
      volatile int* volatile nowhere = nullptr;  // a fused kernel that crashes: single nodes still work
      *nowhere = 1;
    }
    std::vector<std::vector<float>> vals(static_cast<size_t>(slots_));
    std::vector<std::vector<int64_t>> dims(static_cast<size_t>(slots_));
    for (size_t i = 0; i < nin_; ++i) {
      TensorView t = in[i];
      if (t.dtype != KILN_DTYPE_FLOAT32) fail(KILN_STATUS_INVALID_ARGUMENT, "float32 only");
      vals[i].assign(t.as<float>(), t.as<float>() + t.numel());
      dims[i] = t.shape();
    }
    for (const auto& [s, v] : consts_) {
      vals[static_cast<size_t>(s)] = v;
      dims[static_cast<size_t>(s)] = v.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(v.size())};
    }
    for (const Step& st : steps_) {
      const auto& a = vals[static_cast<size_t>(st.in[0])];
      std::vector<float> r;
      if (st.in.size() == 1) {
        for (float x : a) r.push_back(apply_unary(st.op, x));
        dims[static_cast<size_t>(st.out)] = dims[static_cast<size_t>(st.in[0])];
      } else {
        const auto& b = vals[static_cast<size_t>(st.in[1])];
        const bool big_a = a.size() >= b.size();
        // Trailing broadcasting of a smaller operand whose size divides the larger's ([2,16] + [16]).
        if (a.empty() || b.empty() || (big_a ? a.size() % b.size() : b.size() % a.size()) != 0)
          fail(KILN_STATUS_UNIMPLEMENTED, "general broadcasting");
        for (size_t i = 0; i < (big_a ? a : b).size(); ++i) {
          float x = a[i % a.size()], y = b[i % b.size()];
          r.push_back(st.op == "Add" ? x + y : x * y);
        }
        dims[static_cast<size_t>(st.out)] = dims[static_cast<size_t>(big_a ? st.in[0] : st.in[1])];
      }
      vals[static_cast<size_t>(st.out)] = std::move(r);
    }
    for (size_t o = 0; o < outs_.size(); ++o) {
      const auto s = static_cast<size_t>(outs_[o]);
      TensorView t = ctx.allocate_output(o, KILN_DTYPE_FLOAT32, dims[s]);
      std::copy(vals[s].begin(), vals[s].end(), t.as<float>());
    }
  }
  size_t num_inputs() const override { return nin_; }
  size_t num_outputs() const override { return outs_.size(); }
  kiln_concurrency_t concurrency() const override { return KILN_CONCURRENCY_REENTRANT; }

 private:
  size_t nin_;
  std::vector<Step> steps_;
  std::vector<int> outs_;
  std::map<int, std::vector<float>> consts_;
  int slots_;
};

bool supported(const Node& n) {
  const std::string op = n.op_type();
  const bool binary = op == "Add" || op == "Mul";
  const bool unary = op == "Relu" || op == "Sigmoid" || op == "Tanh";
  if (!n.domain().empty() || !(binary || unary) || n.num_inputs() != (binary ? 2u : 1u)) return false;
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (!n.input(i) || n.input(i).dtype() != KILN_DTYPE_FLOAT32) return false;
  return true;
}

class WrongOpInstance final : public Instance {
 public:
  using Instance::Instance;
  void get_capability(const Graph& g, Capability& cap) override {
    std::vector<size_t> all;
    for (size_t i = 0; i < g.num_nodes(); ++i) {
      if (supported(g.node(i))) all.push_back(i);
      else cap.decline(i, "not Add, Mul, Relu, Sigmoid or Tanh on float32");
    }
    if (!all.empty()) cap.add_group(all);
  }
  std::unique_ptr<Compiled> compile(const Graph& g, const Partition& p) override {
    std::map<const kiln_value_t*, int> slot;
    int next = 0;
    for (const Value& v : p.inputs) slot[v.raw()] = next++;
    std::vector<Step> steps;
    std::map<int, std::vector<float>> consts;
    for (size_t idx : p.nodes) {
      Node n = g.node(idx);
      if (!supported(n)) fail(KILN_STATUS_INVALID_ARGUMENT, "node " + n.label() + " was not claimed");
      Step st{n.op_type(), {}, 0};
      for (size_t i = 0; i < n.num_inputs(); ++i) {
        Value v = n.input(i);
        auto it = slot.find(v.raw());
        if (it != slot.end()) {
          st.in.push_back(it->second);
        } else if (v.is_constant()) {
          TensorView c = v.constant();
          consts[next] = std::vector<float>(c.as<float>(), c.as<float>() + c.numel());
          slot[v.raw()] = next;
          st.in.push_back(next++);
        } else {
          fail(KILN_STATUS_INVALID_ARGUMENT, "value '" + v.name() + "' is not available inside the group");
        }
      }
      st.out = next;
      slot[n.output(0).raw()] = next++;
      steps.push_back(std::move(st));
    }
    std::vector<int> outs;
    for (const Value& v : p.outputs) {
      auto it = slot.find(v.raw());
      if (it == slot.end()) fail(KILN_STATUS_INVALID_ARGUMENT, "output '" + v.name() + "' is not computed by the group");
      outs.push_back(it->second);
    }
    return std::make_unique<Interp>(p.inputs.size(), std::move(steps), std::move(outs), std::move(consts), next);
  }
};

class WrongOpPlugin final : public Plugin {
 public:
  Info info() const override { return {"wrong_op", "0.1", "Kiln tests", "", "fuses elementwise ops; its Tanh is wrong", 0}; }
  std::unique_ptr<Instance> create_instance(size_t, Options o) override {
    return std::make_unique<WrongOpInstance>(std::move(o));
  }
};

}  // namespace

KILN_BACKEND_PLUGIN(WrongOpPlugin)
