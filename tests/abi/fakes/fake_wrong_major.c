/* A plugin built against a future major version of the ABI: it ignores the
 * host's range and returns a table of major KILN_BACKEND_ABI_MAJOR + 1. The
 * host must refuse it, naming both versions, and call nothing in it. */
#include <string.h>

#include "fake_common.h"

static kiln_backend_api_t g_api;
static char g_plugin_object[64];

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  (void)args;
  memset(&g_api, 0xff, sizeof(g_api)); /* garbage: the host must not call any of it */
  fake_fill_header(&g_api.header, (uint32_t)sizeof(g_api), KILN_BACKEND_ABI_MAJOR + 1, 3);
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)g_plugin_object;
  return NULL;
}
