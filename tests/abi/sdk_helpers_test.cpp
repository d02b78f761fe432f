// The SDK helpers that take boilerplate off plugin authors (ABI 1.1 SDK):
// execute inputs checked against the partition, validate_options, connected
// groups with a size cap, the one-node-group name, and when the SDK asks a
// plugin for its info and devices.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/host.h"

namespace kiln::abi_test {
namespace {

std::atomic<int> g_executes{0};
std::mutex g_calls_mu;
std::vector<std::string> g_calls;  // what the Recorder plugin was asked, in order

void record(const std::string& what) {
  std::lock_guard<std::mutex> lock(g_calls_mu);
  g_calls.push_back(what);
}

// Claims Relu and Add; its execute only counts calls (the SDK checks inputs first).
class Recorder final : public sdk::Plugin {
 public:
  Info info() const override {
    record("info");
    return {"recorder", "1", "tests", "", "", 0};
  }
  std::string unavailable_reason() override {
    record("unavailable_reason");
    return {};
  }
  std::vector<Device> devices() const override {
    record("devices");
    return {{"cpu", KILN_DEVICE_CPU, "the host CPU"}};
  }
  std::vector<sdk::OptionSpec> option_schema() const override {
    return {{"max", KILN_OPTION_INT, "0", "group size cap"}, {"lo", KILN_OPTION_INT, "0", "low"},
            {"hi", KILN_OPTION_INT, "10", "high"}};
  }
  void validate_options(const sdk::Options& o) const override {
    record("validate");
    if (o.get_int("lo") > o.get_int("hi"))
      sdk::fail(KILN_STATUS_INVALID_ARGUMENT, "option 'lo' (" + o.get("lo") + ") is above 'hi' (" + o.get("hi") + ")");
  }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      void get_capability(const sdk::Graph& g, sdk::Capability& cap) override {
        std::vector<bool> ok = cap.decline_unsupported(g, [](const sdk::Node& n) {
          return n.op_type() == "Relu" || n.op_type() == "Add" ? std::string() : "not Relu or Add";
        });
        cap.add_connected_groups(g, ok, static_cast<size_t>(options_.get_int("max")));
      }
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition& p) override {
        struct C final : sdk::Compiled {
          size_t ins;
          explicit C(size_t n) : ins(n) {}
          void execute(sdk::ExecContext&, const sdk::Inputs&) override { ++g_executes; }
          size_t num_inputs() const override { return ins; }
          size_t num_outputs() const override { return 1; }
        };
        return std::make_unique<C>(p.inputs.size());
      }
    };
    return std::make_unique<Inst>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(recorder_entry, Recorder)

struct Loaded {
  std::shared_ptr<BackendRegistry> reg;
  std::shared_ptr<runtime::LoadedPlugin> plugin;
  const kiln_backend_api_t* api = nullptr;
};

Loaded load_recorder() {
  {
    std::lock_guard<std::mutex> lock(g_calls_mu);
    g_calls.clear();
  }
  Loaded l;
  l.reg = registry_of({});
  EXPECT_TRUE(runtime::registry_impl(*l.reg).add_entry(&recorder_entry, "(test)").is_ok());
  l.plugin = runtime::registry_impl(*l.reg).all().at(0);
  l.api = &l.plugin->api();
  return l;
}

TEST(SdkHelpersTest, InfoAtEntryDevicesOnlyAfterAvailability) {
  Loaded l = load_recorder();
  std::lock_guard<std::mutex> lock(g_calls_mu);
  ASSERT_GE(g_calls.size(), 3u);
  EXPECT_EQ(g_calls[0], "info");
  auto at = [](const char* what) { return std::find(g_calls.begin(), g_calls.end(), what) - g_calls.begin(); };
  EXPECT_LT(at("unavailable_reason"), at("devices")) << "devices() must be asked after availability";
  EXPECT_EQ(std::count(g_calls.begin(), g_calls.end(), "devices"), 1);  // once, then cached
  EXPECT_EQ(l.plugin->info().devices.size(), 1u);
}

TEST(SdkHelpersTest, ValidateOptionsRunsBeforeCreateAndBeforeASetChangesAnything) {
  Loaded l = load_recorder();
  kiln_instance_t* inst = nullptr;
  const char* k[] = {"lo", "hi"};
  const char* bad[] = {"5", "2"};
  Status st = runtime::take_status(l.api->instance_create(l.plugin->handle(), 0, k, bad, 2, &inst));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "option 'lo' (5) is above 'hi' (2)");
  EXPECT_EQ(inst, nullptr);
  const char* good[] = {"1", "2"};
  ASSERT_EQ(l.api->instance_create(l.plugin->handle(), 0, k, good, 2, &inst), nullptr);
  st = runtime::take_status(l.api->instance_set_property(inst, "lo", "3"));
  EXPECT_EQ(st.message(), "option 'lo' (3) is above 'hi' (2)");
  char* v = nullptr;
  ASSERT_EQ(l.api->instance_get_property(inst, "lo", &v), nullptr);
  EXPECT_STREQ(v, "1");  // the refused set changed nothing
  runtime::host_free(l.plugin->host(), v);
  EXPECT_EQ(l.api->instance_set_property(inst, "hi", "7"), nullptr);
  EXPECT_EQ(l.api->instance_set_property(inst, "lo", "7"), nullptr);
  st = runtime::take_status(l.api->instance_set_property(inst, "nope", "1"));
  EXPECT_EQ(st.message(), "unknown option 'nope'; known options: max (int), lo (int), hi (int)");
  l.api->instance_release(inst);
}

// x -> Relu a -> Relu b -> Sigmoid s -> Relu c -> Add d(c, b); y -> Relu e.
std::shared_ptr<ir::Graph> chain_graph() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 3}), y = b.input("y", {2, 3});
  ir::ValueId a = b.node("Relu", {x}, "a", {2, 3});
  ir::ValueId bb = b.node("Relu", {a}, "b", {2, 3});
  ir::ValueId s = b.node("Sigmoid", {bb}, "s", {2, 3});
  ir::ValueId c = b.node("Relu", {s}, "c", {2, 3});
  b.output(b.node("Add", {c, bb}, "d", {2, 3}));
  b.output(b.node("Relu", {y}, "e", {2, 3}));
  return b.graph();
}

TEST(SdkHelpersTest, ConnectedGroupsJoinThroughProducedValuesAndCapTheirSize) {
  auto g = chain_graph();
  std::vector<int32_t> all{0, 1, 2, 3, 4, 5};
  auto view = runtime::make_graph_view(*g, nullptr, all, {});
  kiln_host ctx;
  sdk::Host host(runtime::host_api(), &ctx);
  sdk::Graph graph(&host, view.get());
  std::vector<bool> claimed{true, true, false, true, true, true};  // all but the Sigmoid
  using Groups = std::vector<std::vector<size_t>>;
  // a-b-d (d reads b), c-d (d reads c): one group {a, b, c, d}; e alone.
  EXPECT_EQ(sdk::connected_groups(graph, claimed), (Groups{{0, 1, 3, 4}, {5}}));
  EXPECT_EQ(sdk::connected_groups(graph, claimed, 3), (Groups{{0, 1, 3}, {4}, {5}}));
  EXPECT_EQ(sdk::connected_groups(graph, claimed, 1), (Groups{{0}, {1}, {3}, {4}, {5}}));
  std::vector<bool> none(6, false);
  EXPECT_TRUE(sdk::connected_groups(graph, none).empty());

  sdk::Capability cap;
  std::vector<bool> ok = cap.decline_unsupported(graph, [](const sdk::Node& n) {
    return n.op_type() == "Sigmoid" ? "no Sigmoid here" : "";
  });
  EXPECT_EQ(ok, claimed);
  ASSERT_EQ(cap.declined().size(), 1u);
  EXPECT_EQ(cap.declined()[0], (std::pair<size_t, std::string>{2, "no Sigmoid here"}));
  EXPECT_EQ(cap.add_connected_groups(graph, ok, 0, /*fuse=*/false), 5u);
  EXPECT_EQ(cap.groups(), (Groups{{0}, {1}, {3}, {4}, {5}}));
}

TEST(SdkHelpersTest, AddNodeIsTheDeprecatedNameOfAddSingleNodeGroup) {
  sdk::Capability cap;
  cap.add_single_node_group(4);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  cap.add_node(7);  // out-of-tree plugins written against 1.0 still build (with a warning)
#pragma GCC diagnostic pop
  EXPECT_EQ(cap.groups(), (std::vector<std::vector<size_t>>{{4}, {7}}));
}

// Compiles the Relu 'a' of chain_graph (input x, [2, 3] float32) through the
// recorder and calls its execute with altered views of x.
TEST(SdkHelpersTest, ExecuteInputsAreCheckedAgainstThePartitionNamingTheInput) {
  Loaded l = load_recorder();
  auto g = chain_graph();
  std::vector<int32_t> all{0, 1, 2, 3, 4, 5};
  auto view = runtime::make_graph_view(*g, nullptr, all, {});
  kiln_instance_t* inst = nullptr;
  ASSERT_EQ(l.api->instance_create(l.plugin->handle(), 0, nullptr, nullptr, 0, &inst), nullptr);
  const kiln_value_t* in = &view->values[static_cast<size_t>(g->nodes[0].inputs[0])];
  const kiln_value_t* out = &view->values[static_cast<size_t>(g->nodes[0].outputs[0])];
  size_t node = 0;
  kiln_partition_t part{};
  part.struct_size = sizeof(part);
  part.id = "p";
  part.num_nodes = 1;
  part.nodes = &node;
  part.num_inputs = 1;
  part.inputs = &in;
  part.num_outputs = 1;
  part.outputs = &out;
  kiln_compiled_t* c = nullptr;
  ASSERT_EQ(l.api->instance_compile(inst, view.get(), &part, &c), nullptr);

  Tensor x = Tensor::allocate(DType::kFloat32, Shape({2, 3}));
  kiln_tensor_t good{};
  ASSERT_TRUE(runtime::tensor_view(x, &good).is_ok());
  auto run = [&](std::vector<kiln_tensor_t> views) {
    std::vector<const kiln_tensor_t*> ptrs;
    for (const kiln_tensor_t& v : views) ptrs.push_back(&v);
    return runtime::take_status(l.api->compiled_execute(c, nullptr, ptrs.data(), ptrs.size())).message();
  };
  g_executes = 0;
  EXPECT_EQ(run({good, good}), "execute got 2 inputs; the partition takes 1 (x)");
  EXPECT_EQ(run({}), "execute got 0 inputs; the partition takes 1 (x)");
  kiln_tensor_t t = good;
  t.dtype = KILN_DTYPE_INT32;
  EXPECT_EQ(run({t}), "input 0 'x' is int32; the partition was compiled for float32");
  int64_t flat[] = {6}, wide[] = {2, 4}, neg[] = {2, -3};
  t = good;
  t.rank = 1;
  t.dims = flat;
  EXPECT_EQ(run({t}), "input 0 'x' has shape [6]; the partition was compiled for [2, 3]");
  t.rank = 2;
  t.dims = wide;
  EXPECT_EQ(run({t}), "input 0 'x' has shape [2, 4]; the partition was compiled for [2, 3]");
  t = good;
  t.nbytes = 20;
  EXPECT_EQ(run({t}), "input 0 'x' holds 20 bytes; its shape [2, 3] of float32 needs 24");
  t = good;
  t.data = nullptr;
  EXPECT_EQ(run({t}), "input 0 'x' has 24 bytes and no data");
  EXPECT_EQ(g_executes.load(), 0) << "the plugin's execute ran on a bad input";
  EXPECT_EQ(run({good}), "");
  EXPECT_EQ(g_executes.load(), 1);
  // A free check_input: a negative dim of a view is refused whatever the spec.
  sdk::InputSpec any;
  sdk::TensorView v;
  v.dtype = KILN_DTYPE_FLOAT32;
  v.rank = 2;
  v.dims = neg;
  try {
    sdk::check_input(3, any, v);
    ADD_FAILURE() << "a negative dim passed";
  } catch (const sdk::Error& e) {
    EXPECT_STREQ(e.what(), "input 3 has a negative dim: [2, -3]");
  }
  l.api->compiled_release(c);
  l.api->instance_release(inst);
}

}  // namespace
}  // namespace kiln::abi_test
