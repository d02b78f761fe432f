// The list of oneDNN functions the plugin resolves with dlsym, as an X-macro
// (no includes: tests/backends/onednn/fake_dnnl.c uses it to build a fake
// library that lacks one of them).
#pragma once

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
