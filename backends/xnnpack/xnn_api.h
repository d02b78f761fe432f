// The XNNPACK and pthreadpool functions the plugin calls, resolved with
// dlopen/dlsym the first time they are needed. The plugin does not link
// libXNNPACK, so it always loads; when the library is missing it reports
// itself unavailable with a one-line reason naming the library
// (docs/writing-a-backend.md, "Vendor libraries").
//
// KILN_XNNPACK_LIB overrides the library path (tests point it at a missing
// file to check that reason).
#pragma once

#include <pthreadpool.h>
#include <xnnpack.h>

#include <string>

namespace kiln_xnnpack {

#define KILN_XNN_FUNCTIONS(X)                                                                                        \
  X(xnn_initialize) X(xnn_create_subgraph) X(xnn_delete_subgraph) X(xnn_define_tensor_value)                        \
  X(xnn_define_convolution_2d) X(xnn_define_depthwise_convolution_2d) X(xnn_define_fully_connected)                 \
  X(xnn_define_max_pooling_2d) X(xnn_define_average_pooling_2d) X(xnn_define_global_average_pooling_2d)              \
  X(xnn_define_add2) X(xnn_define_multiply2) X(xnn_define_subtract) X(xnn_define_divide) X(xnn_define_maximum2)      \
  X(xnn_define_minimum2) X(xnn_define_clamp) X(xnn_define_elu) X(xnn_define_leaky_relu) X(xnn_define_hardswish)     \
  X(xnn_define_sigmoid) X(xnn_define_softmax) X(xnn_define_prelu) X(xnn_define_abs) X(xnn_define_negate)            \
  X(xnn_define_square_root) X(xnn_define_floor) X(xnn_define_ceiling) X(xnn_define_static_reshape)                   \
  X(xnn_define_static_constant_pad) X(xnn_define_static_resize_bilinear_2d) X(xnn_define_depth_to_space)             \
  X(xnn_create_runtime_v2) X(xnn_setup_runtime) X(xnn_invoke_runtime) X(xnn_delete_runtime)                          \
  X(xnn_create_convolution2d_nhwc_f32) X(xnn_setup_convolution2d_nhwc_f32) X(xnn_run_operator) X(xnn_delete_operator)                          \
  X(xnn_create_fully_connected_nc_f32) X(xnn_setup_fully_connected_nc_f32)                                             \
  X(pthreadpool_create) X(pthreadpool_destroy) X(pthreadpool_get_threads_count)

struct Api {
#define KILN_XNN_MEMBER(f) decltype(&::f) f = nullptr;
  KILN_XNN_FUNCTIONS(KILN_XNN_MEMBER)
#undef KILN_XNN_MEMBER
  // Overloaded in C++ by a template in pthreadpool.h, so spelled out.
  void (*pthreadpool_parallelize_1d)(pthreadpool_t, pthreadpool_task_1d_t, void*, size_t, uint32_t) = nullptr;
};

/// The library path tried: $KILN_XNNPACK_LIB or "libXNNPACK.so.0".
std::string library_path();

/// Loads the library and initializes XNNPACK once (thread-safe). Returns ""
/// when usable, else one line saying why not and what to install.
const std::string& load_error();

/// The resolved functions; only valid when load_error() is "".
const Api& api();

/// Throws kiln::sdk::Error naming `what` when `status` is not success.
void check(int status, const char* what);

}  // namespace kiln_xnnpack
