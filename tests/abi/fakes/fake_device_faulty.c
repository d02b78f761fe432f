/* Device plugins (ABI 1.1) that break the device contract, each built from
 * this file with one FAKE_DEV_* definition (tests/abi/CMakeLists.txt),
 * otherwise the Relu plugin of fake_common. `kiln check-backend` must name
 * what each gets wrong:
 *
 *   dev_no_signal     declares KILN_COMPILED_ASYNC; compiled_execute_async
 *                     writes the output, returns success and never
 *                     signals its fence
 *   dev_bad_kinds     declares a device output and device scratch but
 *                     offers no instance_alloc / instance_free / instance_copy
 *                     (the host has no way to make such memory)
 *   dev_bad_inplace   declares the in-place pair (input 0, output 3) for a
 *                     partition with one output
 *   dev_host_pointer  declares device inputs and outputs, and its
 *                     instance_alloc hands out ordinary host memory for
 *                     KILN_MEMORY_DEVICE (the host could read it: it is not
 *                     device memory)
 *   dev_big_workspace reports a device of 1 MiB and declares 1 GiB of
 *                     device workspace per call
 *
 * Only the public C header is used. C11. */
#include <stdlib.h>
#include <string.h>

#include "fake_common.h"

#if defined(FAKE_DEV_NO_SIGNAL)
#define FAKE_NAME "dev_no_signal"
#elif defined(FAKE_DEV_BAD_KINDS)
#define FAKE_NAME "dev_bad_kinds"
#elif defined(FAKE_DEV_BAD_INPLACE)
#define FAKE_NAME "dev_bad_inplace"
#elif defined(FAKE_DEV_HOST_POINTER)
#define FAKE_NAME "dev_host_pointer"
#elif defined(FAKE_DEV_BIG_WORKSPACE)
#define FAKE_NAME "dev_big_workspace"
#define FAKE_DEV_HOST_MEMORY 1 /* its "device" memory is host memory too */
#else
#error "define one FAKE_DEV_*"
#endif

typedef struct { fake_plugin* plugin; } head_t; /* every fake object starts with its plugin */

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

#if defined(FAKE_DEV_BAD_KINDS) || defined(FAKE_DEV_HOST_POINTER)
static const int32_t kDeviceKind[1] = {KILN_MEMORY_DEVICE};
#endif
#if defined(FAKE_DEV_BAD_INPLACE)
static const size_t kBadPair[2] = {0, 3};
#endif

static kiln_status_t* get_info(kiln_compiled_t* c, kiln_compiled_info_t* out) {
  (void)c;
  if (!out) return NULL;
  out->concurrency = KILN_CONCURRENCY_SERIAL;
  out->num_inputs = 1;
  out->num_outputs = 1;
  if (!KILN_ABI_HAS(kiln_compiled_info_t, owned_constants, out->struct_size)) return NULL; /* a 1.0 host */
#if defined(FAKE_DEV_NO_SIGNAL)
  out->flags = KILN_COMPILED_ASYNC;
#elif defined(FAKE_DEV_BAD_KINDS)
  out->output_memory_kinds = kDeviceKind;
  out->workspace_bytes[KILN_MEMORY_DEVICE] = 1024;
#elif defined(FAKE_DEV_BAD_INPLACE)
  out->num_inplace = 1;
  out->inplace_pairs = kBadPair;
#elif defined(FAKE_DEV_HOST_POINTER)
  out->input_memory_kinds = kDeviceKind;
  out->output_memory_kinds = kDeviceKind;
#elif defined(FAKE_DEV_BIG_WORKSPACE)
  out->workspace_bytes[KILN_MEMORY_DEVICE] = (uint64_t)1 << 30;
#endif
  return NULL;
}

#if defined(FAKE_DEV_NO_SIGNAL)
static kiln_status_t* execute_async(kiln_compiled_t* c, kiln_exec_context_t* ctx, const kiln_tensor_t* const* in,
                                    size_t n, kiln_fence_t* fence, uint64_t value) {
  (void)fence;
  (void)value;
  return fake_relu_execute(c, ctx, in, n); /* the work is done; the fence is forgotten */
}
#endif

#if defined(FAKE_DEV_HOST_POINTER)
#define FAKE_DEV_HOST_MEMORY 1
#endif

#if defined(FAKE_DEV_BIG_WORKSPACE)
static kiln_status_t* device_count(kiln_plugin_t* p, size_t* out) {
  (void)p;
  *out = 1;
  return NULL;
}
static kiln_status_t* device_info(kiln_plugin_t* p, size_t index, kiln_device_info_t* out) {
  (void)p;
  (void)index;
  out->name = "sim0";
  out->kind = KILN_DEVICE_GPU;
  out->description = "a device of 1 MiB";
  if (KILN_ABI_HAS(kiln_device_info_t, memory_bytes, out->struct_size)) out->memory_bytes = (uint64_t)1 << 20;
  return NULL;
}
#endif

#if defined(FAKE_DEV_HOST_MEMORY)
/* "Device" memory that is plain host memory. */
static kiln_status_t* alloc(kiln_instance_t* i, int32_t kind, uint32_t device, size_t size, size_t alignment,
                            void** out) {
  (void)kind;
  (void)device;
  if (alignment < 64) alignment = 64;
  size = (size + alignment - 1) / alignment * alignment;
  *out = aligned_alloc(alignment, size ? size : alignment);
  return *out ? NULL : fake_error(((head_t*)i)->plugin, KILN_STATUS_RESOURCE_EXHAUSTED, "out of memory");
}
static void release_memory(kiln_instance_t* i, int32_t kind, void* p) {
  (void)i;
  (void)kind;
  free(p);
}
static kiln_status_t* copy(kiln_instance_t* i, const kiln_copy_t* copies, size_t n, kiln_fence_t* fence,
                           uint64_t value) {
  size_t k;
  for (k = 0; k < n; ++k) memcpy(copies[k].dst, copies[k].src, copies[k].bytes);
  if (fence) ((head_t*)i)->plugin->host->fence_signal(fence, value, NULL);
  return NULL;
}
#endif

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  fake_plugin* p = fake_plugin_new(args, FAKE_NAME);
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, (uint32_t)sizeof(g_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = fake_get_info;
  g_api.instance_create = fake_instance_create;
  g_api.instance_release = fake_instance_release;
  g_api.instance_get_capability = fake_relu_capability;
  g_api.instance_compile = fake_relu_compile;
  g_api.compiled_release = fake_relu_release;
  g_api.compiled_get_info = get_info;
  g_api.compiled_execute = fake_relu_execute;
#if defined(FAKE_DEV_NO_SIGNAL)
  g_api.compiled_execute_async = execute_async;
#endif
#if defined(FAKE_DEV_BIG_WORKSPACE)
  g_api.plugin_get_device_count = device_count;
  g_api.plugin_get_device_info = device_info;
#endif
#if defined(FAKE_DEV_HOST_MEMORY)
  g_api.instance_alloc = alloc;
  g_api.instance_free = release_memory;
  g_api.instance_copy = copy;
#endif
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
