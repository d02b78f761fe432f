/* A plugin that keeps weights of its own (the shared-weights half of ABI
 * 1.1): it claims float32 Add and MatMul nodes whose second input is a
 * constant, copies that constant at compile time into memory of its own,
 * deduplicated per instance by the host's content hash
 * (value_constant_info), and declares it owned (kiln_compiled_info_t.
 * owned_constants), so the host may drop its copy. Built twice: with
 * FAKE_SHARED it sets KILN_PLUGIN_SHARED_INSTANCES. Properties (read-only):
 * "instances_created" (this plugin object's instance_create calls) and
 * "weight_copies" (distinct constants the instance holds). With
 * KILN_FAKE_WEIGHTS_KEEP_HOST_COPY set it declares nothing owned. C11. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_common.h"

#ifdef FAKE_SHARED
#define FAKE_NAME "weights_shared"
#define FAKE_FLAGS KILN_PLUGIN_SHARED_INSTANCES
#else
#define FAKE_NAME "weights"
#define FAKE_FLAGS 0
#endif

typedef struct weights_plugin {
  fake_plugin base; /* first: fake_common's helpers take it */
  size_t instances_created;
} weights_plugin;

/* One constant the instance holds, shared by the handles that read it. */
typedef struct weight {
  struct weight* next;
  uint64_t hash[2];
  float* data;
  size_t count;
  size_t refs;
} weight;

typedef struct weights_instance {
  weights_plugin* plugin;
  weight* weights;
} weights_instance;

enum { OP_NONE = 0, OP_ADD = 1, OP_MATMUL = 2 };

typedef struct weights_compiled {
  weights_instance* inst;
  int op;
  weight* w;
  int64_t k, n;            /* MatMul: w is [k, n] */
  char* name;              /* the constant's name */
  const char* owned[1];    /* owned_constants: name */
} weights_compiled;

static weights_plugin* plugin_of(kiln_plugin_t* p) { return (weights_plugin*)p; }
static const kiln_host_api_t* host_of(const weights_plugin* p) { return p->base.host; }

static kiln_status_t* error(const weights_plugin* p, kiln_status_code_t code, const char* m) {
  return fake_error(&p->base, code, m);
}

static char* host_strdup(const weights_plugin* p, const char* s) {
  size_t n = strlen(s) + 1;
  char* out = (char*)host_of(p)->alloc(p->base.ctx, n, 0);
  if (out) memcpy(out, s, n);
  return out;
}

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

static kiln_status_t* get_info(kiln_plugin_t* plugin, kiln_plugin_info_t* out) {
  kiln_status_t* st = fake_get_info(plugin, out);
  if (st) return st;
  if (KILN_ABI_HAS(kiln_plugin_info_t, flags, out->struct_size)) out->flags = FAKE_FLAGS;
  return NULL;
}

static kiln_status_t* instance_create(kiln_plugin_t* plugin, size_t device, const char* const* keys,
                                      const char* const* values, size_t n, kiln_instance_t** out) {
  weights_plugin* p = plugin_of(plugin);
  weights_instance* inst;
  (void)keys;
  (void)values;
  if (!p || !out) return NULL;
  if (device != 0) return error(p, KILN_STATUS_OUT_OF_RANGE, "only device 0 exists");
  if (n > 0) return error(p, KILN_STATUS_INVALID_ARGUMENT, "this plugin takes no options");
  inst = (weights_instance*)host_of(p)->alloc(p->base.ctx, sizeof(weights_instance), 0);
  if (!inst) return error(p, KILN_STATUS_INTERNAL, "out of memory");
  inst->plugin = p;
  inst->weights = NULL;
  p->instances_created++;
  *out = (kiln_instance_t*)inst;
  return NULL;
}

static void instance_release(kiln_instance_t* instance) {
  weights_instance* inst = (weights_instance*)instance;
  if (inst) host_of(inst->plugin)->free(inst->plugin->base.ctx, inst);
}

static kiln_status_t* get_property(kiln_instance_t* instance, const char* key, char** out) {
  weights_instance* inst = (weights_instance*)instance;
  char buf[32];
  size_t copies = 0;
  const weight* w;
  if (!inst || !key || !out) return NULL;
  for (w = inst->weights; w; w = w->next) ++copies;
  if (strcmp(key, "instances_created") == 0) {
    snprintf(buf, sizeof(buf), "%zu", inst->plugin->instances_created);
  } else if (strcmp(key, "weight_copies") == 0) {
    snprintf(buf, sizeof(buf), "%zu", copies);
  } else {
    return error(inst->plugin, KILN_STATUS_NOT_FOUND, "unknown property");
  }
  *out = host_strdup(inst->plugin, buf);
  return *out ? NULL : error(inst->plugin, KILN_STATUS_INTERNAL, "out of memory");
}

static kiln_status_t* set_property(kiln_instance_t* instance, const char* key, const char* value) {
  weights_instance* inst = (weights_instance*)instance;
  (void)key;
  (void)value;
  return error(inst->plugin, KILN_STATUS_INVALID_ARGUMENT, "this plugin's properties are read-only");
}

/* A float32 value of static shape: its rank (-1 otherwise) and dims. */
static int64_t static_dims(const kiln_host_api_t* h, const kiln_value_t* v, int64_t dims[8]) {
  int64_t r, i;
  if (!v || h->value_dtype(v) != KILN_DTYPE_FLOAT32) return -1;
  r = h->value_rank(v);
  if (r < 0 || r > 8) return -1;
  for (i = 0; i < r; ++i) {
    dims[i] = h->value_dim(v, (size_t)i, NULL);
    if (dims[i] < 0) return -1;
  }
  return r;
}

static int op_of(const kiln_host_api_t* h, const kiln_node_t* node) {
  const kiln_value_t *x, *c;
  int64_t xd[8], cd[8], xr, cr, i;
  int add, matmul;
  if (strcmp(h->node_domain(node), "") != 0) return OP_NONE;
  add = strcmp(h->node_op_type(node), "Add") == 0;
  matmul = strcmp(h->node_op_type(node), "MatMul") == 0;
  if ((!add && !matmul) || h->node_num_inputs(node) != 2 || h->node_num_outputs(node) != 1) return OP_NONE;
  x = h->node_input(node, 0);
  c = h->node_input(node, 1);
  if (!x || !c || h->value_is_constant(x) || !h->value_is_constant(c)) return OP_NONE;
  xr = static_dims(h, x, xd);
  cr = static_dims(h, c, cd);
  if (xr < 0 || cr < 0) return OP_NONE;
  if (add) {
    if (xr != cr) return OP_NONE;
    for (i = 0; i < xr; ++i)
      if (xd[i] != cd[i]) return OP_NONE;
    return OP_ADD;
  }
  return xr >= 2 && cr == 2 && xd[xr - 1] == cd[0] ? OP_MATMUL : OP_NONE;
}

static kiln_status_t* capability(kiln_instance_t* instance, const kiln_graph_t* graph, kiln_capability_t* out) {
  weights_instance* inst = (weights_instance*)instance;
  const weights_plugin* p = inst->plugin;
  const kiln_host_api_t* h = host_of(p);
  size_t n = h->graph_num_nodes(graph), claimed = 0, i, g = 0;
  for (i = 0; i < n; ++i) claimed += op_of(h, h->graph_node(graph, i)) != OP_NONE;
  if (claimed == 0) return NULL;
  out->group_sizes = (size_t*)h->alloc(p->base.ctx, claimed * sizeof(size_t), 0);
  out->group_nodes = (size_t*)h->alloc(p->base.ctx, claimed * sizeof(size_t), 0);
  if (!out->group_sizes || !out->group_nodes) return error(p, KILN_STATUS_INTERNAL, "out of memory");
  for (i = 0; i < n; ++i) {
    if (op_of(h, h->graph_node(graph, i)) == OP_NONE) continue;
    out->group_sizes[g] = 1;
    out->group_nodes[g] = i;
    out->num_groups = ++g;
  }
  return NULL;
}

/* The instance's copy of constant `c` (made on first use, found by content hash after). */
static kiln_status_t* weight_for(weights_instance* inst, const kiln_value_t* c, weight** out) {
  const weights_plugin* p = inst->plugin;
  const kiln_host_api_t* h = host_of(p);
  kiln_constant_info_t info;
  kiln_tensor_t t;
  kiln_status_t* st;
  weight* w;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  st = h->value_constant_info(c, &info);
  if (st) return st;
  for (w = inst->weights; w; w = w->next) {
    if (w->hash[0] == info.content_hash[0] && w->hash[1] == info.content_hash[1]) {
      w->refs++;
      *out = w;
      return NULL;
    }
  }
  memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  st = h->value_constant(c, &t);
  if (st) return st;
  w = (weight*)h->alloc(p->base.ctx, sizeof(weight), 0);
  if (!w) return error(p, KILN_STATUS_INTERNAL, "out of memory");
  w->data = (float*)h->alloc(p->base.ctx, t.nbytes ? t.nbytes : 1, 64);
  if (!w->data) {
    h->free(p->base.ctx, w);
    return error(p, KILN_STATUS_RESOURCE_EXHAUSTED, "out of memory for a weight");
  }
  memcpy(w->data, t.data, t.nbytes);
  w->count = t.nbytes / sizeof(float);
  w->hash[0] = info.content_hash[0];
  w->hash[1] = info.content_hash[1];
  w->refs = 1;
  w->next = inst->weights;
  inst->weights = w;
  *out = w;
  return NULL;
}

static void weight_release(weights_instance* inst, weight* w) {
  const kiln_host_api_t* h = host_of(inst->plugin);
  weight** link;
  if (!w || --w->refs > 0) return;
  for (link = &inst->weights; *link; link = &(*link)->next) {
    if (*link == w) {
      *link = w->next;
      break;
    }
  }
  h->free(inst->plugin->base.ctx, w->data);
  h->free(inst->plugin->base.ctx, w);
}

static kiln_status_t* compile(kiln_instance_t* instance, const kiln_graph_t* graph, const kiln_partition_t* partition,
                              kiln_compiled_t** out) {
  weights_instance* inst = (weights_instance*)instance;
  const weights_plugin* p = inst->plugin;
  const kiln_host_api_t* h = host_of(p);
  const kiln_node_t* node;
  const kiln_value_t* c;
  weights_compiled* wc;
  kiln_status_t* st;
  if (!partition || !out) return error(p, KILN_STATUS_INVALID_ARGUMENT, "NULL partition or out_compiled");
  node = partition->num_nodes == 1 ? h->graph_node(graph, partition->nodes[0]) : NULL;
  if (!node || op_of(h, node) == OP_NONE || partition->num_inputs != 1 || partition->num_outputs != 1)
    return error(p, KILN_STATUS_INVALID_ARGUMENT, "this plugin compiles one Add or MatMul with a constant");
  c = h->node_input(node, 1);
  wc = (weights_compiled*)h->alloc(p->base.ctx, sizeof(weights_compiled), 0);
  if (!wc) return error(p, KILN_STATUS_INTERNAL, "out of memory");
  memset(wc, 0, sizeof(*wc));
  wc->inst = inst;
  wc->op = op_of(h, node);
  if (wc->op == OP_MATMUL) {
    wc->k = h->value_dim(c, 0, NULL);
    wc->n = h->value_dim(c, 1, NULL);
  }
  wc->name = host_strdup(p, h->value_name(c));
  if (!wc->name) {
    h->free(p->base.ctx, wc);
    return error(p, KILN_STATUS_INTERNAL, "out of memory");
  }
  wc->owned[0] = wc->name;
  st = weight_for(inst, c, &wc->w);
  if (st) {
    h->free(p->base.ctx, wc->name);
    h->free(p->base.ctx, wc);
    return st;
  }
  *out = (kiln_compiled_t*)wc;
  return NULL;
}

static void compiled_release(kiln_compiled_t* compiled) {
  weights_compiled* wc = (weights_compiled*)compiled;
  const kiln_host_api_t* h;
  if (!wc) return;
  h = host_of(wc->inst->plugin);
  weight_release(wc->inst, wc->w);
  h->free(wc->inst->plugin->base.ctx, wc->name);
  h->free(wc->inst->plugin->base.ctx, wc);
}

static kiln_status_t* compiled_get_info(kiln_compiled_t* compiled, kiln_compiled_info_t* out) {
  weights_compiled* wc = (weights_compiled*)compiled;
  if (!wc || !out) return NULL;
  out->concurrency = KILN_CONCURRENCY_REENTRANT;
  out->num_inputs = 1;
  out->num_outputs = 1;
  /* The environment switch gives the same plugin without the promise, for
   * measuring what dropping the host's copies saves. */
  if (KILN_ABI_HAS(kiln_compiled_info_t, owned_constants, out->struct_size) &&
      !getenv("KILN_FAKE_WEIGHTS_KEEP_HOST_COPY")) {
    out->num_owned_constants = 1;
    out->owned_constants = wc->owned;
  }
  return NULL;
}

static kiln_status_t* execute(kiln_compiled_t* compiled, kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs,
                              size_t num_inputs) {
  weights_compiled* wc = (weights_compiled*)compiled;
  const weights_plugin* p = wc->inst->plugin;
  const kiln_tensor_t* x;
  const float *xs, *ws = wc->w->data;
  kiln_tensor_t out;
  kiln_status_t* st;
  size_t i, n;
  int64_t m, k, j, rows, dims[8];
  if (num_inputs != 1 || !inputs || !inputs[0]) return error(p, KILN_STATUS_INVALID_ARGUMENT, "one input expected");
  x = inputs[0];
  xs = (const float*)x->data;
  if (x->dtype != KILN_DTYPE_FLOAT32) return error(p, KILN_STATUS_INVALID_ARGUMENT, "float32 input expected");
  memset(&out, 0, sizeof(out));
  out.struct_size = sizeof(out);
  if (wc->op == OP_ADD) {
    if (x->nbytes != wc->w->count * sizeof(float)) return error(p, KILN_STATUS_INVALID_ARGUMENT, "input size changed");
    st = host_of(p)->exec_allocate_output(ctx, 0, KILN_DTYPE_FLOAT32, x->dims, x->rank, &out);
    if (st) return st;
    n = wc->w->count;
    for (i = 0; i < n; ++i) ((float*)out.data)[i] = xs[i] + ws[i];
    return NULL;
  }
  /* x is [..., rows, k]: every leading dim is a row of the product. */
  if (x->rank < 2 || x->rank > 8 || x->dims[x->rank - 1] != wc->k)
    return error(p, KILN_STATUS_INVALID_ARGUMENT, "MatMul input shape changed");
  rows = 1;
  for (i = 0; i + 1 < x->rank; ++i) {
    dims[i] = x->dims[i];
    rows *= x->dims[i];
  }
  dims[x->rank - 1] = wc->n;
  st = host_of(p)->exec_allocate_output(ctx, 0, KILN_DTYPE_FLOAT32, dims, x->rank, &out);
  if (st) return st;
  memset(out.data, 0, (size_t)(rows * wc->n) * sizeof(float));
  for (m = 0; m < rows; ++m)
    for (k = 0; k < wc->k; ++k) {
      const float a = xs[m * wc->k + k];
      const float* row = ws + k * wc->n;
      float* o = (float*)out.data + m * wc->n;
      for (j = 0; j < wc->n; ++j) o[j] += a * row[j];
    }
  return NULL;
}

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  weights_plugin* p;
  kiln_status_t* range = fake_check_range(args);
  if (range) return range;
  p = (weights_plugin*)args->host_api->alloc(args->host, sizeof(weights_plugin), 0);
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  p->base.host = args->host_api;
  p->base.ctx = args->host;
  p->base.name = FAKE_NAME;
  p->instances_created = 0;
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, (uint32_t)sizeof(g_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = get_info;
  g_api.instance_create = instance_create;
  g_api.instance_release = instance_release;
  g_api.instance_get_capability = capability;
  g_api.instance_compile = compile;
  g_api.compiled_release = compiled_release;
  g_api.compiled_execute = execute;
  g_api.compiled_get_info = compiled_get_info;
  g_api.instance_set_property = set_property;
  g_api.instance_get_property = get_property;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
