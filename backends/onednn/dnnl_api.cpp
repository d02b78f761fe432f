#include "dnnl_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "kiln/c/backend_sdk.hpp"

namespace kiln_onednn {
namespace {

struct Loaded {
  DnnlApi api;
  void* lib = nullptr;
  std::string reason;
  std::string version;
  std::string isa;
};

std::string isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    default: return "isa(" + std::to_string(static_cast<int>(isa)) + ")";
  }
}

// Debian's oneDNN uses libgomp. Its workers spin after each parallel region
// unless told otherwise (GOMP_SPINCOUNT 300000 by default); a spinning worker
// burns a core next to the host's sleeping pool between runs, and on a busy
// machine it takes the core from the thread that has work. Unless the user
// chose, make them sleep at once (measured on a shared 2-core EPYC,
// squeezenet1_1 at 2 threads: p50 20 ms passive, 115 ms with 10000 spins,
// 93 ms active). This must happen before libgomp initializes, which is when
// libdnnl loads it.
void set_openmp_defaults() {
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) setenv("OMP_WAIT_POLICY", "passive", 0);
}

void load(Loaded& l) {
  const char* env = std::getenv("KILN_ONEDNN_LIBRARY");
  const std::string path = env && *env ? env : "libdnnl.so.2";
  set_openmp_defaults();
  dlerror();
  l.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!l.lib) {
    const char* e = dlerror();
    l.reason = "oneDNN runtime not found (" + std::string(e ? e : "dlopen failed") +
               "): apt-get install libdnnl2, or set KILN_ONEDNN_LIBRARY";
    return;
  }
  std::string missing;
#define KILN_DNNL_RESOLVE(f)                                                  \
  if (missing.empty()) {                                                      \
    l.api.f = reinterpret_cast<decltype(&::f)>(dlsym(l.lib, #f));             \
    if (!l.api.f) missing = #f;                                               \
  }
  KILN_DNNL_FUNCTIONS(KILN_DNNL_RESOLVE)
#undef KILN_DNNL_RESOLVE
  if (!missing.empty()) {
    l.api = DnnlApi{};
    dlclose(l.lib);
    l.lib = nullptr;
    l.reason = "oneDNN runtime " + path + " lacks the symbol " + missing +
               " (oneDNN 2.x is required): apt-get install libdnnl2, or set KILN_ONEDNN_LIBRARY";
    return;
  }
  // dlsym on the handle also searches libdnnl's dependencies (libgomp).
  l.api.omp_set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(l.lib, "omp_set_num_threads"));
  l.api.omp_get_max_threads = reinterpret_cast<int (*)()>(dlsym(l.lib, "omp_get_max_threads"));
  l.api.omp_pause_resource_all = reinterpret_cast<int (*)(int)>(dlsym(l.lib, "omp_pause_resource_all"));
  const dnnl_version_t* v = l.api.dnnl_version();
  l.version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  l.isa = isa_name(l.api.dnnl_get_effective_cpu_isa());
}

std::atomic<bool> g_loaded{false};

Loaded& loaded() {
  static Loaded l;
  static std::once_flag once;
  std::call_once(once, [] {
    load(l);
    g_loaded = l.lib != nullptr;
  });
  return l;
}

}  // namespace

const DnnlApi* dnnl_api() {
  Loaded& l = loaded();
  return l.lib ? &l.api : nullptr;
}
void dnnl_end_worker_threads() {
  if (!g_loaded) return;  // never loads the library
  const DnnlApi& api = loaded().api;
  if (api.omp_pause_resource_all) api.omp_pause_resource_all(2 /* omp_pause_hard */);
}

const std::string& dnnl_unavailable_reason() { return loaded().reason; }
const std::string& dnnl_version_string() { return loaded().version; }
const std::string& dnnl_isa_string() { return loaded().isa; }

void dnnl_check(dnnl_status_t status, const char* what) {
  if (status == dnnl_success) return;
  static const char* const names[] = {"success", "out_of_memory", "invalid_arguments", "unimplemented",
                                      "iterator_ends", "runtime_error", "not_required"};
  const int s = static_cast<int>(status);
  std::string name = s >= 0 && s <= 6 ? names[s] : "status " + std::to_string(s);
  kiln::sdk::fail(status == dnnl_unimplemented ? KILN_STATUS_UNIMPLEMENTED : KILN_STATUS_INTERNAL,
                  std::string("oneDNN ") + what + ": " + name);
}

}  // namespace kiln_onednn
