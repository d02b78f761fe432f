/* A plugin that crashes (writes through NULL) in get_capability. The host
 * cannot survive that in-process; `kiln check-backend` runs each group in
 * its own process and must report the crash and go on. Otherwise it is the
 * Relu plugin of fake_common. */
#include <string.h>

#include "fake_common.h"

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

static kiln_status_t* crash(kiln_instance_t* i, const kiln_graph_t* g, kiln_capability_t* out) {
  volatile int* volatile nowhere = NULL;
  (void)i;
  (void)g;
  (void)out;
  *nowhere = 1;
  return NULL;
}

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  fake_plugin* p = fake_plugin_new(args, "crashing");
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, (uint32_t)sizeof(g_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = fake_get_info;
  g_api.instance_create = fake_instance_create;
  g_api.instance_release = fake_instance_release;
  g_api.instance_get_capability = crash;
  g_api.instance_compile = fake_relu_compile;
  g_api.compiled_release = fake_relu_release;
  g_api.compiled_execute = fake_relu_execute;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
