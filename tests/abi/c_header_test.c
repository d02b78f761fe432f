/* The plugin ABI header as a C11 translation unit: it must compile as plain
 * C with nothing but stdint/stddef/stdbool, and give the same layout as in
 * C++ (abi_layout_test.cpp compares these numbers with its own). */
#include "kiln/c/backend.h"

#include <string.h> /* memset, for the test only: the header itself needs nothing */

_Static_assert(sizeof(kiln_abi_header_t) == 8, "kiln_abi_header_t is 8 bytes");
_Static_assert(offsetof(kiln_host_api_t, header) == 0, "tables start with their header");
_Static_assert(offsetof(kiln_backend_api_t, header) == 0, "tables start with their header");
_Static_assert(KILN_ABI_HAS(kiln_backend_api_t, plugin_release, sizeof(kiln_backend_api_t)), "KILN_ABI_HAS works in C");

static kiln_status_t* c_get_info(kiln_plugin_t* plugin, kiln_plugin_info_t* out) {
  (void)plugin;
  out->name = "c_plugin";
  return NULL;
}

/* A table filled the way a C plugin fills it. */
size_t kiln_c_probe_fill_table(kiln_backend_api_t* t) {
  kiln_backend_api_t local;
  memset(&local, 0, sizeof(local));
  local.header.struct_size = sizeof(kiln_backend_api_t);
  local.header.abi_major = KILN_BACKEND_ABI_MAJOR;
  local.header.abi_minor = KILN_BACKEND_ABI_MINOR;
  local.plugin_get_info = c_get_info;
  *t = local;
  return sizeof(local);
}

size_t kiln_c_probe_sizeof(int which) {
  switch (which) {
    case 0: return sizeof(kiln_host_api_t);
    case 1: return sizeof(kiln_backend_api_t);
    case 2: return sizeof(kiln_tensor_t);
    case 3: return sizeof(kiln_plugin_info_t);
    case 4: return sizeof(kiln_capability_t);
    case 5: return sizeof(kiln_partition_t);
    case 6: return sizeof(kiln_backend_entry_args_t);
    case 7: return sizeof(kiln_option_info_t);
    case 8: return sizeof(kiln_device_info_t);
    case 9: return sizeof(kiln_compiled_info_t);
    case 10: return sizeof(kiln_custom_op_info_t);
    default: return 0;
  }
}

size_t kiln_c_probe_offset(int which) {
  switch (which) {
    case 0: return offsetof(kiln_host_api_t, attribute_type_proto);
    case 1: return offsetof(kiln_backend_api_t, plugin_get_custom_op_info);
    case 2: return offsetof(kiln_host_api_t, exec_allocate_output);
    case 3: return offsetof(kiln_backend_api_t, compiled_execute);
    case 4: return offsetof(kiln_tensor_t, nbytes);
    case 5: return offsetof(kiln_backend_entry_args_t, host);
    default: return 0;
  }
}
