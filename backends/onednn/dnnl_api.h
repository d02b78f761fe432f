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

namespace kiln_onednn {

// Every oneDNN function the plugin calls. A missing one makes the backend
// unavailable (tests/backends/onednn builds a fake library lacking one).
#define KILN_DNNL_FUNCTIONS(X)                                                                        \
  X(dnnl_version) X(dnnl_get_effective_cpu_isa) X(dnnl_engine_create) X(dnnl_engine_destroy)         \
  X(dnnl_stream_create) X(dnnl_stream_destroy) X(dnnl_stream_wait) X(dnnl_memory_desc_init_by_tag)   \
  X(dnnl_memory_desc_init_by_strides) X(dnnl_memory_desc_get_size) X(dnnl_memory_desc_equal)         \
  X(dnnl_memory_desc_reshape) X(dnnl_memory_desc_permute_axes) X(dnnl_memory_create)                 \
  X(dnnl_memory_destroy) X(dnnl_memory_set_data_handle) X(dnnl_convolution_forward_desc_init)        \
  X(dnnl_dilated_convolution_forward_desc_init) X(dnnl_dilated_deconvolution_forward_desc_init)      \
  X(dnnl_matmul_desc_init) X(dnnl_pooling_v2_forward_desc_init) X(dnnl_binary_desc_init)             \
  X(dnnl_eltwise_forward_desc_init) X(dnnl_softmax_forward_desc_init)                                \
  X(dnnl_layer_normalization_forward_desc_init) X(dnnl_batch_normalization_forward_desc_init)        \
  X(dnnl_reduction_desc_init) X(dnnl_concat_primitive_desc_create)                                   \
  X(dnnl_reorder_primitive_desc_create) X(dnnl_primitive_desc_create) X(dnnl_primitive_desc_destroy) \
  X(dnnl_primitive_desc_query) X(dnnl_primitive_desc_query_md) X(dnnl_primitive_create)              \
  X(dnnl_primitive_destroy) X(dnnl_primitive_execute) X(dnnl_primitive_attr_create)                  \
  X(dnnl_primitive_attr_destroy) X(dnnl_primitive_attr_set_post_ops) X(dnnl_post_ops_create)         \
  X(dnnl_post_ops_destroy) X(dnnl_post_ops_append_eltwise) X(dnnl_post_ops_append_sum)               \
  X(dnnl_post_ops_append_binary)

struct DnnlApi {
#define KILN_DNNL_DECLARE(f) decltype(&::f) f = nullptr;
  KILN_DNNL_FUNCTIONS(KILN_DNNL_DECLARE)
#undef KILN_DNNL_DECLARE
  // From the OpenMP runtime oneDNN was built with (absent for TBB/sequential builds).
  void (*omp_set_num_threads)(int) = nullptr;
  int (*omp_get_max_threads)() = nullptr;
};

// The loaded table, or nullptr when oneDNN is unavailable (see reason()).
const DnnlApi* dnnl_api();
// "" when loaded; otherwise why not and what to do.
const std::string& dnnl_unavailable_reason();
// "2.6.0" (empty when unavailable).
const std::string& dnnl_version_string();
// The ISA oneDNN dispatches to here: "avx512_core", "avx2", ... (empty when unavailable).
const std::string& dnnl_isa_string();

// Throws kiln::sdk::Error naming `what` when `status` is not dnnl_success.
void dnnl_check(dnnl_status_t status, const char* what);

}  // namespace kiln_onednn
