/* A plugin that keeps a thread running inside its own code after
 * plugin_release (as plugins over some vendor runtimes do), and says so with
 * KILN_PLUGIN_NO_UNLOAD. Unloading it would pull the code from under the
 * thread, which wakes every millisecond, and crash the process: the host
 * must keep the library mapped. Otherwise a working Relu plugin. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "fake_common.h"

static volatile unsigned long g_ticks;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void* keep_ticking(void* arg) {
  (void)arg;
  struct timespec ms = {0, 1000000};
  for (;;) {
    nanosleep(&ms, NULL);
    g_ticks = g_ticks + 1;
  }
  return NULL;
}

static void start_thread(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, keep_ticking, NULL) == 0) pthread_detach(t);
}

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

static kiln_status_t* get_info(kiln_plugin_t* plugin, kiln_plugin_info_t* out) {
  kiln_status_t* st = fake_get_info(plugin, out);
  if (st) return st;
  if (KILN_ABI_HAS(kiln_plugin_info_t, flags, out->struct_size)) out->flags = KILN_PLUGIN_NO_UNLOAD;
  return NULL;
}

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  fake_plugin* p = fake_plugin_new(args, "no_unload");
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  pthread_once(&g_once, start_thread);
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, (uint32_t)sizeof(g_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = get_info;
  g_api.instance_create = fake_instance_create;
  g_api.instance_release = fake_instance_release;
  g_api.instance_get_capability = fake_relu_capability;
  g_api.instance_compile = fake_relu_compile;
  g_api.compiled_release = fake_relu_release;
  g_api.compiled_execute = fake_relu_execute;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
