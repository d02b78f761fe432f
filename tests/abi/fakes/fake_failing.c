/* A plugin whose calls return errors. KILN_FAKE_FAIL (read at each call)
 * lists the calls that fail, comma-separated: info, available, devices,
 * options, create, property, capability, compile, execute, compiled_info,
 * export, check, import. "all" fails every call. Unset: every call but info
 * fails. The calls that do not fail behave like a Relu-only plugin with
 * every optional entry present. */
#include <stdlib.h>
#include <string.h>

#include "fake_common.h"

static int fails(const char* call) {
  const char* env = getenv("KILN_FAKE_FAIL");
  const char* p;
  size_t n = strlen(call);
  if (!env) return strcmp(call, "info") != 0;
  if (strcmp(env, "all") == 0) return 1;
  for (p = env; (p = strstr(p, call)) != NULL; p += n) {
    if ((p == env || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
  }
  return 0;
}

#define FAIL_IF(plugin, call) \
  do { if (fails(call)) return fake_error((plugin), KILN_STATUS_INTERNAL, "fake failure in " call); } while (0)

typedef struct { fake_plugin* plugin; } inst_t;
static fake_plugin* plugin_of_instance(kiln_instance_t* i) { return ((inst_t*)i)->plugin; }
static fake_plugin* plugin_of_compiled(kiln_compiled_t* c) { return ((inst_t*)c)->plugin; }

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

static kiln_status_t* get_info(kiln_plugin_t* p, kiln_plugin_info_t* out) {
  FAIL_IF((fake_plugin*)p, "info");
  return fake_get_info(p, out);
}
static kiln_status_t* is_available(kiln_plugin_t* p) {
  FAIL_IF((fake_plugin*)p, "available");
  return NULL;
}
static kiln_status_t* device_count(kiln_plugin_t* p, size_t* out) {
  FAIL_IF((fake_plugin*)p, "devices");
  *out = 1;
  return NULL;
}
static kiln_status_t* device_info(kiln_plugin_t* p, size_t i, kiln_device_info_t* out) {
  FAIL_IF((fake_plugin*)p, "devices");
  if (i != 0) return fake_error((fake_plugin*)p, KILN_STATUS_OUT_OF_RANGE, "one device");
  out->name = "cpu";
  out->kind = KILN_DEVICE_CPU;
  out->description = "fake";
  return NULL;
}
static kiln_status_t* option_count(kiln_plugin_t* p, size_t* out) {
  FAIL_IF((fake_plugin*)p, "options");
  *out = 0;
  return NULL;
}
static kiln_status_t* option_info(kiln_plugin_t* p, size_t i, kiln_option_info_t* out) {
  (void)i;
  (void)out;
  FAIL_IF((fake_plugin*)p, "options");
  return fake_error((fake_plugin*)p, KILN_STATUS_OUT_OF_RANGE, "no options");
}
static kiln_status_t* create(kiln_plugin_t* p, size_t d, const char* const* k, const char* const* v, size_t n,
                             kiln_instance_t** out) {
  FAIL_IF((fake_plugin*)p, "create");
  return fake_instance_create(p, d, k, v, n, out);
}
static kiln_status_t* set_property(kiln_instance_t* i, const char* k, const char* v) {
  (void)k;
  (void)v;
  FAIL_IF(plugin_of_instance(i), "property");
  return fake_error(plugin_of_instance(i), KILN_STATUS_INVALID_ARGUMENT, "no properties");
}
static kiln_status_t* get_property(kiln_instance_t* i, const char* k, char** out) {
  (void)k;
  (void)out;
  FAIL_IF(plugin_of_instance(i), "property");
  return fake_error(plugin_of_instance(i), KILN_STATUS_INVALID_ARGUMENT, "no properties");
}
static kiln_status_t* capability(kiln_instance_t* i, const kiln_graph_t* g, kiln_capability_t* out) {
  FAIL_IF(plugin_of_instance(i), "capability");
  return fake_relu_capability(i, g, out);
}
static kiln_status_t* compile(kiln_instance_t* i, const kiln_graph_t* g, const kiln_partition_t* part,
                              kiln_compiled_t** out) {
  FAIL_IF(plugin_of_instance(i), "compile");
  return fake_relu_compile(i, g, part, out);
}
static kiln_status_t* compiled_info(kiln_compiled_t* c, kiln_compiled_info_t* out) {
  FAIL_IF(plugin_of_compiled(c), "compiled_info");
  out->concurrency = KILN_CONCURRENCY_REENTRANT;
  out->num_inputs = 1;
  out->num_outputs = 1;
  return NULL;
}
static kiln_status_t* execute(kiln_compiled_t* c, kiln_exec_context_t* ctx, const kiln_tensor_t* const* in, size_t n) {
  FAIL_IF(plugin_of_compiled(c), "execute");
  return fake_relu_execute(c, ctx, in, n);
}
static kiln_status_t* export_compiled(kiln_compiled_t* c, void** out, size_t* size) {
  fake_plugin* p = plugin_of_compiled(c);
  FAIL_IF(p, "export");
  *out = p->host->alloc(p->ctx, 4, 0);
  if (!*out) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  memcpy(*out, "FAKE", 4);
  *size = 4;
  return NULL;
}
static kiln_status_t* check(kiln_plugin_t* p, const void* bytes, size_t size) {
  FAIL_IF((fake_plugin*)p, "check");
  if (size != 4 || memcmp(bytes, "FAKE", 4) != 0) return fake_error((fake_plugin*)p, KILN_STATUS_INVALID_ARGUMENT, "not a fake blob");
  return NULL;
}
static kiln_status_t* import_compiled(kiln_instance_t* i, const void* bytes, size_t size, kiln_compiled_t** out) {
  fake_plugin* p = plugin_of_instance(i);
  FAIL_IF(p, "import");
  if (size != 4 || memcmp(bytes, "FAKE", 4) != 0) return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "not a fake blob");
  *out = fake_relu_make(p);
  return *out ? NULL : fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
}

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  fake_plugin* p = fake_plugin_new(args, "failing");
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, (uint32_t)sizeof(g_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = get_info;
  g_api.plugin_is_available = is_available;
  g_api.plugin_get_device_count = device_count;
  g_api.plugin_get_device_info = device_info;
  g_api.plugin_get_option_count = option_count;
  g_api.plugin_get_option_info = option_info;
  g_api.instance_create = create;
  g_api.instance_release = fake_instance_release;
  g_api.instance_set_property = set_property;
  g_api.instance_get_property = get_property;
  g_api.instance_get_capability = capability;
  g_api.instance_compile = compile;
  g_api.compiled_release = fake_relu_release;
  g_api.compiled_get_info = compiled_info;
  g_api.compiled_execute = execute;
  g_api.compiled_export = export_compiled;
  g_api.plugin_check_compiled = check;
  g_api.instance_import = import_compiled;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
