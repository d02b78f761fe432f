/* Shared C helpers of the fake plugins (tests/abi/fakes): a plugin object,
 * error statuses, and a Relu-only capability/compile/execute, so each fake
 * is a working plugin except for the one thing it gets wrong. C11. */
#ifndef KILN_TESTS_ABI_FAKE_COMMON_H_
#define KILN_TESTS_ABI_FAKE_COMMON_H_

#include "kiln/c/backend.h"

typedef struct fake_plugin {
  const kiln_host_api_t* host;
  kiln_host_t* ctx;
  const char* name;
} fake_plugin;

/* A plugin object in host memory (so leak checks see it). NULL on failure. */
fake_plugin* fake_plugin_new(const kiln_backend_entry_args_t* args, const char* name);
void fake_plugin_free(fake_plugin* p);

kiln_status_t* fake_error(const fake_plugin* p, kiln_status_code_t code, const char* message);

/* Fills info with `name`, version 0.1, priority 0. */
kiln_status_t* fake_get_info(kiln_plugin_t* plugin, kiln_plugin_info_t* out);

/* An instance that remembers its plugin. */
kiln_status_t* fake_instance_create(kiln_plugin_t* plugin, size_t device, const char* const* keys,
                                    const char* const* values, size_t n, kiln_instance_t** out);
void fake_instance_release(kiln_instance_t* instance);

/* Claims every float32 Relu node as its own group; declines the rest. */
kiln_status_t* fake_relu_capability(kiln_instance_t* instance, const kiln_graph_t* graph, kiln_capability_t* out);
/* Compiles a group of exactly one Relu node. */
kiln_status_t* fake_relu_compile(kiln_instance_t* instance, const kiln_graph_t* graph,
                                 const kiln_partition_t* partition, kiln_compiled_t** out);
void fake_relu_release(kiln_compiled_t* compiled);
/* A compiled Relu that accepts any input shape (for imports); NULL on failure. */
kiln_compiled_t* fake_relu_make(fake_plugin* p);
kiln_status_t* fake_relu_execute(kiln_compiled_t* compiled, kiln_exec_context_t* ctx,
                                 const kiln_tensor_t* const* inputs, size_t num_inputs);

/* NULL when the host's ABI range includes this plugin's major; else an error
 * naming both (what every entry must check before returning its table). */
kiln_status_t* fake_check_range(const kiln_backend_entry_args_t* args);

/* Sets the header of a 1.x table. */
void fake_fill_header(kiln_abi_header_t* h, uint32_t size, uint16_t major, uint16_t minor);

#endif
