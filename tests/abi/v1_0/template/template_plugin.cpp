// The template backend: a complete, small Kiln plugin. It runs float32 Add,
// Mul, Relu and MatMul, claims connected groups of them as fused
// partitions, publishes an option schema, exports and imports compiled
// partitions, and provides one custom op (kiln.template.MulAdd). It
// includes nothing from Kiln but kiln/c/backend_sdk.hpp (which includes
// kiln/c/backend.h), so it builds out of tree against installed headers.
//
// Start a new backend by copying this folder; docs/writing-a-backend.md
// walks through each part.
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/c/backend_sdk.hpp"
#include "template_program.h"

namespace kiln_template {

using kiln::sdk::Capability;
using kiln::sdk::Compiled;
using kiln::sdk::ExecContext;
using kiln::sdk::fail;
using kiln::sdk::Graph;
using kiln::sdk::Inputs;
using kiln::sdk::Instance;
using kiln::sdk::Node;
using kiln::sdk::Options;
using kiln::sdk::OptionSpec;
using kiln::sdk::Partition;
using kiln::sdk::Plugin;
using kiln::sdk::Value;

constexpr const char* kCustomDomain = "kiln.template";

// Why the template would not run `node`; "" when it would.
std::string decline_reason(const Node& node) {
  const std::string op = node.op_type();
  const std::string domain = node.domain();
  size_t arity = 0;
  int64_t min_opset = 1;
  if (domain == kCustomDomain && op == "MulAdd") {
    arity = 3;
  } else if (!domain.empty()) {
    return "domain '" + domain + "' is not supported";
  } else if (op == "Add" || op == "Mul") {
    arity = 2;
    min_opset = 7;  // before 7, broadcasting needed the `broadcast` attribute
  } else if (op == "Relu") {
    arity = 1;
    min_opset = 6;  // before 6, Relu had `consumed_inputs`
  } else if (op == "MatMul") {
    arity = 2;
  } else {
    return "op " + op + " is not one of Add, Mul, Relu, MatMul";
  }
  if (node.opset() < min_opset) {
    return op + " at opset " + std::to_string(node.opset()) + " is older than the template supports (" +
           std::to_string(min_opset) + ")";
  }
  if (node.num_inputs() != arity) return op + " with " + std::to_string(node.num_inputs()) + " inputs";
  for (size_t i = 0; i < arity; ++i) {
    Value v = node.input(i);
    if (!v) return "input " + std::to_string(i) + " is omitted";
    if (v.kind() != KILN_VALUE_TENSOR) return "input '" + v.name() + "' is not a tensor";
    if (v.dtype() != KILN_DTYPE_FLOAT32) {
      return "input '" + v.name() + "' is " +
             (v.dtype() == KILN_DTYPE_UNDEFINED ? std::string("of unknown dtype") : kiln::sdk::dtype_name(v.dtype())) +
             "; the template runs float32 only";
    }
    if (op == "MatMul" && v.rank() == 0) return "MatMul input '" + v.name() + "' is a scalar";
  }
  if (node.num_outputs() != 1 || !node.output(0)) return "the node must have exactly one output";
  return "";
}

class TemplateCompiled final : public Compiled {
 public:
  TemplateCompiled(Program program, bool serial) : program_(std::move(program)), serial_(serial) {}
  void execute(ExecContext& ctx, const Inputs& inputs) override { program_.run(ctx, inputs); }
  size_t num_inputs() const override { return program_.inputs.size(); }
  size_t num_outputs() const override { return program_.outputs.size(); }
  kiln_concurrency_t concurrency() const override {
    // run() keeps all its state on the stack: concurrent calls are safe.
    return serial_ ? KILN_CONCURRENCY_SERIAL : KILN_CONCURRENCY_REENTRANT;
  }
  std::vector<uint8_t> export_bytes() const override { return program_.serialize(); }

 private:
  Program program_;
  bool serial_;
};

class TemplateInstance final : public Instance {
 public:
  explicit TemplateInstance(Options options) : Instance(std::move(options)) { check(); }

  void set_property(const std::string& key, const std::string& value) override {
    Options before = options_;
    options_.set(key, value);
    try {
      check();
    } catch (...) {
      options_ = std::move(before);
      throw;
    }
  }

  void get_capability(const Graph& graph, Capability& cap) override {
    const size_t n = graph.num_nodes();
    std::vector<int8_t> ok(n, 0);
    for (size_t i = 0; i < n; ++i) {
      std::string why = decline_reason(graph.node(i));
      if (why.empty()) ok[i] = 1;
      else cap.decline(i, why);
    }
    // Connected components of supported nodes (through values one produces
    // and another reads) become fused groups. Convexity is the host's job.
    std::vector<size_t> parent(n);
    std::iota(parent.begin(), parent.end(), size_t{0});
    auto find = [&](size_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    if (options_.get_bool("fuse")) {
      for (size_t i = 0; i < n; ++i) {
        if (!ok[i]) continue;
        Node node = graph.node(i);
        for (size_t k = 0; k < node.num_inputs(); ++k) {
          Node p = node.input(k) ? node.input(k).producer() : Node();
          if (p && ok[p.index()]) parent[find(i)] = find(p.index());
        }
      }
    }
    std::map<size_t, std::vector<size_t>> groups;
    for (size_t i = 0; i < n; ++i)
      if (ok[i]) groups[find(i)].push_back(i);
    const int64_t max_size = options_.get_int("max_group_size");
    for (auto& [root, nodes] : groups) {
      for (size_t start = 0; start < nodes.size();) {
        size_t len = max_size > 0 ? std::min<size_t>(static_cast<size_t>(max_size), nodes.size() - start)
                                  : nodes.size() - start;
        cap.add_group(std::vector<size_t>(nodes.begin() + static_cast<std::ptrdiff_t>(start),
                                          nodes.begin() + static_cast<std::ptrdiff_t>(start + len)));
        start += len;
      }
    }
    if (options_.get_bool("verbose")) {
      graph.host().log(KILN_LOG_INFO, "claimed " + std::to_string(groups.size()) + " groups of " + std::to_string(n) +
                                          " nodes offered");
    }
  }

  std::unique_ptr<Compiled> compile(const Graph& graph, const Partition& part) override {
    Program prog;
    std::map<const kiln_value_t*, int32_t> slot;
    auto new_slot = [&](const Value& v) {
      int32_t s = static_cast<int32_t>(prog.num_slots++);
      slot[v.raw()] = s;
      return s;
    };
    for (const Value& v : part.inputs) {
      Input in;
      in.slot = new_slot(v);
      in.rank = static_cast<int32_t>(v.rank());
      if (in.rank >= 0) in.dims = v.dims();
      prog.inputs.push_back(std::move(in));
    }
    for (size_t idx : part.nodes) {
      Node node = graph.node(idx);
      if (!node) fail(KILN_STATUS_OUT_OF_RANGE, "partition node " + std::to_string(idx) + " is not in the graph");
      std::string why = decline_reason(node);
      if (!why.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, "node " + node.label() + " is not one the template runs: " + why);
      Op op;
      const std::string t = node.op_type();
      op.kind = t == "Add" ? OpKind::kAdd : t == "Mul" ? OpKind::kMul : t == "Relu" ? OpKind::kRelu
                : t == "MatMul" ? OpKind::kMatMul : OpKind::kMulAdd;
      for (size_t k = 0; k < node.num_inputs(); ++k) {
        Value v = node.input(k);
        auto it = slot.find(v.raw());
        if (it != slot.end()) {
          op.in.push_back(it->second);
        } else if (v.is_constant()) {
          kiln::sdk::TensorView c = v.constant();  // borrowed for this call: copy it
          Constant cst;
          cst.slot = new_slot(v);
          cst.dims = c.shape();
          cst.data.assign(c.as<float>(), c.as<float>() + c.numel());
          op.in.push_back(cst.slot);
          prog.constants.push_back(std::move(cst));
        } else {
          fail(KILN_STATUS_INVALID_ARGUMENT, "node " + node.label() + " reads '" + v.name() +
                                                 "', which is neither a partition input, a constant nor computed in the group");
        }
      }
      op.out = new_slot(node.output(0));
      prog.ops.push_back(std::move(op));
    }
    for (const Value& v : part.outputs) {
      auto it = slot.find(v.raw());
      if (it == slot.end()) fail(KILN_STATUS_INVALID_ARGUMENT, "partition output '" + v.name() + "' is not computed by the group");
      prog.outputs.push_back(it->second);
    }
    prog.validate();
    if (options_.get_bool("verbose")) {
      graph.host().log(KILN_LOG_INFO, "compiled " + part.id + ": " + std::to_string(prog.ops.size()) + " ops, " +
                                          std::to_string(prog.constants.size()) + " constants");
    }
    return std::make_unique<TemplateCompiled>(std::move(prog), options_.get_bool("serial"));
  }

  std::unique_ptr<Compiled> import_compiled(const uint8_t* bytes, size_t size) override {
    return std::make_unique<TemplateCompiled>(Program::parse(bytes, size), options_.get_bool("serial"));
  }

 private:
  void check() const {
    if (options_.get_int("max_group_size") < 0) {
      fail(KILN_STATUS_INVALID_ARGUMENT, "option 'max_group_size' must be >= 0, got " + options_.get("max_group_size"));
    }
  }
};

class TemplatePlugin final : public Plugin {
 public:
  Info info() const override {
    Info i;
    i.name = "template";
    i.version = "1.0.0";
    i.vendor = "Kiln project";
    i.vendor_sdk_version = "";  // a vendor backend reports the SDK version it found here
    i.description = "reference plugin: float32 Add, Mul, Relu, MatMul in fused groups";
    i.priority = 0;  // a teaching example: used only when named
    return i;
  }
  std::vector<OptionSpec> option_schema() const override {
    return {
        {"max_group_size", KILN_OPTION_INT, "0", "largest number of nodes in one fused group (0: no limit)"},
        {"fuse", KILN_OPTION_BOOL, "true", "claim connected nodes as one group (false: one node per group)"},
        {"serial", KILN_OPTION_BOOL, "false", "declare compiled partitions non-reentrant (the host serializes execute)"},
        {"verbose", KILN_OPTION_BOOL, "false", "log claims and compiles at info level"},
    };
  }
  std::vector<CustomOp> custom_ops() const override {
    return {{kCustomDomain, "MulAdd", 1, "y = a * b + c (float32, numpy broadcasting)"}};
  }
  std::unique_ptr<Instance> create_instance(size_t, Options options) override {
    return std::make_unique<TemplateInstance>(std::move(options));
  }
  bool supports_export() const override { return true; }
  void check_compiled(const uint8_t* bytes, size_t size) const override { (void)Program::parse(bytes, size); }
};

}  // namespace kiln_template

KILN_BACKEND_PLUGIN(kiln_template::TemplatePlugin)
