/* The Relu plugin of fake_common, except that execute breaks the contract
 * in the way FAKE_MODE picks (one library per mode, tests/abi/CMakeLists):
 *   FAKE_WRONG_DTYPE  allocates its output as float16 (the partition says float32)
 *   FAKE_WRONG_SHAPE  allocates its output with one more element in dim 0
 *   FAKE_EXEC_CRASH   writes through NULL (SIGSEGV) in execute
 *   FAKE_BAD_CLAIM    runs Relu correctly, but its capability answer also
 *                     claims a node index past the end of the view
 * The host must name the plugin and the output (the first two), the backend
 * and the partition (the crash), or warn (the claim), in `kiln run` too -
 * tests/abi/host_checks_test.cpp, tests/abi/cli. */
#include <string.h>

#include "fake_common.h"

#define FAKE_WRONG_DTYPE 1
#define FAKE_WRONG_SHAPE 2
#define FAKE_EXEC_CRASH 3
#define FAKE_BAD_CLAIM 4

#if FAKE_MODE == FAKE_WRONG_DTYPE
#define FAKE_NAME "wrong_dtype"
#elif FAKE_MODE == FAKE_WRONG_SHAPE
#define FAKE_NAME "wrong_shape"
#elif FAKE_MODE == FAKE_EXEC_CRASH
#define FAKE_NAME "exec_crash"
#elif FAKE_MODE == FAKE_BAD_CLAIM
#define FAKE_NAME "bad_claim"
#else
#error "FAKE_MODE must be FAKE_WRONG_DTYPE, FAKE_WRONG_SHAPE, FAKE_EXEC_CRASH or FAKE_BAD_CLAIM"
#endif

static fake_plugin* g_plugin;

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

#if FAKE_MODE == FAKE_BAD_CLAIM
/* fake_relu_capability's answer (one node per group) plus a group holding
 * node n + 5 of an n-node view. */
static kiln_status_t* claim_too_much(kiln_instance_t* instance, const kiln_graph_t* graph, kiln_capability_t* out) {
  const kiln_host_api_t* h = g_plugin->host;
  const size_t n = h->graph_num_nodes(graph);
  size_t *sizes, *nodes, k;
  kiln_status_t* st = fake_relu_capability(instance, graph, out);
  if (st) return st;
  sizes = (size_t*)h->alloc(g_plugin->ctx, (out->num_groups + 1) * sizeof(size_t), 0);
  nodes = (size_t*)h->alloc(g_plugin->ctx, (out->num_groups + 1) * sizeof(size_t), 0);
  if (!sizes || !nodes) return fake_error(g_plugin, KILN_STATUS_INTERNAL, "out of memory");
  for (k = 0; k < out->num_groups; ++k) {
    sizes[k] = out->group_sizes[k];
    nodes[k] = out->group_nodes[k];
  }
  sizes[k] = 1;
  nodes[k] = n + 5;
  h->free(g_plugin->ctx, out->group_sizes);
  h->free(g_plugin->ctx, out->group_nodes);
  out->group_sizes = sizes;
  out->group_nodes = nodes;
  out->num_groups += 1;
  return NULL;
}
#else
static kiln_status_t* execute(kiln_compiled_t* compiled, kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs,
                              size_t num_inputs) {
  kiln_tensor_t out;
  int64_t dims[8];
  size_t i;
  (void)compiled;
  if (num_inputs != 1 || !inputs[0] || inputs[0]->rank < 1 || inputs[0]->rank > 8) {
    return fake_error(g_plugin, KILN_STATUS_INVALID_ARGUMENT, "Relu takes one input of rank 1 to 8");
  }
  for (i = 0; i < inputs[0]->rank; ++i) dims[i] = inputs[0]->dims[i];
  memset(&out, 0, sizeof(out));
  out.struct_size = sizeof(out);
#if FAKE_MODE == FAKE_WRONG_DTYPE
  return g_plugin->host->exec_allocate_output(ctx, 0, KILN_DTYPE_FLOAT16, dims, inputs[0]->rank, &out);
#elif FAKE_MODE == FAKE_WRONG_SHAPE
  dims[0] += 1;
  {
    /* Drops the host's error on purpose: the host must still report it. */
    kiln_status_t* st = g_plugin->host->exec_allocate_output(ctx, 0, KILN_DTYPE_FLOAT32, dims, inputs[0]->rank, &out);
    if (st) g_plugin->host->status_release(st);
    return NULL;
  }
#else
  {
    volatile int* volatile nowhere = NULL;
    (void)ctx;
    (void)dims;
    *nowhere = 1;
    return NULL;
  }
#endif
}
#endif

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  g_plugin = fake_plugin_new(args, FAKE_NAME);
  if (!g_plugin) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, (uint32_t)sizeof(g_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = fake_get_info;
  g_api.instance_create = fake_instance_create;
  g_api.instance_release = fake_instance_release;
#if FAKE_MODE == FAKE_BAD_CLAIM
  g_api.instance_get_capability = claim_too_much;
  g_api.compiled_execute = fake_relu_execute;
#else
  g_api.instance_get_capability = fake_relu_capability;
  g_api.compiled_execute = execute;
#endif
  g_api.instance_compile = fake_relu_compile;
  g_api.compiled_release = fake_relu_release;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)g_plugin;
  return NULL;
}
