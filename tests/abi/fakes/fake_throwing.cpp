// An SDK plugin whose overrides throw. KILN_FAKE_THROW (read at each call)
// lists the calls that throw, comma-separated: construct, available,
// create, property, capability, compile, execute, export, check, import,
// release. Unset: property, execute, export, check and import throw (so
// get_capability and compile work and `kiln check-backend` reaches execute). Each call throws a different kind of
// exception; the SDK must turn every one into a status. What does not
// throw runs float32 Relu.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "kiln/c/backend_sdk.hpp"

namespace {

using namespace kiln::sdk;

bool throws(const char* call) {
  const char* env = std::getenv("KILN_FAKE_THROW");
  std::string list = env ? env : "property,execute,export,check,import";
  list = "," + list + ",";
  return list.find("," + std::string(call) + ",") != std::string::npos;
}

struct NotAStdException {
  int code;
};

class ReluCompiled final : public Compiled {
 public:
  void execute(ExecContext& ctx, const Inputs& in) override {
    if (throws("execute")) throw std::bad_alloc();
    TensorView x = in[0];
    TensorView y = ctx.allocate_output(0, KILN_DTYPE_FLOAT32, x.dims, x.rank);
    for (int64_t i = 0; i < x.numel(); ++i) y.as<float>()[i] = std::max(0.f, x.as<float>()[i]);
  }
  size_t num_inputs() const override { return 1; }
  size_t num_outputs() const override { return 1; }
  std::vector<uint8_t> export_bytes() const override {
    if (throws("export")) throw NotAStdException{3};
    return {'R', 'E', 'L', 'U'};
  }
  ~ReluCompiled() override {
    if (throws("release")) std::fprintf(stderr, "fake_throwing: destructor would throw; C++ forbids it\n");
  }
};

class ThrowingInstance final : public Instance {
 public:
  using Instance::Instance;
  void get_capability(const Graph& g, Capability& cap) override {
    if (throws("capability")) throw std::runtime_error("boom in get_capability");
    for (size_t i = 0; i < g.num_nodes(); ++i) {
      Node n = g.node(i);
      if (n.op_type() == "Relu" && n.domain().empty() && n.input(0).dtype() == KILN_DTYPE_FLOAT32) cap.add_single_node_group(i);
      else cap.decline(i, "only float32 Relu");
    }
  }
  std::unique_ptr<Compiled> compile(const Graph& g, const Partition& p) override {
    if (throws("compile")) throw 42;
    if (p.nodes.size() != 1 || g.node(p.nodes[0]).op_type() != "Relu" || !g.node(p.nodes[0]).domain().empty())
      fail(KILN_STATUS_INVALID_ARGUMENT, "single Relu nodes only");
    return std::make_unique<ReluCompiled>();
  }
  std::unique_ptr<Compiled> import_compiled(const uint8_t*, size_t) override {
    if (throws("import")) throw std::out_of_range("boom in import");
    return std::make_unique<ReluCompiled>();
  }
  void set_property(const std::string& k, const std::string& v) override {
    if (throws("property")) throw std::invalid_argument("boom in set_property");
    Instance::set_property(k, v);
  }
  std::string get_property(const std::string& k) override {
    if (throws("property")) throw std::logic_error("boom in get_property");
    return Instance::get_property(k);
  }
};

class ThrowingPlugin final : public Plugin {
 public:
  ThrowingPlugin() {
    if (throws("construct")) throw std::runtime_error("boom in the plugin constructor");
  }
  Info info() const override { return {"throwing", "0.1", "Kiln tests", "", "throws from its overrides", 0}; }
  std::string unavailable_reason() override {
    if (throws("available")) throw std::domain_error("boom in is_available");
    return {};
  }
  std::vector<OptionSpec> option_schema() const override { return {{"level", KILN_OPTION_INT, "1", "unused"}}; }
  std::unique_ptr<Instance> create_instance(size_t, Options o) override {
    if (throws("create")) throw std::length_error("boom in create_instance");
    return std::make_unique<ThrowingInstance>(std::move(o));
  }
  bool supports_export() const override { return true; }
  void check_compiled(const uint8_t* b, size_t n) const override {
    if (throws("check")) throw std::underflow_error("boom in check_compiled");
    if (n != 4 || std::memcmp(b, "RELU", 4) != 0) fail(KILN_STATUS_INVALID_ARGUMENT, "not a RELU blob");
  }
};

}  // namespace

KILN_BACKEND_PLUGIN(ThrowingPlugin)
