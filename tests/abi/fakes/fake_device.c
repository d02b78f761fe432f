/* A fake device plugin (ABI 1.1) for the host's device-memory tests.
 *
 * "Device memory" is malloc'd blocks with a tag (magic + kind + size) in front
 * that the fake checks on every use: a device pointer that is not one of its
 * blocks of the right kind, an input or output view that says the wrong
 * memory kind, or a workspace smaller than declared counts as a bad use.
 * Copies are memcpy, counted by direction. Each Relu node is its own
 * partition (fake_common's capability); a compiled Relu wants its input and
 * output in DEVICE memory, declares workspace (DEVICE and HOST) and the
 * in-place pair (0, 0). With option async=true its handles are
 * KILN_COMPILED_ASYNC: executions and fenced copies go to one worker thread
 * in order, which signals the fences (with an error under fail_async=true)
 * and records trace slices; slow_ms=N makes each async execution take N ms,
 * polling exec_should_cancel every millisecond; claim=P claims only the
 * Relu nodes whose names start with P. instance_stream_wait queues a wait
 * for another fence on the worker (counted as stream_waits). Built twice:
 * as "fake_device" and, with FAKE_DEVICE_NAME, as a second device plugin. The counters are read-only properties
 * (instance_get_property): copies_in, copies_out, executions, inplace,
 * bad_uses, workspace_ok, allocs, live_blocks. C11 + pthreads. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_common.h"

#ifndef FAKE_DEVICE_NAME
#define FAKE_DEVICE_NAME "fake_device"
#endif
#define DEV_MAGIC 0x4b494c4e44455631ull /* "KILNDEV1" */
#define DEVICE_WS_BYTES 256
#define HOST_WS_BYTES 64

typedef struct block {
  uint64_t magic;
  int32_t kind;
  size_t size;
  uint64_t pad[5]; /* 64 bytes, so the payload is 64-aligned */
} block;

typedef struct job {
  struct job* next;
  int is_copy;
  int is_wait; /* stream_wait: wait for `fence` to reach `value` */
  /* execution */
  kiln_exec_context_t* ctx;
  const float* in;
  float* out;
  size_t n;
  /* copy */
  kiln_copy_t* copies;
  size_t num_copies;
  kiln_fence_t* fence;
  uint64_t value;
} job;

typedef struct dev_instance {
  fake_plugin* plugin;
  int async;
  int fail_async;
  long slow_ms;
  char claim[32];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t worker;
  int stop;
  int busy;
  job* head;
  job* tail;
  /* counters, under mu */
  long copies_in, copies_out, executions, inplace, bad_uses, workspace_ok, allocs, live_blocks, stream_waits;
} dev_instance;

typedef struct dev_compiled {
  dev_instance* inst;
} dev_compiled;

static const int32_t k_device_kinds[1] = {KILN_MEMORY_DEVICE};
static const size_t k_inplace[2] = {0, 0};

static void count(dev_instance* d, long* counter) {
  pthread_mutex_lock(&d->mu);
  ++*counter;
  pthread_mutex_unlock(&d->mu);
}

/* The block of a device pointer of kind `kind`, or NULL. */
static block* block_of(const void* p, int32_t kind) {
  block* b;
  if (!p) return NULL;
  b = (block*)((char*)p - sizeof(block));
  return b->magic == DEV_MAGIC && b->kind == kind ? b : NULL;
}

static int device_ok(dev_instance* d, const void* p, int32_t kind, size_t bytes) {
  block* b = block_of(p, kind);
  if (b && b->size >= bytes) return 1;
  count(d, &d->bad_uses);
  return 0;
}

static void relu(const float* in, float* out, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
}

static void run_copies(dev_instance* d, const kiln_copy_t* c, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    if (c[i].src_kind != KILN_MEMORY_HOST && !device_ok(d, c[i].src, c[i].src_kind, c[i].bytes)) continue;
    if (c[i].dst_kind != KILN_MEMORY_HOST && !device_ok(d, c[i].dst, c[i].dst_kind, c[i].bytes)) continue;
    memcpy(c[i].dst, c[i].src, c[i].bytes);
    if (c[i].dst_kind == KILN_MEMORY_DEVICE) count(d, &d->copies_in);
    else if (c[i].src_kind == KILN_MEMORY_DEVICE) count(d, &d->copies_out);
  }
}

/* --- the worker: runs queued jobs in order ---------------------------------- */

/* Takes `ms` milliseconds (at least one poll); 1 when the run was cancelled meanwhile. */
static int wait_or_cancel(const kiln_host_api_t* h, kiln_exec_context_t* ctx, long ms) {
  long i;
  struct timespec one_ms = {0, 1000000};
  for (i = 0;; ++i) {
    if (h->exec_should_cancel(ctx)) return 1;
    if (i >= ms) return 0;
    nanosleep(&one_ms, NULL);
  }
}

static void* worker_main(void* arg) {
  dev_instance* d = (dev_instance*)arg;
  const kiln_host_api_t* h = d->plugin->host;
  for (;;) {
    job* j;
    pthread_mutex_lock(&d->mu);
    while (!d->head && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
    if (!d->head) {
      pthread_mutex_unlock(&d->mu);
      return NULL;
    }
    j = d->head;
    d->head = j->next;
    if (!d->head) d->tail = NULL;
    d->busy = 1;
    pthread_mutex_unlock(&d->mu);
    if (j->is_wait) {
      h->status_release(h->fence_wait(j->fence, j->value, UINT64_MAX)); /* its error reaches the host through its owner */
    } else if (j->is_copy) {
      run_copies(d, j->copies, j->num_copies);
      free(j->copies);
      h->fence_signal(j->fence, j->value, NULL);
    } else {
      uint64_t t0 = h->trace_now_ns();
      kiln_status_t* err = NULL;
      if (d->fail_async) err = h->status_create(KILN_STATUS_INTERNAL, "the fake device failed");
      else if (wait_or_cancel(h, j->ctx, d->slow_ms)) err = h->status_create(KILN_STATUS_CANCELLED, "cancelled");
      else relu(j->in, j->out, j->n);
      if (h->exec_trace_enabled(j->ctx)) h->exec_trace_event(j->ctx, "relu", 0, t0, h->trace_now_ns());
      h->fence_signal(j->fence, j->value, err);
    }
    free(j);
    pthread_mutex_lock(&d->mu);
    d->busy = 0;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
  }
}

static void enqueue(dev_instance* d, job* j) {
  pthread_mutex_lock(&d->mu);
  j->next = NULL;
  if (d->tail) d->tail->next = j;
  else d->head = j;
  d->tail = j;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

/* Waits until everything queued so far has run (synchronous work keeps the order). */
static void drain(dev_instance* d) {
  if (!d->async) return;
  pthread_mutex_lock(&d->mu);
  while (d->head || d->busy) pthread_cond_wait(&d->cv, &d->mu);
  pthread_mutex_unlock(&d->mu);
}

/* --- instance ------------------------------------------------------------------ */

static int parse_bool(const char* v) { return strcmp(v, "true") == 0 || strcmp(v, "1") == 0; }

static kiln_status_t* instance_create(kiln_plugin_t* plugin, size_t device, const char* const* keys,
                                      const char* const* values, size_t n, kiln_instance_t** out) {
  fake_plugin* p = (fake_plugin*)plugin;
  dev_instance* d;
  size_t i;
  if (device != 0) return fake_error(p, KILN_STATUS_OUT_OF_RANGE, "only device 0 exists");
  d = (dev_instance*)calloc(1, sizeof(dev_instance));
  if (!d) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  d->plugin = p;
  for (i = 0; i < n; ++i) {
    if (strcmp(keys[i], "async") == 0) d->async = parse_bool(values[i]);
    else if (strcmp(keys[i], "fail_async") == 0) d->fail_async = parse_bool(values[i]);
    else if (strcmp(keys[i], "slow_ms") == 0) d->slow_ms = strtol(values[i], NULL, 10);
    else if (strcmp(keys[i], "claim") == 0) snprintf(d->claim, sizeof(d->claim), "%s", values[i]);
  }
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
  if (d->async && pthread_create(&d->worker, NULL, worker_main, d) != 0) {
    free(d);
    return fake_error(p, KILN_STATUS_INTERNAL, "cannot start the worker");
  }
  *out = (kiln_instance_t*)d;
  return NULL;
}

static void instance_release(kiln_instance_t* instance) {
  dev_instance* d = (dev_instance*)instance;
  if (!d) return;
  if (d->async) {
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->worker, NULL);
  }
  pthread_cond_destroy(&d->cv);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

static kiln_status_t* get_property(kiln_instance_t* instance, const char* key, char** out_value) {
  dev_instance* d = (dev_instance*)instance;
  fake_plugin* p = d->plugin;
  long v;
  char buf[32];
  pthread_mutex_lock(&d->mu);
  if (strcmp(key, "copies_in") == 0) v = d->copies_in;
  else if (strcmp(key, "copies_out") == 0) v = d->copies_out;
  else if (strcmp(key, "executions") == 0) v = d->executions;
  else if (strcmp(key, "inplace") == 0) v = d->inplace;
  else if (strcmp(key, "bad_uses") == 0) v = d->bad_uses;
  else if (strcmp(key, "workspace_ok") == 0) v = d->workspace_ok;
  else if (strcmp(key, "allocs") == 0) v = d->allocs;
  else if (strcmp(key, "live_blocks") == 0) v = d->live_blocks;
  else if (strcmp(key, "stream_waits") == 0) v = d->stream_waits;
  else v = -1;
  pthread_mutex_unlock(&d->mu);
  if (v < 0) return fake_error(p, KILN_STATUS_NOT_FOUND, "unknown property");
  snprintf(buf, sizeof(buf), "%ld", v);
  *out_value = (char*)p->host->alloc(p->ctx, strlen(buf) + 1, 0);
  if (!*out_value) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  memcpy(*out_value, buf, strlen(buf) + 1);
  return NULL;
}

static kiln_status_t* instance_alloc(kiln_instance_t* instance, int32_t kind, uint32_t device, size_t size,
                                     size_t alignment, void** out_ptr) {
  dev_instance* d = (dev_instance*)instance;
  block* b;
  (void)alignment;
  if (device != 0) return fake_error(d->plugin, KILN_STATUS_OUT_OF_RANGE, "only device 0 exists");
  if (kind <= KILN_MEMORY_HOST || kind >= KILN_MEMORY_KIND_COUNT)
    return fake_error(d->plugin, KILN_STATUS_INVALID_ARGUMENT, "not a device memory kind");
  if (posix_memalign((void**)&b, 64, sizeof(block) + (size ? size : 1)) != 0)
    return fake_error(d->plugin, KILN_STATUS_RESOURCE_EXHAUSTED, "out of device memory");
  memset(b, 0, sizeof(block));
  b->magic = DEV_MAGIC;
  b->kind = kind;
  b->size = size;
  pthread_mutex_lock(&d->mu);
  ++d->allocs;
  ++d->live_blocks;
  pthread_mutex_unlock(&d->mu);
  *out_ptr = (char*)b + sizeof(block);
  return NULL;
}

static void instance_free(kiln_instance_t* instance, int32_t kind, void* ptr) {
  dev_instance* d = (dev_instance*)instance;
  block* b;
  if (!ptr) return;
  b = block_of(ptr, kind);
  if (!b) {
    count(d, &d->bad_uses);
    return;
  }
  b->magic = 0;
  free(b);
  pthread_mutex_lock(&d->mu);
  --d->live_blocks;
  pthread_mutex_unlock(&d->mu);
}

static kiln_status_t* instance_copy(kiln_instance_t* instance, const kiln_copy_t* copies, size_t n,
                                    kiln_fence_t* fence, uint64_t value) {
  dev_instance* d = (dev_instance*)instance;
  const kiln_host_api_t* h = d->plugin->host;
  job* j;
  if (!fence || !d->async) {
    drain(d);
    run_copies(d, copies, n);
    if (fence) h->fence_signal(fence, value, NULL);
    return NULL;
  }
  j = (job*)calloc(1, sizeof(job));
  if (!j) return fake_error(d->plugin, KILN_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  j->is_copy = 1;
  j->copies = (kiln_copy_t*)malloc(n * sizeof(kiln_copy_t) + 1);
  if (!j->copies) {
    free(j);
    return fake_error(d->plugin, KILN_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  }
  memcpy(j->copies, copies, n * sizeof(kiln_copy_t));
  j->num_copies = n;
  j->fence = fence;
  j->value = value;
  enqueue(d, j);
  return NULL;
}

static kiln_status_t* stream_wait(kiln_instance_t* instance, kiln_fence_t* fence, uint64_t value) {
  dev_instance* d = (dev_instance*)instance;
  job* j;
  count(d, &d->stream_waits);
  if (!d->async) {
    kiln_status_t* st = d->plugin->host->fence_wait(fence, value, UINT64_MAX);
    d->plugin->host->status_release(st);
    return NULL;
  }
  j = (job*)calloc(1, sizeof(job));
  if (!j) return fake_error(d->plugin, KILN_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  j->is_wait = 1;
  j->fence = fence;
  j->value = value;
  enqueue(d, j);
  return NULL;
}

static int claims(const dev_instance* d, const kiln_host_api_t* h, const kiln_node_t* n) {
  const kiln_value_t* in;
  if (strcmp(h->node_domain(n), "") != 0 || strcmp(h->node_op_type(n), "Relu") != 0) return 0;
  if (strncmp(h->node_name(n), d->claim, strlen(d->claim)) != 0) return 0;
  in = h->node_input(n, 0);
  return in && h->value_dtype(in) == KILN_DTYPE_FLOAT32;
}

/* Each claimed Relu its own group; the rest declined. */
static kiln_status_t* capability(kiln_instance_t* instance, const kiln_graph_t* graph, kiln_capability_t* out) {
  dev_instance* d = (dev_instance*)instance;
  const fake_plugin* p = d->plugin;
  const kiln_host_api_t* h = p->host;
  size_t n = h->graph_num_nodes(graph), i;
  if (n == 0) return NULL;
  out->group_sizes = (size_t*)h->alloc(p->ctx, n * sizeof(size_t), 0);
  out->group_nodes = (size_t*)h->alloc(p->ctx, n * sizeof(size_t), 0);
  out->declined_nodes = (size_t*)h->alloc(p->ctx, n * sizeof(size_t), 0);
  out->declined_reasons = (char**)h->alloc(p->ctx, n * sizeof(char*), 0);
  if (!out->group_sizes || !out->group_nodes || !out->declined_nodes || !out->declined_reasons)
    return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
  for (i = 0; i < n; ++i) {
    if (claims(d, h, h->graph_node(graph, i))) {
      out->group_sizes[out->num_groups] = 1;
      out->group_nodes[out->num_groups++] = i;
    } else {
      static const char reason[] = "not a float32 Relu this instance claims";
      char* r = (char*)h->alloc(p->ctx, sizeof(reason), 0);
      if (!r) return fake_error(p, KILN_STATUS_INTERNAL, "out of memory");
      memcpy(r, reason, sizeof(reason));
      out->declined_nodes[out->num_declined] = i;
      out->declined_reasons[out->num_declined++] = r;
    }
  }
  return NULL;
}

/* --- compiled ---------------------------------------------------------------------- */

static kiln_status_t* compile(kiln_instance_t* instance, const kiln_graph_t* graph, const kiln_partition_t* partition,
                              kiln_compiled_t** out) {
  dev_instance* d = (dev_instance*)instance;
  dev_compiled* c;
  (void)graph;
  if (partition->num_nodes != 1 || partition->num_inputs != 1 || partition->num_outputs != 1)
    return fake_error(d->plugin, KILN_STATUS_INVALID_ARGUMENT, "a partition is one Relu");
  c = (dev_compiled*)calloc(1, sizeof(dev_compiled));
  if (!c) return fake_error(d->plugin, KILN_STATUS_INTERNAL, "out of memory");
  c->inst = d;
  *out = (kiln_compiled_t*)c;
  return NULL;
}

static void compiled_release(kiln_compiled_t* compiled) { free(compiled); }

static kiln_status_t* get_info(kiln_compiled_t* compiled, kiln_compiled_info_t* out) {
  dev_compiled* c = (dev_compiled*)compiled;
  out->concurrency = KILN_CONCURRENCY_SERIAL;
  out->num_inputs = 1;
  out->num_outputs = 1;
  if (!KILN_ABI_HAS(kiln_compiled_info_t, inplace_pairs, out->struct_size)) return NULL;
  out->flags = c->inst->async ? KILN_COMPILED_ASYNC : 0;
  out->input_memory_kinds = k_device_kinds;
  out->output_memory_kinds = k_device_kinds;
  out->workspace_bytes[KILN_MEMORY_DEVICE] = DEVICE_WS_BYTES;
  out->workspace_bytes[KILN_MEMORY_HOST] = HOST_WS_BYTES;
  out->num_inplace = 1;
  out->inplace_pairs = k_inplace;
  return NULL;
}

/* Checks the input, workspace and output; allocates the output. */
static kiln_status_t* prepare(dev_compiled* c, kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs,
                              size_t num_inputs, kiln_tensor_t* out) {
  dev_instance* d = c->inst;
  const kiln_host_api_t* h = d->plugin->host;
  size_t ws_dev = 0, ws_host = 0;
  void* wd;
  void* wh;
  kiln_status_t* st;
  if (num_inputs != 1 || !inputs || !inputs[0] || inputs[0]->dtype != KILN_DTYPE_FLOAT32)
    return fake_error(d->plugin, KILN_STATUS_INVALID_ARGUMENT, "Relu takes one float32 input");
  if (inputs[0]->memory_kind != KILN_MEMORY_DEVICE || !device_ok(d, inputs[0]->data, KILN_MEMORY_DEVICE, inputs[0]->nbytes))
    return fake_error(d->plugin, KILN_STATUS_INVALID_ARGUMENT, "the input is not in device memory");
  wd = h->exec_workspace(ctx, KILN_MEMORY_DEVICE, &ws_dev);
  wh = h->exec_workspace(ctx, KILN_MEMORY_HOST, &ws_host);
  if (wd && ws_dev >= DEVICE_WS_BYTES && device_ok(d, wd, KILN_MEMORY_DEVICE, DEVICE_WS_BYTES) && wh &&
      ws_host >= HOST_WS_BYTES) {
    memset(wh, 0, HOST_WS_BYTES); /* the host workspace is host memory: ASan checks the size */
    count(d, &d->workspace_ok);
  }
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  st = h->exec_allocate_output(ctx, 0, KILN_DTYPE_FLOAT32, inputs[0]->dims, inputs[0]->rank, out);
  if (st) return st;
  if (out->memory_kind != KILN_MEMORY_DEVICE || !device_ok(d, out->data, KILN_MEMORY_DEVICE, out->nbytes))
    return fake_error(d->plugin, KILN_STATUS_INTERNAL, "the output is not in device memory");
  if (out->data == inputs[0]->data) count(d, &d->inplace);
  count(d, &d->executions);
  return NULL;
}

static kiln_status_t* execute(kiln_compiled_t* compiled, kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs,
                              size_t num_inputs) {
  dev_compiled* c = (dev_compiled*)compiled;
  kiln_tensor_t out;
  kiln_status_t* st = prepare(c, ctx, inputs, num_inputs, &out);
  if (st) return st;
  drain(c->inst);
  relu((const float*)inputs[0]->data, (float*)out.data, out.nbytes / sizeof(float));
  return NULL;
}

static kiln_status_t* execute_async(kiln_compiled_t* compiled, kiln_exec_context_t* ctx,
                                    const kiln_tensor_t* const* inputs, size_t num_inputs, kiln_fence_t* fence,
                                    uint64_t value) {
  dev_compiled* c = (dev_compiled*)compiled;
  kiln_tensor_t out;
  job* j;
  kiln_status_t* st = prepare(c, ctx, inputs, num_inputs, &out);
  if (st) return st;
  j = (job*)calloc(1, sizeof(job));
  if (!j) return fake_error(c->inst->plugin, KILN_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  j->ctx = ctx;
  j->in = (const float*)inputs[0]->data;
  j->out = (float*)out.data;
  j->n = out.nbytes / sizeof(float);
  j->fence = fence;
  j->value = value;
  enqueue(c->inst, j);
  return NULL;
}

/* --- plugin ------------------------------------------------------------------------- */

static const char* const k_option_names[4] = {"async", "fail_async", "slow_ms", "claim"};
static const char* const k_option_docs[4] = {"run partitions on the fake device's worker thread",
                                             "every asynchronous execution fails through its fence",
                                             "milliseconds each asynchronous execution takes",
                                             "claim only Relu nodes whose names start with this"};
static const int32_t k_option_types[4] = {KILN_OPTION_BOOL, KILN_OPTION_BOOL, KILN_OPTION_INT, KILN_OPTION_STRING};
static const char* const k_option_defaults[4] = {"false", "false", "0", ""};

static kiln_status_t* option_count(kiln_plugin_t* plugin, size_t* out) {
  (void)plugin;
  *out = 4;
  return NULL;
}

static kiln_status_t* option_info(kiln_plugin_t* plugin, size_t i, kiln_option_info_t* out) {
  if (i >= 4) return fake_error((fake_plugin*)plugin, KILN_STATUS_OUT_OF_RANGE, "no such option");
  out->name = k_option_names[i];
  out->type = k_option_types[i];
  out->default_value = k_option_defaults[i];
  out->doc = k_option_docs[i];
  return NULL;
}

static void release_plugin(kiln_plugin_t* p) { fake_plugin_free((fake_plugin*)p); }

static kiln_backend_api_t g_api;

KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                      const kiln_backend_api_t** out_api, kiln_plugin_t** out_plugin) {
  kiln_status_t* range = fake_check_range(args);
  fake_plugin* p;
  if (range) return range;
  p = fake_plugin_new(args, FAKE_DEVICE_NAME);
  if (!p) return args->host_api->status_create(KILN_STATUS_INTERNAL, "out of memory");
  memset(&g_api, 0, sizeof(g_api));
  fake_fill_header(&g_api.header, sizeof(g_api), KILN_BACKEND_ABI_MAJOR, KILN_BACKEND_ABI_MINOR);
  g_api.plugin_release = release_plugin;
  g_api.plugin_get_info = fake_get_info;
  g_api.plugin_get_option_count = option_count;
  g_api.plugin_get_option_info = option_info;
  g_api.instance_create = instance_create;
  g_api.instance_release = instance_release;
  g_api.instance_get_property = get_property;
  g_api.instance_get_capability = capability;
  g_api.instance_compile = compile;
  g_api.compiled_release = compiled_release;
  g_api.compiled_get_info = get_info;
  g_api.compiled_execute = execute;
  g_api.instance_alloc = instance_alloc;
  g_api.instance_free = instance_free;
  g_api.instance_copy = instance_copy;
  g_api.instance_stream_wait = stream_wait;
  g_api.compiled_execute_async = execute_async;
  *out_api = &g_api;
  *out_plugin = (kiln_plugin_t*)p;
  return NULL;
}
