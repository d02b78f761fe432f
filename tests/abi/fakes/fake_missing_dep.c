/* A plugin that needs libkiln_fake_dep.so, which is not on the loader's
 * path: dlopen fails and the host must say which library is missing. */
#include "fake_common.h"

int kiln_fake_dep_value(void);

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  (void)out_api;
  (void)out_plugin;
  return args->host_api->status_create(KILN_STATUS_INTERNAL, kiln_fake_dep_value() == 7 ? "unreachable" : "?");
}
