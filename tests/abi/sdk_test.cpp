// The C++ SDK: options against a schema, older host tables, and every
// exception type turned into a status at the boundary.
#include <gtest/gtest.h>

#include <cstring>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/host.h"

namespace kiln::abi_test {
namespace {

std::vector<sdk::OptionSpec> schema() {
  return {{"n", KILN_OPTION_INT, "3", "a count"},
          {"on", KILN_OPTION_BOOL, "false", "a switch"},
          {"x", KILN_OPTION_FLOAT, "0.5", "a ratio"},
          {"s", KILN_OPTION_STRING, "", "text"}};
}

TEST(SdkTest, OptionsAreTypedAndUnknownKeysListTheKnownOnes) {
  sdk::Options o(schema());
  EXPECT_EQ(o.get_int("n"), 3);
  EXPECT_FALSE(o.get_bool("on"));
  EXPECT_DOUBLE_EQ(o.get_float("x"), 0.5);
  o.set("n", "-7");
  o.set("on", "yes");
  o.set("x", "1e-3");
  EXPECT_EQ(o.get_int("n"), -7);
  EXPECT_TRUE(o.get_bool("on"));
  EXPECT_DOUBLE_EQ(o.get_float("x"), 1e-3);
  try {
    o.set("m", "1");
    FAIL() << "no error";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(), "unknown option 'm'; known options: n (int), on (bool), x (float), s (string)");
  }
  for (auto [k, v] : std::vector<std::pair<const char*, const char*>>{
           {"n", "1.5"}, {"n", ""}, {"n", "99999999999999999999"}, {"on", "maybe"}, {"x", "nan"}, {"x", "1x"}}) {
    EXPECT_THROW(o.set(k, v), sdk::Error) << k << "=" << v;
  }
  EXPECT_EQ(o.get_int("n"), -7);  // a failed set changes nothing
}

TEST(SdkTest, OlderHostTableIsZeroExtended) {
  // A host whose table ends before log_enabled (as an older 1.x host might).
  kiln_host_api_t old;
  std::memcpy(&old, runtime::host_api(), sizeof(old));
  old.header.struct_size = offsetof(kiln_host_api_t, log_enabled);
  old.log_enabled = nullptr;
  kiln_host ctx;
  std::vector<std::string> got;
  ctx.sink = [&](kiln_log_level_t, const std::string&, const std::string& m) { got.push_back(m); };
  sdk::Host host(&old, &ctx);
  EXPECT_EQ(host.api().log_enabled, nullptr);
  EXPECT_EQ(host.api().parallel_for, nullptr);  // beyond its size: never read
  EXPECT_TRUE(host.log_enabled(KILN_LOG_ERROR));  // falls back to "log exists"
  host.log(KILN_LOG_ERROR, "hello");
  EXPECT_EQ(got, (std::vector<std::string>{"hello"}));
  sdk::ExecContext ec(&host, nullptr);
  int64_t covered = 0;
  ec.parallel_for(10, 1, [&](int64_t b, int64_t e) { covered += e - b; });  // inline without a host pool
  EXPECT_EQ(covered, 10);
  EXPECT_EQ(ec.num_threads(), 1);
}

TEST(SdkTest, HostStatusesBecomeErrors) {
  kiln_host ctx;
  sdk::Host host(runtime::host_api(), &ctx);
  try {
    host.check(runtime::host_api()->status_create(KILN_STATUS_OUT_OF_RANGE, "index 9"));
    FAIL();
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), KILN_STATUS_OUT_OF_RANGE);
    EXPECT_STREQ(e.what(), "index 9");
  }
  EXPECT_NO_THROW(host.check(nullptr));
  char* s = host.strdup("abc");
  EXPECT_STREQ(s, "abc");
  EXPECT_EQ(ctx.stats().live_blocks, 1);
  host.free(s);
  EXPECT_EQ(ctx.stats().live_blocks, 0);
}

// Every override throws something different; every call must come back as a status.
class Thrower final : public sdk::Plugin {
 public:
  Info info() const override { return {"thrower", "1", "tests", "", "", 0}; }
  std::string unavailable_reason() override { throw std::runtime_error("avail"); }
  std::vector<sdk::OptionSpec> option_schema() const override { return {{"k", KILN_OPTION_INT, "0", "k"}}; }
  bool supports_export() const override { return true; }
  void check_compiled(const uint8_t*, size_t) const override { throw 7; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    if (o.get_int("k") == 1) throw std::bad_alloc();
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      void get_capability(const sdk::Graph&, sdk::Capability&) override { throw std::logic_error("cap"); }
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition&) override {
        struct Weird {};
        throw Weird{};
      }
      void set_property(const std::string&, const std::string&) override {
        sdk::fail(KILN_STATUS_NOT_FOUND, "no such property");
      }
    };
    return std::make_unique<Inst>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(thrower_entry, Thrower)

TEST(SdkTest, EveryExceptionBecomesAStatus) {
  auto reg = registry_of({});
  ASSERT_TRUE(kiln::runtime::registry_impl(*reg).add_entry(&thrower_entry, "(test)").is_ok());
  auto p = kiln::runtime::registry_impl(*reg).all().at(0);
  EXPECT_FALSE(p->available());
  EXPECT_EQ(p->info().unavailable_reason, "uncaught exception in plugin_is_available: avail");
  const kiln_backend_api_t& api = p->api();
  kiln_instance_t* inst = nullptr;
  const char* k[] = {"k"};
  const char* one[] = {"1"};
  Status st = runtime::take_status(api.instance_create(p->handle(), 0, k, one, 1, &inst));
  EXPECT_EQ(st.message(), "out of memory");
  EXPECT_EQ(inst, nullptr);
  ASSERT_EQ(api.instance_create(p->handle(), 0, nullptr, nullptr, 0, &inst), nullptr);
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1});
  b.output(b.node("Relu", {x}, "r", {1}));
  auto g = b.graph();
  std::vector<int32_t> all{0};
  auto view = runtime::make_graph_view(*g, nullptr, all, {});
  kiln_capability_t cap{};
  cap.struct_size = sizeof(cap);
  st = runtime::take_status(api.instance_get_capability(inst, view.get(), &cap));
  EXPECT_EQ(st.message(), "uncaught exception in instance_get_capability: cap");
  EXPECT_EQ(cap.group_sizes, nullptr);
  kiln_partition_t part{};
  part.struct_size = sizeof(part);
  size_t node = 0;
  part.num_nodes = 1;
  part.nodes = &node;
  kiln_compiled_t* c = nullptr;
  st = runtime::take_status(api.instance_compile(inst, view.get(), &part, &c));
  EXPECT_EQ(st.message(), "uncaught exception in instance_compile: an exception that is not a std::exception");
  st = runtime::take_status(api.instance_set_property(inst, "a", "b"));
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  char* value = nullptr;
  st = runtime::take_status(api.instance_get_property(inst, "zz", &value));
  EXPECT_EQ(st.message(), "unknown option 'zz'; known options: k (int)");
  st = runtime::take_status(api.plugin_check_compiled(p->handle(), "x", 1));
  EXPECT_EQ(st.message(), "uncaught exception in plugin_check_compiled: an exception that is not a std::exception");
  st = runtime::take_status(api.instance_import(inst, "x", 1, &c));
  EXPECT_FALSE(st.is_ok());
  EXPECT_EQ(c, nullptr);
  // NULL out-parameters are errors, not crashes.
  st = runtime::take_status(api.instance_create(p->handle(), 0, nullptr, nullptr, 0, nullptr));
  EXPECT_NE(st.message().find("out_instance is NULL"), std::string::npos);
  st = runtime::take_status(api.instance_create(p->handle(), 5, nullptr, nullptr, 0, &inst));
  EXPECT_NE(st.message().find("device 5 does not exist"), std::string::npos);
  api.instance_release(inst);
  EXPECT_EQ(p->stats().live_blocks, 1);  // only the plugin object is left
}

// A NULL handle or out-parameter is INVALID_ARGUMENT from every trampoline
// (never OK with nothing written); only the releases accept NULL.
TEST(SdkTest, NullHandlesAndOutParametersAreInvalidArguments) {
  auto reg = registry_of({});
  ASSERT_TRUE(kiln::runtime::registry_impl(*reg).add_entry(&thrower_entry, "(test)").is_ok());
  auto p = kiln::runtime::registry_impl(*reg).all().at(0);
  const kiln_backend_api_t& api = p->api();
  kiln_plugin_t* plugin = p->handle();
  auto expect_invalid = [](kiln_status_t* raw, const char* what) {
    Status st = runtime::take_status(raw);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what << ": " << st.to_string();
    EXPECT_NE(st.message().find("NULL"), std::string::npos) << what << ": " << st.message();
  };
  size_t n = 0;
  kiln_plugin_info_t pi{};
  pi.struct_size = sizeof(pi);
  kiln_device_info_t di{};
  di.struct_size = sizeof(di);
  kiln_option_info_t oi{};
  oi.struct_size = sizeof(oi);
  expect_invalid(api.plugin_get_info(nullptr, &pi), "get_info handle");
  expect_invalid(api.plugin_get_info(plugin, nullptr), "get_info out");
  expect_invalid(api.plugin_is_available(nullptr), "is_available");
  expect_invalid(api.plugin_get_device_count(nullptr, &n), "device_count handle");
  expect_invalid(api.plugin_get_device_count(plugin, nullptr), "device_count out");
  expect_invalid(api.plugin_get_device_info(nullptr, 0, &di), "device_info handle");
  expect_invalid(api.plugin_get_device_info(plugin, 0, nullptr), "device_info out");
  expect_invalid(api.plugin_get_option_count(plugin, nullptr), "option_count out");
  expect_invalid(api.plugin_get_option_info(plugin, 0, nullptr), "option_info out");
  expect_invalid(api.plugin_check_compiled(nullptr, "x", 1), "check_compiled");
  kiln_instance_t* inst = nullptr;
  expect_invalid(api.instance_create(nullptr, 0, nullptr, nullptr, 0, &inst), "instance_create handle");
  EXPECT_EQ(inst, nullptr);
  expect_invalid(api.instance_set_property(nullptr, "k", "1"), "set_property");
  char* value = nullptr;
  expect_invalid(api.instance_get_property(nullptr, "k", &value), "get_property");
  kiln_capability_t cap{};
  cap.struct_size = sizeof(cap);
  expect_invalid(api.instance_get_capability(nullptr, nullptr, &cap), "get_capability");
  kiln_compiled_t* c = nullptr;
  expect_invalid(api.instance_compile(nullptr, nullptr, nullptr, &c), "compile");
  expect_invalid(api.instance_import(nullptr, "x", 1, &c), "import");
  kiln_compiled_info_t ci{};
  ci.struct_size = sizeof(ci);
  expect_invalid(api.compiled_get_info(nullptr, &ci), "compiled_get_info");
  expect_invalid(api.compiled_execute(nullptr, nullptr, nullptr, 0), "execute");
  void* bytes = nullptr;
  expect_invalid(api.compiled_export(nullptr, &bytes, &n), "export");
  EXPECT_EQ(c, nullptr);
  api.compiled_release(nullptr);
  api.instance_release(nullptr);
}

}  // namespace
}  // namespace kiln::abi_test
