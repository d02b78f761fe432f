/* Plugins that fail the way real ones do, each built from this file with
 * one FAKE_FAULT_* definition (tests/abi/CMakeLists.txt), otherwise the
 * Relu plugin of fake_common:
 *
 *   faulty_execute   execute fails when an input holds the value 1234 (a run
 *                    fails mid-way; the next run with other inputs works)
 *   faulty_compile   compile always fails (its groups fall back to portable
 *                    under fallback `allow`, with the reason in the report)
 *   faulty_hang      is_available never returns (the host's probe timeout,
 *                    KILN_PLUGIN_PROBE_TIMEOUT_MS, must bound it)
 *   faulty_overflow  execute writes 16 bytes past the end of its output
 *                    (the guard check of `kiln check-backend` must see it)
 *
 * Only the public C header is used. C11 with POSIX nanosleep. */
#define _POSIX_C_SOURCE 200809L
#include <string.h>
#include <time.h>

#include "fake_common.h"

#if defined(FAKE_FAULT_EXECUTE)
#define FAKE_NAME "faulty_execute"
#elif defined(FAKE_FAULT_COMPILE)
#define FAKE_NAME "faulty_compile"
#elif defined(FAKE_FAULT_HANG)
#define FAKE_NAME "faulty_hang"
#elif defined(FAKE_FAULT_OVERFLOW)
#define FAKE_NAME "faulty_overflow"
#else
#error "define one FAKE_FAULT_*"
#endif

typedef struct { fake_plugin* plugin; } head_t; /* every fake object starts with its plugin */

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

static kiln_status_t* is_available(kiln_plugin_t* p) {
  (void)p;
#if defined(FAKE_FAULT_HANG)
  for (;;) { /* a driver that never answers */
    struct timespec t = {3600, 0};
    nanosleep(&t, NULL);
  }
#endif
  return NULL;
}

static kiln_status_t* compile(kiln_instance_t* i, const kiln_graph_t* g, const kiln_partition_t* part,
                              kiln_compiled_t** out) {
#if defined(FAKE_FAULT_COMPILE)
  (void)g;
  (void)part;
  (void)out;
  return fake_error(((head_t*)i)->plugin, KILN_STATUS_INTERNAL, "fake compiler crashed on the group (code 7)");
#else
  return fake_relu_compile(i, g, part, out);
#endif
}

static kiln_status_t* execute(kiln_compiled_t* c, kiln_exec_context_t* ctx, const kiln_tensor_t* const* in, size_t n) {
  fake_plugin* p = ((head_t*)c)->plugin;
#if defined(FAKE_FAULT_EXECUTE)
  if (n == 1 && in && in[0] && in[0]->dtype == KILN_DTYPE_FLOAT32) {
    const float* x = (const float*)in[0]->data;
    size_t k;
    for (k = 0; k < in[0]->nbytes / sizeof(float); ++k)
      if (x[k] == 1234.0f) return fake_error(p, KILN_STATUS_INTERNAL, "fake device lost while running the group");
  }
#endif
#if defined(FAKE_FAULT_OVERFLOW)
  {
    kiln_status_t* st;
    kiln_tensor_t out;
    if (n != 1 || !in || !in[0] || in[0]->dtype != KILN_DTYPE_FLOAT32)
      return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "Relu takes one float32 input");
    memset(&out, 0, sizeof(out));
    out.struct_size = sizeof(out);
    st = p->host->exec_allocate_output(ctx, 0, KILN_DTYPE_FLOAT32, in[0]->dims, in[0]->rank, &out);
    if (st) return st;
    /* Relu, then 16 bytes too many: a vector loop's tail written whole. */
    memset(out.data, 0, out.nbytes + 16);
    return NULL;
  }
#else
  (void)p;
  return fake_relu_execute(c, ctx, in, n);
#endif
}

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
  g_api.plugin_is_available = is_available;
  g_api.instance_create = fake_instance_create;
  g_api.instance_release = fake_instance_release;
  g_api.instance_get_capability = fake_relu_capability;
  g_api.instance_compile = compile;
  g_api.compiled_release = fake_relu_release;
  g_api.compiled_execute = execute;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
