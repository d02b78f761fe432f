#include "fake_common.h"

#include <stdio.h>
#include <string.h>

typedef struct fake_instance {
  fake_plugin* plugin;
} fake_instance;

typedef struct fake_compiled {
  fake_plugin* plugin;
  int64_t rank;     /* of the input as compiled; -1 unknown */
  int64_t dims[8];  /* -1 where unknown */
} fake_compiled;

fake_plugin* fake_plugin_new(const kiln_backend_entry_args_t* args, const char* name) {
  fake_plugin* p = (fake_plugin*)args->host_api->alloc(args->host, sizeof(fake_plugin), 0);
  if (!p) return NULL;
  p->host = args->host_api;
  p->ctx = args->host;
  p->name = name;
  return p;
}

void fake_plugin_free(fake_plugin* p) {
  if (p) p->host->free(p->ctx, p);
}

kiln_status_t* fake_error(const fake_plugin* p, kiln_status_code_t code, const char* message) {
  return p->host->status_create(code, message);
}

kiln_status_t* fake_get_info(kiln_plugin_t* plugin, kiln_plugin_info_t* out) {
  fake_plugin* p = (fake_plugin*)plugin;
  if (!p || !out) return NULL;
  out->name = p->name;
  out->version = "0.1";
  out->vendor = "Kiln tests";
  out->vendor_sdk_version = "";
  out->description = "a fake plugin for the ABI tests";
  out->priority = 0;
  return NULL;
}

kiln_status_t* fake_instance_create(kiln_plugin_t* plugin, size_t device, const char* const* keys,
                                    const char* const* values, size_t n, kiln_instance_t** out) {
  fake_plugin* p = (fake_plugin*)plugin;
  (void)values;
  if (!p || !out) return NULL;
  if (device != 0) return fake_error(p, KILN_STATUS_OUT_OF_RANGE, "only device 0 exists");
  if (n > 0) {
    char msg[256];
    snprintf(msg, sizeof(msg), "unknown option '%s'; known options: none", keys[0]);
    return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, msg);
  }
  fake_instance* inst = (fake_instance*)p->host->alloc(p->ctx, sizeof(fake_instance), 0);
  if (!inst) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  inst->plugin = p;
  *out = (kiln_instance_t*)inst;
  return NULL;
}

void fake_instance_release(kiln_instance_t* instance) {
  fake_instance* inst = (fake_instance*)instance;
  if (inst) inst->plugin->host->free(inst->plugin->ctx, inst);
}

static int is_relu_f32(const kiln_host_api_t* h, const kiln_node_t* n) {
  if (strcmp(h->node_domain(n), "") != 0 || strcmp(h->node_op_type(n), "Relu") != 0) return 0;
  if (h->node_num_inputs(n) != 1 || h->node_num_outputs(n) != 1) return 0;
  const kiln_value_t* in = h->node_input(n, 0);
  return in && h->value_dtype(in) == KILN_DTYPE_FLOAT32;
}

static char* host_strdup(const fake_plugin* p, const char* s) {
  size_t n = strlen(s) + 1;
  char* out = (char*)p->host->alloc(p->ctx, n, 0);
  if (out) memcpy(out, s, n);
  return out;
}

kiln_status_t* fake_relu_capability(kiln_instance_t* instance, const kiln_graph_t* graph, kiln_capability_t* out) {
  fake_instance* inst = (fake_instance*)instance;
  const fake_plugin* p = inst->plugin;
  const kiln_host_api_t* h = p->host;
  size_t n = h->graph_num_nodes(graph), claimed = 0, i, g = 0, d = 0;
  for (i = 0; i < n; ++i) claimed += (size_t)is_relu_f32(h, h->graph_node(graph, i));
  if (claimed > 0) {
    out->group_sizes = (size_t*)h->alloc(p->ctx, claimed * sizeof(size_t), 0);
    out->group_nodes = (size_t*)h->alloc(p->ctx, claimed * sizeof(size_t), 0);
    if (!out->group_sizes || !out->group_nodes) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  }
  if (n > claimed) {
    out->declined_nodes = (size_t*)h->alloc(p->ctx, (n - claimed) * sizeof(size_t), 0);
    out->declined_reasons = (char**)h->alloc(p->ctx, (n - claimed) * sizeof(char*), 0);
    if (!out->declined_nodes || !out->declined_reasons) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  }
  for (i = 0; i < n; ++i) {
    if (is_relu_f32(h, h->graph_node(graph, i))) {
      out->group_sizes[g] = 1;
      out->group_nodes[g] = i;
      out->num_groups = ++g;
    } else {
      out->declined_nodes[d] = i;
      out->declined_reasons[d] = host_strdup(p, "only float32 Relu is supported");
      out->num_declined = ++d;
    }
  }
  return NULL;
}

kiln_status_t* fake_relu_compile(kiln_instance_t* instance, const kiln_graph_t* graph,
                                 const kiln_partition_t* partition, kiln_compiled_t** out) {
  fake_instance* inst = (fake_instance*)instance;
  fake_plugin* p = inst->plugin;
  const kiln_host_api_t* h = p->host;
  if (!partition || !out) return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "NULL partition or out_compiled");
  if (partition->num_nodes != 1 || !is_relu_f32(h, h->graph_node(graph, partition->nodes[0])) ||
      partition->num_inputs != 1 || partition->num_outputs != 1) {
    return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "this plugin compiles single float32 Relu nodes only");
  }
  fake_compiled* c = (fake_compiled*)h->alloc(p->ctx, sizeof(fake_compiled), 0);
  if (!c) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  c->plugin = p;
  c->rank = h->value_rank(partition->inputs[0]);
  if (c->rank > 8) c->rank = -1;
  for (int64_t i = 0; i < c->rank; ++i) c->dims[i] = h->value_dim(partition->inputs[0], (size_t)i, NULL);
  *out = (kiln_compiled_t*)c;
  return NULL;
}

kiln_compiled_t* fake_relu_make(fake_plugin* p) {
  fake_compiled* c = (fake_compiled*)p->host->alloc(p->ctx, sizeof(fake_compiled), 0);
  if (!c) return NULL;
  c->plugin = p;
  c->rank = -1;
  return (kiln_compiled_t*)c;
}

void fake_relu_release(kiln_compiled_t* compiled) {
  fake_compiled* c = (fake_compiled*)compiled;
  if (c) c->plugin->host->free(c->plugin->ctx, c);
}

kiln_status_t* fake_relu_execute(kiln_compiled_t* compiled, kiln_exec_context_t* ctx,
                                 const kiln_tensor_t* const* inputs, size_t num_inputs) {
  fake_compiled* c = (fake_compiled*)compiled;
  fake_plugin* p = c->plugin;
  kiln_tensor_t out;
  size_t i, n;
  kiln_status_t* st;
  if (num_inputs != 1 || !inputs || !inputs[0]) return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "Relu takes one input");
  if (inputs[0]->dtype != KILN_DTYPE_FLOAT32) return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "Relu input must be float32");
  n = 1;
  for (i = 0; i < inputs[0]->rank; ++i) n *= (size_t)inputs[0]->dims[i];
  if (inputs[0]->nbytes < n * sizeof(float)) return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "input buffer is smaller than its shape");
  if (c->rank >= 0) {
    int ok = (int64_t)inputs[0]->rank == c->rank;
    for (i = 0; ok && i < inputs[0]->rank; ++i) ok = c->dims[i] < 0 || c->dims[i] == inputs[0]->dims[i];
    if (!ok) return fake_error(p, KILN_STATUS_INVALID_ARGUMENT, "input shape differs from the compiled one");
  }
  memset(&out, 0, sizeof(out));
  out.struct_size = sizeof(out);
  st = p->host->exec_allocate_output(ctx, 0, KILN_DTYPE_FLOAT32, inputs[0]->dims, inputs[0]->rank, &out);
  if (st) return st;
  n = inputs[0]->nbytes / sizeof(float);
  for (i = 0; i < n; ++i) {
    float x = ((const float*)inputs[0]->data)[i];
    ((float*)out.data)[i] = x > 0.f ? x : 0.f;
  }
  return NULL;
}

void fake_fill_header(kiln_abi_header_t* h, uint32_t size, uint16_t major, uint16_t minor) {
  h->struct_size = size;
  h->abi_major = major;
  h->abi_minor = minor;
}

kiln_status_t* fake_check_range(const kiln_backend_entry_args_t* args) {
  char msg[160];
  if (KILN_BACKEND_ABI_MAJOR >= args->min_abi_major && KILN_BACKEND_ABI_MAJOR <= args->max_abi_major) return NULL;
  snprintf(msg, sizeof(msg), "plugin speaks backend ABI %d.x, host speaks %d.%d to %d.%d", KILN_BACKEND_ABI_MAJOR,
           args->min_abi_major, args->min_abi_minor, args->max_abi_major, args->max_abi_minor);
  return args->host_api->status_create(KILN_STATUS_FAILED_PRECONDITION, msg);
}
