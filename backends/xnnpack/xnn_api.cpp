#include "xnn_api.h"

#include <dlfcn.h>

#include <cstdlib>

#include "kiln/c/backend_sdk.hpp"

namespace kiln_xnnpack {
namespace {

struct Loaded {
  Api api;
  std::string error;
};

const char* status_name(int s) {
  switch (s) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
    default: return "unknown status";
  }
}

Loaded load() {
  Loaded l;
  const std::string path = library_path();
  // RTLD_LOCAL: the library's symbols stay out of the global namespace.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    l.error = "cannot load " + path + " (" + (e ? e : "unknown error") +
              "); install libxnnpack0 (Debian) or set KILN_XNNPACK_LIB to libXNNPACK.so";
    return l;
  }
  // The handle stays open for the life of the process: XNNPACK keeps global
  // state (its initialization) that must not be torn down under a runtime.
#define KILN_XNN_RESOLVE(f)                                                                     \
  l.api.f = reinterpret_cast<decltype(l.api.f)>(dlsym(lib, #f));                                   \
  if (!l.api.f) {                                                                               \
    l.error = path + " lacks " #f " (an XNNPACK older or newer than git 2022-02-16?)";          \
    return l;                                                                                   \
  }
  KILN_XNN_FUNCTIONS(KILN_XNN_RESOLVE)
  KILN_XNN_RESOLVE(pthreadpool_parallelize_1d)
#undef KILN_XNN_RESOLVE
  // XNNPACK's default allocator, not alloc_large: this XNNPACK copies the
  // allocator's function pointers once per process, into state that
  // outlives this plugin (the handle above stays open), so pointers into a
  // plugin unloaded with its registry and mapped again elsewhere would be
  // called (xnn_create_subgraph crashed so); the plugin must unload cleanly
  // (kiln check-backend), so it cannot pin itself either.
  const int s = l.api.xnn_initialize(nullptr);
  if (s != xnn_status_success) l.error = path + ": xnn_initialize failed: " + status_name(s);
  return l;
}

// Thread-safe (a function-local static); destroyed when the plugin unloads.
// The library handle itself stays open: see load().
const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

std::string library_path() {
  const char* env = std::getenv("KILN_XNNPACK_LIB");
  return env && *env ? env : "libXNNPACK.so.0";
}

const std::string& load_error() { return loaded().error; }

const Api& api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) kiln::sdk::fail(KILN_STATUS_UNAVAILABLE, l.error);
  return l.api;
}

void check(int status, const char* what) {
  if (status != xnn_status_success) {
    kiln::sdk::fail(KILN_STATUS_INTERNAL, std::string("XNNPACK ") + what + " failed: " + status_name(status));
  }
}

}  // namespace kiln_xnnpack
