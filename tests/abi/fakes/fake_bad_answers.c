/* A plugin that breaks the contract in ways the host must survive:
 *  - get_capability returns a node index out of range, claims a node twice,
 *    and hands back a reason string from malloc (not the host allocator);
 *  - instance_create allocates host memory that instance_release never frees;
 *  - compile returns no handle and no error when KILN_FAKE_BAD=null_compile;
 *  - execute returns success without producing its output. */
#include <stdlib.h>
#include <string.h>

#include "fake_common.h"

typedef struct bad_instance {
  fake_plugin* plugin;
  void* leaked;
} bad_instance;

typedef struct bad_compiled {
  fake_plugin* plugin;
} bad_compiled;

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

static kiln_status_t* create(kiln_plugin_t* plugin, size_t device, const char* const* keys, const char* const* values,
                             size_t n, kiln_instance_t** out) {
  fake_plugin* p = (fake_plugin*)plugin;
  (void)device;
  (void)keys;
  (void)values;
  if (n > 0) return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "unknown option; known options: none");
  bad_instance* inst = (bad_instance*)p->host->alloc(p->ctx, sizeof(bad_instance), 0);
  if (!inst) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  inst->plugin = p;
  inst->leaked = p->host->alloc(p->ctx, 128, 0);
  *out = (kiln_instance_t*)inst;
  return NULL;
}

static void release_instance(kiln_instance_t* i) {
  bad_instance* inst = (bad_instance*)i;
  if (inst) inst->plugin->host->free(inst->plugin->ctx, inst); /* forgets inst->leaked */
}

static kiln_status_t* capability(kiln_instance_t* i, const kiln_graph_t* g, kiln_capability_t* out) {
  bad_instance* inst = (bad_instance*)i;
  const fake_plugin* p = inst->plugin;
  size_t n = p->host->graph_num_nodes(g);
  out->num_groups = 2;
  out->group_sizes = (size_t*)p->host->alloc(p->ctx, 2 * sizeof(size_t), 0);
  out->group_nodes = (size_t*)p->host->alloc(p->ctx, 3 * sizeof(size_t), 0);
  if (!out->group_sizes || !out->group_nodes) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  out->group_sizes[0] = 2;
  out->group_nodes[0] = 0;
  out->group_nodes[1] = n + 5; /* out of range */
  out->group_sizes[1] = 1;
  out->group_nodes[2] = 0; /* claimed twice */
  out->num_declined = 1;
  out->declined_nodes = (size_t*)p->host->alloc(p->ctx, sizeof(size_t), 0);
  out->declined_reasons = (char**)p->host->alloc(p->ctx, sizeof(char*), 0);
  if (!out->declined_nodes || !out->declined_reasons) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  out->declined_nodes[0] = n > 1 ? 1 : 0;
  out->declined_reasons[0] = (char*)malloc(16); /* not from the host allocator */
  if (out->declined_reasons[0]) strcpy(out->declined_reasons[0], "malloc'd reason");
  return NULL;
}

static kiln_status_t* compile(kiln_instance_t* i, const kiln_graph_t* g, const kiln_partition_t* part,
                              kiln_compiled_t** out) {
  bad_instance* inst = (bad_instance*)i;
  fake_plugin* p = inst->plugin;
  const char* mode = getenv("KILN_FAKE_BAD");
  (void)g;
  (void)part;
  if (mode && strcmp(mode, "null_compile") == 0) return NULL; /* no handle, no error */
  bad_compiled* c = (bad_compiled*)p->host->alloc(p->ctx, sizeof(bad_compiled), 0);
  if (!c) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  c->plugin = p;
  *out = (kiln_compiled_t*)c;
  return NULL;
}

static void release_compiled(kiln_compiled_t* c) {
  bad_compiled* bc = (bad_compiled*)c;
  if (bc) bc->plugin->host->free(bc->plugin->ctx, bc);
}

static kiln_status_t* execute(kiln_compiled_t* c, kiln_exec_context_t* ctx, const kiln_tensor_t* const* in, size_t n) {
  (void)c;
  (void)ctx;
  (void)in;
  (void)n;
  return NULL; /* claims success, allocates no output */
}

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  fake_plugin* p = fake_plugin_new(args, "bad_answers");
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, (uint32_t)sizeof(g_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = fake_get_info;
  g_api.instance_create = create;
  g_api.instance_release = release_instance;
  g_api.instance_get_capability = capability;
  g_api.instance_compile = compile;
  g_api.compiled_release = release_compiled;
  g_api.compiled_execute = execute;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
