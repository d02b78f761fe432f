// The oneDNN C API as a table of function pointers, filled by dlsym after
// dlopen("libdnnl.so.2") on first use. The plugin has no link-time
// dependency on oneDNN (no NEEDED entry): only the 2.x headers are needed at
// build time, for the descriptor structs (dnnl_convolution_desc_t, ...).
//
// dnnl_api() loads the library exactly once (std::call_once), honouring
// KILN_ONEDNN_LIBRARY. If any listed symbol is missing, every pointer is
// cleared, the library is closed and the reason names the symbol.
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "dnnl_functions.h"

namespace kiln_onednn {

struct DnnlApi {
#define KILN_DNNL_DECLARE(f) decltype(&::f) f = nullptr;
  KILN_DNNL_FUNCTIONS(KILN_DNNL_DECLARE)
#undef KILN_DNNL_DECLARE
  // From the OpenMP runtime oneDNN was built with (absent for TBB/sequential builds).
  void (*omp_set_num_threads)(int) = nullptr;
  int (*omp_get_max_threads)() = nullptr;
  // OpenMP 5.0; in libgomp a hard pause ends the calling thread's worker pool.
  int (*omp_pause_resource_all)(int kind) = nullptr;
};

// The loaded table, or nullptr when oneDNN is unavailable (see reason()).
const DnnlApi* dnnl_api();
// "" when loaded; otherwise why not and what to do.
const std::string& dnnl_unavailable_reason();
// "2.6.0" (empty when unavailable).
const std::string& dnnl_version_string();
// The ISA oneDNN dispatches to here: "avx512_core", "avx2", ... (empty when unavailable).
const std::string& dnnl_isa_string();

// Ends the OpenMP workers oneDNN started from the calling thread (libgomp:
// omp_pause_resource_all(omp_pause_hard)); a no-op when nothing was loaded.
// Never call it while the dynamic loader's lock is held (a static destructor
// run by dlclose): the exiting workers dlopen libgcc_s and would deadlock.
void dnnl_end_worker_threads();

// Throws kiln::sdk::Error naming `what` when `status` is not dnnl_success.
void dnnl_check(dnnl_status_t status, const char* what);

}  // namespace kiln_onednn
