// The SDK's ABI 1.1 device wrappers, against a host table whose fence,
// workspace and trace entries are the test's own (and against a table cut at
// the 1.0 size): compiled info with memory kinds, workspace and in-place
// pairs; an asynchronous execute whose fence is signalled exactly once;
// device memory trampolines; trace scopes.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/host.h"

namespace kiln::abi_test {
namespace {

// What the test host saw.
struct Signal {
  uint64_t value;
  int32_t code;  // KILN_STATUS_OK for success
  std::string message;
};
std::mutex g_mu;
std::vector<Signal> g_signals;
std::vector<std::string> g_events;
char g_scratch[256];

void test_fence_signal(kiln_fence_t*, uint64_t value, kiln_status_t* error) {
  const kiln_host_api_t* h = runtime::host_api();
  std::lock_guard<std::mutex> lock(g_mu);
  g_signals.push_back({value, h->status_code(error), h->status_message(error)});
  h->status_release(error);
}
void* test_workspace(kiln_exec_context_t*, int32_t kind, size_t* out_size) {
  *out_size = kind == KILN_MEMORY_HOST ? sizeof(g_scratch) : 0;
  return kind == KILN_MEMORY_HOST ? g_scratch : nullptr;
}
bool test_trace_enabled(kiln_exec_context_t*) { return true; }
void test_trace_event(kiln_exec_context_t*, const char* name, int32_t track, uint64_t b, uint64_t e) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.push_back(std::string(name) + "@" + std::to_string(track) + (e >= b ? "" : " (ends before it begins)"));
}

kiln_host_api_t test_table(bool v1_0) {
  kiln_host_api_t t;
  std::memcpy(&t, runtime::host_api(), sizeof(t));
  t.fence_signal = &test_fence_signal;
  t.exec_workspace = &test_workspace;
  t.exec_trace_enabled = &test_trace_enabled;
  t.exec_trace_event = &test_trace_event;
  if (v1_0) t.header.struct_size = offsetof(kiln_host_api_t, exec_should_cancel);  // a 1.0 host's table
  return t;
}

enum class Mode { kSync, kThread, kDrop, kThrow };
Mode g_mode = Mode::kSync;

class Dev final : public sdk::Plugin {
 public:
  Info info() const override { return {"dev", "1", "tests", "", "", 0}; }
  bool device_memory() const override { return true; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      void get_capability(const sdk::Graph&, sdk::Capability&) override {}
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition& p) override {
        if (p.id == "bad-kinds") {
          struct Bad final : sdk::Compiled {
            void execute(sdk::ExecContext&, const sdk::Inputs&) override {}
            size_t num_inputs() const override { return 1; }
            size_t num_outputs() const override { return 1; }
            std::vector<kiln_memory_kind_t> output_memory_kinds() const override {
              return {KILN_MEMORY_DEVICE, KILN_MEMORY_DEVICE};
            }
          };
          return std::make_unique<Bad>();
        }
        return std::make_unique<C>();
      }
      void* allocate(kiln_memory_kind_t, uint32_t, size_t size, size_t) override {
        return size > 1024 ? nullptr : std::malloc(size);
      }
      void deallocate(kiln_memory_kind_t, void* p) noexcept override { std::free(p); }
      void copy(const std::vector<sdk::Copy>& copies, sdk::Fence done) override {
        for (const sdk::Copy& c : copies) std::memcpy(c.dst, c.src, c.bytes);
        done.signal();
      }
    };
    return std::make_unique<Inst>(std::move(o));
  }
  struct C final : sdk::Compiled {
    void execute(sdk::ExecContext& ctx, const sdk::Inputs&) override {
      sdk::TraceScope t(ctx, "compute", 0);
      sdk::ExecContext::Span s = ctx.workspace(KILN_MEMORY_HOST);
      if (s.data) std::memset(s.data, 7, s.size);
    }
    size_t num_inputs() const override { return 1; }
    size_t num_outputs() const override { return 1; }
    std::vector<kiln_memory_kind_t> input_memory_kinds() const override { return {KILN_MEMORY_DEVICE}; }
    std::vector<kiln_memory_kind_t> output_memory_kinds() const override { return {KILN_MEMORY_DEVICE}; }
    std::array<uint64_t, KILN_MEMORY_KIND_COUNT> workspace_bytes() const override { return {256, 0, 4096, 0}; }
    std::vector<std::pair<size_t, size_t>> inplace_pairs() const override { return {{0, 0}}; }
    std::vector<std::string> owned_constants() const override { return {"w"}; }
    bool is_async() const override { return true; }
    void execute_async(sdk::ExecContext& ctx, const sdk::Inputs& in, sdk::Fence done) override {
      switch (g_mode) {
        case Mode::kSync: return sdk::Compiled::execute_async(ctx, in, done);
        case Mode::kThread: {
          std::vector<sdk::HeldTensor> held = sdk::hold(in);
          std::thread([done, held]() mutable {
            if (held.at(0).dims.size() == 2) done.signal();
            else done.fail(KILN_STATUS_INTERNAL, "lost the dims");
          }).join();
          return;
        }
        case Mode::kDrop: return;  // never signals
        case Mode::kThrow: {
          sdk::Fence keep = done;  // even a copy kept by the plugin no longer signals
          sdk::fail(KILN_STATUS_RESOURCE_EXHAUSTED, "no queue space");
        }
      }
    }
  };
};
KILN_BACKEND_DEFINE_ENTRY(dev_entry, Dev)

struct DevHarness {
  kiln_host_api_t table;
  kiln_host ctx;
  const kiln_backend_api_t* api = nullptr;
  kiln_plugin_t* plugin = nullptr;
  kiln_instance_t* inst = nullptr;
  bool old_host;
  explicit DevHarness(bool v1_0) : table(test_table(v1_0)), old_host(v1_0) {
    kiln_backend_entry_args_t args{};
    args.struct_size = sizeof(args);
    args.min_abi_major = args.max_abi_major = 1;
    args.max_abi_minor = v1_0 ? 0 : 1;
    args.host_api = &table;
    args.host = &ctx;
    EXPECT_EQ(dev_entry(&args, &api, &plugin), nullptr);
    EXPECT_EQ(api->instance_create(plugin, 0, nullptr, nullptr, 0, &inst), nullptr);
  }
  ~DevHarness() {
    api->instance_release(inst);
    api->plugin_release(plugin);
  }
  // A handle for partition `id` over a one-Relu graph.
  kiln_status_t* compile(const char* id, kiln_compiled_t** out) {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {2, 3});
    b.output(b.node("Relu", {x}, "r", {2, 3}));
    g = b.graph();
    std::vector<int32_t> all{0};
    view = runtime::make_graph_view(*g, nullptr, all, {});
    in = &view->values[static_cast<size_t>(g->nodes[0].inputs[0])];
    out_v = &view->values[static_cast<size_t>(g->nodes[0].outputs[0])];
    kiln_partition_t part{};
    part.struct_size = sizeof(part);
    part.id = id;
    part.num_nodes = 1;
    part.nodes = &node;
    part.num_inputs = 1;
    part.inputs = &in;
    part.num_outputs = 1;
    part.outputs = &out_v;
    kiln_status_t* st = api->instance_compile(inst, view.get(), &part, out);
    if (st) return st;
    // As the host does after compile: a 1.0 host's struct ends before the 1.1 members.
    kiln_compiled_info_t info{};
    info.struct_size = old_host ? offsetof(kiln_compiled_info_t, flags) : sizeof(info);
    return api->compiled_get_info(*out, &info);
  }
  std::shared_ptr<ir::Graph> g;
  std::unique_ptr<kiln_graph> view;
  const kiln_value_t* in = nullptr;
  const kiln_value_t* out_v = nullptr;
  size_t node = 0;
};

std::vector<Signal> take_signals() {
  std::lock_guard<std::mutex> lock(g_mu);
  return std::exchange(g_signals, {});
}

TEST(SdkDeviceTest, CompiledInfoCarriesKindsWorkspaceInPlaceAndOwnedConstants) {
  DevHarness p(false);
  kiln_compiled_t* c = nullptr;
  ASSERT_EQ(p.compile("ok", &c), nullptr);
  kiln_compiled_info_t info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(p.api->compiled_get_info(c, &info), nullptr);
  EXPECT_EQ(info.flags, uint32_t{KILN_COMPILED_ASYNC});
  ASSERT_NE(info.input_memory_kinds, nullptr);
  EXPECT_EQ(info.input_memory_kinds[0], KILN_MEMORY_DEVICE);
  ASSERT_NE(info.output_memory_kinds, nullptr);
  EXPECT_EQ(info.output_memory_kinds[0], KILN_MEMORY_DEVICE);
  EXPECT_EQ(info.workspace_bytes[KILN_MEMORY_HOST], 256u);
  EXPECT_EQ(info.workspace_bytes[KILN_MEMORY_DEVICE], 4096u);
  ASSERT_EQ(info.num_inplace, 1u);
  EXPECT_EQ(info.inplace_pairs[0], 0u);
  EXPECT_EQ(info.inplace_pairs[1], 0u);
  ASSERT_EQ(info.num_owned_constants, 1u);
  EXPECT_STREQ(info.owned_constants[0], "w");
  // A 1.0 host's struct ends before flags: the SDK writes nothing past it.
  kiln_compiled_info_t old;
  std::memset(&old, 0xab, sizeof(old));
  old.struct_size = offsetof(kiln_compiled_info_t, flags);
  ASSERT_EQ(p.api->compiled_get_info(c, &old), nullptr);
  EXPECT_EQ(old.num_inputs, 1u);
  EXPECT_EQ(old.flags, 0xababababu);
  p.api->compiled_release(c);
  // Kinds for two outputs of a one-output handle: compile fails, naming it.
  Status st = runtime::take_status(p.compile("bad-kinds", &c));
  EXPECT_EQ(st.message(), "output memory kinds: 2 entries for 1 outputs");
}

TEST(SdkDeviceTest, AsyncExecuteSignalsItsFenceExactlyOnce) {
  DevHarness p(false);
  kiln_compiled_t* c = nullptr;
  ASSERT_EQ(p.compile("ok", &c), nullptr);
  Tensor x = Tensor::allocate(DType::kFloat32, Shape({2, 3}));
  kiln_tensor_t v{};
  ASSERT_TRUE(runtime::tensor_view(x, &v).is_ok());
  v.memory_kind = KILN_MEMORY_DEVICE;
  const kiln_tensor_t* ins[] = {&v};
  auto fence = reinterpret_cast<kiln_fence_t*>(&p);  // the test host's fence_signal never dereferences it
  take_signals();
  g_events.clear();

  g_mode = Mode::kSync;
  ASSERT_EQ(p.api->compiled_execute_async(c, nullptr, ins, 1, fence, 1), nullptr);
  auto s = take_signals();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].value, 1u);
  EXPECT_EQ(s[0].code, KILN_STATUS_OK);
  EXPECT_EQ(g_events, (std::vector<std::string>{"compute@0"}));  // TraceScope on a tracing host
  EXPECT_EQ(g_scratch[0], 7);                                     // the host's workspace was handed over

  g_mode = Mode::kThread;  // signalled from another thread, with dims kept past the call
  ASSERT_EQ(p.api->compiled_execute_async(c, nullptr, ins, 1, fence, 2), nullptr);
  s = take_signals();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].code, KILN_STATUS_OK) << s[0].message;

  g_mode = Mode::kDrop;  // the plugin forgets the fence: the SDK fails it rather than leave waiters hanging
  ASSERT_EQ(p.api->compiled_execute_async(c, nullptr, ins, 1, fence, 3), nullptr);
  s = take_signals();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].code, KILN_STATUS_INTERNAL);
  EXPECT_EQ(s[0].message, "the plugin dropped the fence for value 3 without signalling it");

  g_mode = Mode::kThrow;  // an error return: nothing queued, the fence is not signalled
  Status st = runtime::take_status(p.api->compiled_execute_async(c, nullptr, ins, 1, fence, 4));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(take_signals().empty());

  v.memory_kind = KILN_MEMORY_HOST;  // the handle declared a device input
  st = runtime::take_status(p.api->compiled_execute_async(c, nullptr, ins, 1, fence, 5));
  EXPECT_EQ(st.message(), "input 0 'x' is in host memory; the partition declared device");
  EXPECT_TRUE(take_signals().empty());
  p.api->compiled_release(c);
}

TEST(SdkDeviceTest, DeviceMemoryEntriesCheckKindsAndAlignment) {
  DevHarness p(false);
  ASSERT_NE(p.api->instance_alloc, nullptr);
  void* ptr = nullptr;
  ASSERT_EQ(p.api->instance_alloc(p.inst, KILN_MEMORY_DEVICE, 0, 64, 0, &ptr), nullptr);
  ASSERT_NE(ptr, nullptr);
  Status st = runtime::take_status(p.api->instance_alloc(p.inst, KILN_MEMORY_HOST, 0, 64, 0, &ptr));
  EXPECT_EQ(st.message(), "instance_alloc: host is not a kind to allocate");
  st = runtime::take_status(p.api->instance_alloc(p.inst, KILN_MEMORY_DEVICE, 0, 64, 3, &ptr));
  EXPECT_EQ(st.message(), "instance_alloc: alignment 3 is not a power of two");
  void* big = nullptr;
  st = runtime::take_status(p.api->instance_alloc(p.inst, KILN_MEMORY_DEVICE, 0, 4096, 0, &big));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(big, nullptr);
  const char src[] = "abc";
  kiln_copy_t cp{};
  cp.struct_size = sizeof(cp);
  cp.src = src;
  cp.dst = ptr;
  cp.dst_kind = KILN_MEMORY_DEVICE;
  cp.bytes = sizeof(src);
  take_signals();
  ASSERT_EQ(p.api->instance_copy(p.inst, &cp, 1, reinterpret_cast<kiln_fence_t*>(&p), 9), nullptr);
  EXPECT_STREQ(static_cast<const char*>(ptr), "abc");
  auto s = take_signals();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].value, 9u);
  p.api->instance_free(p.inst, KILN_MEMORY_DEVICE, ptr);
  p.api->instance_free(p.inst, KILN_MEMORY_DEVICE, nullptr);
}

TEST(SdkDeviceTest, OnA10HostTheHelpersDoNothing) {
  DevHarness p(true);
  kiln_compiled_t* c = nullptr;
  ASSERT_EQ(p.compile("ok", &c), nullptr);
  sdk::Host host(&p.table, &p.ctx);
  EXPECT_EQ(host.api().fence_signal, nullptr);  // beyond the 1.0 table: zero-extended
  sdk::ExecContext ec(&host, nullptr);
  EXPECT_FALSE(ec.trace_enabled());
  EXPECT_EQ(ec.workspace(KILN_MEMORY_HOST).data, nullptr);
  EXPECT_FALSE(ec.should_cancel());
  const uint64_t t0 = host.now_ns();
  EXPECT_GT(t0, 0u);
  EXPECT_GE(host.now_ns(), t0);
  g_events.clear();
  { sdk::TraceScope t(ec, "quiet"); }
  EXPECT_TRUE(g_events.empty());
  // The host never saw the declared device input: it passes host memory, and the SDK lets it through.
  Tensor x = Tensor::allocate(DType::kFloat32, Shape({2, 3}));
  kiln_tensor_t v{};
  ASSERT_TRUE(runtime::tensor_view(x, &v).is_ok());
  const kiln_tensor_t* ins[] = {&v};
  EXPECT_EQ(runtime::take_status(p.api->compiled_execute(c, nullptr, ins, 1)).message(), "");
  take_signals();
  {
    sdk::Fence f(&host, reinterpret_cast<kiln_fence_t*>(&p), 1);
    EXPECT_TRUE(f.signal());   // no fence_signal on a 1.0 host: nothing to call, no crash
    EXPECT_FALSE(f.signal());  // once only
  }
  EXPECT_TRUE(take_signals().empty());
  p.api->compiled_release(c);
}

}  // namespace
}  // namespace kiln::abi_test
