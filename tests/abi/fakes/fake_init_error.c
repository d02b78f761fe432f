/* A plugin whose entry fails: its vendor runtime is missing, so it refuses
 * to initialize (the other way to be unavailable is is_available). */
#include "fake_common.h"

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  (void)out_api;
  (void)out_plugin;
  return args->host_api->status_create(KILN_STATUS_UNAVAILABLE,
                                       "libfakevendor.so.3 is not installed (apt-get install fakevendor-runtime)");
}
