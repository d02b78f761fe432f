/* A plugin built against a newer 1.x header than the host's: its table is
 * larger (entries the host does not know about follow) and its minor
 * version is higher. The host reads only what it knows. It checks the
 * host's table size before using host functions (here: log_enabled). */
#include <stddef.h>
#include <string.h>

#include "fake_common.h"

typedef struct future_api {
  kiln_backend_api_t v1;
  /* Entries a future minor version might add. */
  kiln_status_t* (*future_entry_a)(kiln_plugin_t*);
  kiln_status_t* (*future_entry_b)(kiln_plugin_t*, int);
} future_api;

static future_api g_api;

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }
static kiln_status_t* future_a(kiln_plugin_t* p) { (void)p; return NULL; }
static kiln_status_t* future_b(kiln_plugin_t* p, int x) { (void)p; (void)x; return NULL; }

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  fake_plugin* p = fake_plugin_new(args, "newer");
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  if (KILN_ABI_HAS(kiln_host_api_t, log_enabled, args->host_api->header.struct_size) && args->host_api->log_enabled &&
      args->host_api->log_enabled(args->host, KILN_LOG_DEBUG)) {
    args->host_api->log(args->host, KILN_LOG_DEBUG, "newer plugin on an older host");
  }
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.v1.header, (uint32_t)sizeof(future_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR + 1);
  g_api.v1.plugin_release = release_plugin;
  g_api.v1.plugin_get_info = fake_get_info;
  g_api.v1.instance_create = fake_instance_create;
  g_api.v1.instance_release = fake_instance_release;
  g_api.v1.instance_get_capability = fake_relu_capability;
  g_api.v1.instance_compile = fake_relu_compile;
  g_api.v1.compiled_release = fake_relu_release;
  g_api.v1.compiled_execute = fake_relu_execute;
  g_api.future_entry_a = future_a;
  g_api.future_entry_b = future_b;
  *out_api = &g_api.v1;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
