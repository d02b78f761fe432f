// An SDK plugin in the style of a vendor backend with no link-time
// dependency on its vendor library: it dlopens the library lazily (once,
// thread-safely) the first time it is asked, and is always loadable; only
// its availability depends on the library. KILN_FAKE_VENDOR_LIB names the
// library (default libkiln_fake_vendor.so.1, which does not exist).
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "kiln/c/backend_sdk.hpp"

namespace {

using namespace kiln::sdk;

class VendorInstance final : public Instance {
 public:
  using Instance::Instance;
  void get_capability(const Graph& g, Capability& cap) override {
    for (size_t i = 0; i < g.num_nodes(); ++i) cap.decline(i, "the fake vendor runs nothing");
  }
  std::unique_ptr<Compiled> compile(const Graph&, const Partition&) override {
    fail(KILN_STATUS_UNIMPLEMENTED, "the fake vendor compiles nothing");
  }
};

class VendorPlugin final : public Plugin {
 public:
  ~VendorPlugin() override {
    if (lib_) dlclose(lib_);
  }
  Info info() const override {
    load();
    return {"vendor", "0.1", "Kiln tests", lib_ ? "fake-sdk 9.9" : "", "lazily loads its vendor library", 5};
  }
  std::string unavailable_reason() override {
    load();
    if (lib_) return {};
    return lib_name_ + " not found (" + error_ + "); install the vendor runtime or set KILN_FAKE_VENDOR_LIB";
  }
  std::unique_ptr<Instance> create_instance(size_t, Options o) override {
    load();
    if (!lib_) fail(KILN_STATUS_UNAVAILABLE, lib_name_ + " is not loaded");
    return std::make_unique<VendorInstance>(std::move(o));
  }

 private:
  void load() const {
    std::call_once(once_, [this] {
      const char* env = std::getenv("KILN_FAKE_VENDOR_LIB");
      lib_name_ = env ? env : "libkiln_fake_vendor.so.1";
      lib_ = dlopen(lib_name_.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!lib_) {
        const char* e = dlerror();
        error_ = e ? e : "dlopen failed";
      }
    });
  }
  mutable std::once_flag once_;
  mutable void* lib_ = nullptr;
  mutable std::string lib_name_;
  mutable std::string error_;
};

}  // namespace

KILN_BACKEND_PLUGIN(VendorPlugin)
