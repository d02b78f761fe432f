// The loader and the registry: every way a plugin can fail to load is one
// line and the others still load; discovery order; duplicates; reference-
// counted unload and reload; plugins linked into the process.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"

namespace kiln::abi_test {
namespace {

namespace fs = std::filesystem;

std::string only_error(const BackendRegistry& r) {
  auto e = r.errors();
  EXPECT_EQ(e.size(), 1u);
  return e.empty() ? "" : e[0].message;
}

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("kiln_abi_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

bool mapped(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

TEST(LoaderTest, EachFailureIsOneLineNamingTheProblem) {
  EXPECT_EQ(only_error(*registry_of({"/nonexistent/libkiln_nothing.so"})), "file or folder not found");
  EXPECT_EQ(only_error(*registry_of({fake("no_entry")})), "not a Kiln plugin: it does not export 'kiln_backend_entry'");
  EXPECT_EQ(only_error(*registry_of({fake("wrong_major")})),
            "ABI major version mismatch: the plugin speaks 2.3, this host speaks 1.1 (rebuild the plugin against "
            "this Kiln's kiln/c/backend.h)");
  EXPECT_EQ(only_error(*registry_of({fake("init_error")})),
            "the plugin's init failed: libfakevendor.so.3 is not installed (apt-get install fakevendor-runtime)");
  EXPECT_EQ(only_error(*registry_of({fake("missing_dep")})),
            "a library it needs is missing: libkiln_fake_dep.so (install it or add its folder to LD_LIBRARY_PATH)");
  EXPECT_EQ(only_error(*registry_of({fake("failing")})), "plugin_get_device_count: fake failure in devices");
  {
    ScopedEnv env("KILN_FAKE_FAIL", "all");
    EXPECT_EQ(only_error(*registry_of({fake("failing")})), "plugin_get_info: fake failure in info");
  }
  fs::path dir = temp_dir("text");
  std::ofstream(dir / "libnotaplugin.so") << "just text\n";
  EXPECT_NE(only_error(*registry_of({(dir / "libnotaplugin.so").string()})).find("not a Kiln plugin: not a shared library"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(LoaderTest, AFolderLoadsWhatItCanAndReportsTheRest) {
  auto reg = registry_of({KILN_FAKES_DIR});
  std::vector<std::string> names;
  for (const BackendInfo& b : reg->backends()) names.push_back(b.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"bad_answers", "crashing", "minimal", "newer", "no_unload", "nonconvex", "throwing", "vendor"}));
  std::vector<std::string> failed;
  for (const BackendLoadError& e : reg->errors()) failed.push_back(fs::path(e.path).filename().string());
  std::sort(failed.begin(), failed.end());
  EXPECT_EQ(failed, (std::vector<std::string>{"libkiln_fake_failing.so", "libkiln_fake_init_error.so",
                                              "libkiln_fake_missing_dep.so", "libkiln_fake_no_entry.so",
                                              "libkiln_fake_wrong_major.so"}));
  EXPECT_EQ(reg->search_dirs().size(), 1u);
}

TEST(LoaderTest, EnvironmentPathIsSearchedAfterExplicitPaths) {
  ScopedEnv env("KILN_BACKEND_PATH", (fake("minimal") + "::/nonexistent/kiln_dir").c_str());
  BackendDiscovery d;
  d.paths = {template_plugin()};
  d.use_default_dirs = false;
  auto reg = BackendRegistry::create(d);
  auto b = reg->backends();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].name, "template");
  EXPECT_EQ(b[1].name, "minimal");
  EXPECT_EQ(only_error(*reg), "file or folder not found");
  EXPECT_TRUE(reg->find("minimal").ok());
  EXPECT_NE(reg->find("nope").status().message().find("no backend named 'nope'; loaded: template ("), std::string::npos);
}

TEST(LoaderTest, DuplicateNamesAreDiagnosedAndTheFirstKept) {
  fs::path a = temp_dir("dup_a"), b = temp_dir("dup_b");
  fs::copy_file(template_plugin(), a / "libkiln_template.so");
  fs::copy_file(template_plugin(), b / "libkiln_template.so");
  auto reg = registry_of({a.string(), b.string()});
  ASSERT_EQ(reg->backends().size(), 1u);
  EXPECT_EQ(reg->backends()[0].path, (a / "libkiln_template.so").string());
  EXPECT_NE(only_error(*reg).find("duplicate backend name 'template': already loaded from " +
                                  (a / "libkiln_template.so").string()),
            std::string::npos);
  // The same file twice is simply loaded once.
  auto same = registry_of({template_plugin(), template_plugin()});
  EXPECT_EQ(same->backends().size(), 1u);
  EXPECT_TRUE(same->errors().empty());
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(LoaderTest, OptionalEntriesGetDefaultsAndTablesOfOtherMinorsWork) {
  auto reg = registry_of({fake("minimal"), fake("newer")});
  auto plugins = kiln::runtime::registry_impl(*reg).all();
  ASSERT_EQ(plugins.size(), 2u);
  const runtime::LoadedPlugin& minimal = *plugins[0];
  EXPECT_LT(minimal.declared_table_size(), sizeof(kiln_backend_api_t));
  EXPECT_EQ(minimal.api().compiled_export, nullptr);  // set past its struct_size: not read
  EXPECT_EQ(minimal.info().abi_version, "1.0");
  ASSERT_EQ(minimal.info().devices.size(), 1u);
  EXPECT_EQ(minimal.info().devices[0].name, "default");
  EXPECT_TRUE(minimal.info().options.empty());
  EXPECT_FALSE(minimal.info().supports_export);
  EXPECT_TRUE(minimal.available());
  EXPECT_EQ(plugins[1]->info().abi_version, "1." + std::to_string(KILN_BACKEND_ABI_MINOR + 1));
  EXPECT_GT(plugins[1]->declared_table_size(), sizeof(kiln_backend_api_t));

  GraphBuilder b;
  ir::ValueId x = b.input("x", {5});
  b.output(b.node("Relu", {x}, "r", {5}));
  for (const char* name : {"minimal", "newer"}) {
    auto p = build(b.graph(), reg.get(), {name}, {}, FallbackPolicy::kRequire);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().to_string();
    std::vector<Value> in{Value(Tensor::from_vector<float>({-1, 2, -3, 4, 0}))};
    auto out = (*p)->run(in, {}, nullptr);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(std::vector<float>(out.value()[0].tensor().data<float>(), out.value()[0].tensor().data<float>() + 5),
              (std::vector<float>{0, 2, 0, 4, 0}));
  }
}

TEST(LoaderTest, LibraryStaysLoadedWhileItsObjectsLiveThenUnloadsAndReloads) {
  const std::string path = fake("minimal");
  ASSERT_FALSE(mapped(path));
  std::shared_ptr<runtime::BackendInstance> inst;
  {
    auto reg = registry_of({path});
    auto made = kiln::runtime::registry_impl(*reg).all().at(0)->create_instance(0, {});
    ASSERT_TRUE(made.ok());
    inst = *made;
  }
  EXPECT_TRUE(mapped(path));  // the registry is gone, the instance holds the library
  inst.reset();
  EXPECT_FALSE(mapped(path));
  auto again = registry_of({path});
  ASSERT_EQ(again->backends().size(), 1u);
  EXPECT_TRUE(kiln::runtime::registry_impl(*again).all().at(0)->create_instance(0, {}).ok());
}

// KILN_PLUGIN_NO_UNLOAD: the fake's thread keeps running its code after the
// last release; unloading the library would crash this process.
TEST(LoaderTest, APluginThatKeepsThreadsIsNeverUnloaded) {
  const std::string path = fake("no_unload");
  {
    auto reg = registry_of({path});
    ASSERT_EQ(reg->backends().size(), 1u) << only_error(*reg);
    EXPECT_TRUE(reg->backends()[0].no_unload);
    ASSERT_TRUE(kiln::runtime::registry_impl(*reg).all().at(0)->create_instance(0, {}).ok());
  }
  EXPECT_TRUE(mapped(path));
  // Plugins without the flag are still unloaded (LibraryStaysLoadedWhileItsObjectsLive...).
  auto reg = registry_of({fake("minimal")});
  EXPECT_FALSE(reg->backends().at(0).no_unload);
}

TEST(LoaderTest, LeakedHostMemoryIsReportedAndFreedAtUnload) {
  std::vector<std::string> logs;
  {
    auto reg = registry_of({});
    kiln::runtime::registry_impl(*reg).load_options.log_sink = [&](kiln_log_level_t, const std::string&, const std::string& m) {
      logs.push_back(m);
    };
    ASSERT_TRUE(reg->load(fake("bad_answers")).is_ok());
    auto p = kiln::runtime::registry_impl(*reg).all().at(0);
    auto inst = p->create_instance(0, {});  // bad_answers leaks 128 host bytes per instance
    ASSERT_TRUE(inst.ok());
  }
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0], "leak: 1 blocks (128 bytes) of host memory were never freed; freed at unload");
}

TEST(LoaderTest, VendorLibraryIsLoadedLazilyAndDecidesAvailability) {
  {
    auto reg = registry_of({fake("vendor_missing")});
    BackendInfo info = reg->backends().at(0);
    EXPECT_FALSE(info.available);
    EXPECT_NE(info.unavailable_reason.find("libkiln_fake_vendor.so.1 not found"), std::string::npos);
    EXPECT_EQ(info.vendor_sdk_version, "");
  }
  ScopedEnv env("KILN_FAKE_VENDOR_LIB", "libm.so.6");
  auto reg = registry_of({fake("vendor_missing")});
  BackendInfo info = reg->backends().at(0);
  EXPECT_TRUE(info.available) << info.unavailable_reason;
  EXPECT_EQ(info.vendor_sdk_version, "fake-sdk 9.9");
}

TEST(LoaderTest, ExceptionsInThePluginConstructorBecomeTheInitError) {
  ScopedEnv env("KILN_FAKE_THROW", "construct");
  EXPECT_EQ(only_error(*registry_of({fake("throwing")})),
            "the plugin's init failed: uncaught exception in plugin construction: boom in the plugin constructor");
}

// A plugin linked into the test binary, registered explicitly.
class LinkedPlugin final : public sdk::Plugin {
 public:
  Info info() const override { return {"linked", "2.0", "tests", "", "in-process", 3}; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      void get_capability(const sdk::Graph& g, sdk::Capability& cap) override {
        for (size_t i = 0; i < g.num_nodes(); ++i) cap.decline(i, "linked plugin runs nothing");
      }
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition&) override {
        sdk::fail(KILN_STATUS_UNIMPLEMENTED, "nothing");
      }
    };
    return std::make_unique<Inst>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(linked_entry, LinkedPlugin)

TEST(LoaderTest, PluginsLinkedIntoTheProcessRegisterExplicitly) {
  auto reg = registry_of({});
  ASSERT_TRUE(kiln::runtime::registry_impl(*reg).add_entry(&linked_entry, "(built-in)").is_ok());
  ASSERT_EQ(reg->backends().size(), 1u);
  EXPECT_EQ(reg->backends()[0].name, "linked");
  EXPECT_EQ(reg->backends()[0].path, "(built-in)");
  EXPECT_FALSE(kiln::runtime::registry_impl(*reg).add_entry(&linked_entry, "(built-in again)").is_ok());  // duplicate name
  // Priority 3: chosen by default.
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2});
  b.output(b.node("Relu", {x}, "r", {2}));
  auto p = build(b.graph(), reg.get(), {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->placement().backends, (std::vector<std::string>{"linked", "portable"}));
  EXPECT_EQ((*p)->placement().nodes[0].reasons[0].second, "linked plugin runs nothing");
}

// An entry whose table is too small to use but does hold plugin_release: the
// plugin object exists once the entry has run, so refusing it must release it.
int g_short_table_releases = 0;
struct ShortTable {
  kiln_abi_header_t header;
  void (*plugin_release)(kiln_plugin_t*);
};
kiln_status_t* short_table_entry(const kiln_backend_entry_args_t*, const kiln_backend_api_t** out_api,
                                 kiln_plugin_t** out_plugin) {
  static int object = 0;
  static const ShortTable table = {{sizeof(ShortTable), KILN_BACKEND_ABI_MAJOR, 0},
                                   [](kiln_plugin_t* p) {
                                     if (p) ++g_short_table_releases;
                                   }};
  *out_api = reinterpret_cast<const kiln_backend_api_t*>(&table);
  *out_plugin = reinterpret_cast<kiln_plugin_t*>(&object);
  return nullptr;
}

TEST(LoaderTest, APluginRefusedAfterItsEntryRanIsReleased) {
  g_short_table_releases = 0;
  auto loaded = runtime::LoadedPlugin::from_entry(&short_table_entry, "(short table)");
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("smaller than the"), std::string::npos) << loaded.status().message();
  EXPECT_EQ(g_short_table_releases, 1);
}

}  // namespace
}  // namespace kiln::abi_test
