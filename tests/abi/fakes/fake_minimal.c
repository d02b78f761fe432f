/* A plugin with only the required entries: every optional entry is NULL and
 * its table ends right after compiled_execute (as a plugin built against an
 * older, shorter 1.x header would). The host must supply the defaults. */
#include <stddef.h>
#include <string.h>

#include "fake_common.h"

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  fake_plugin* p = fake_plugin_new(args, "minimal");
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, (uint32_t)(offsetof(kiln_backend_api_t, compiled_execute) + sizeof(void*)),
                   KILN_BACKEND_ABI_MAJOR, 0);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = fake_get_info;
  g_api.instance_create = fake_instance_create;
  g_api.instance_release = fake_instance_release;
  g_api.instance_get_capability = fake_relu_capability;
  g_api.instance_compile = fake_relu_compile;
  g_api.compiled_release = fake_relu_release;
  g_api.compiled_execute = fake_relu_execute;
  /* Past struct_size: the host must not read these even though they are set. */
  g_api.compiled_export = (kiln_status_t * (*)(kiln_compiled_t*, void**, size_t*))1;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
