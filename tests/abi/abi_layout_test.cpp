// Pins the layout of every table and struct of kiln/c/backend.h: members
// only ever get appended, so these offsets never change within a major
// version. If one of these fails, the ABI broke: restore the old order (and
// add the new member at the end) instead of updating the number.
#include <gtest/gtest.h>

#include <cstddef>

#include "ir/attribute.h"
#include "kiln/c/backend.h"
#include "kiln/dtype.h"
#include "kiln/status.h"

extern "C" {
size_t kiln_c_probe_fill_table(kiln_backend_api_t* t);
size_t kiln_c_probe_sizeof(int which);
size_t kiln_c_probe_offset(int which);
}

namespace {

static_assert(sizeof(void*) == 8 && sizeof(size_t) == 8, "the pinned numbers are for LP64 targets");

// Function tables: the header, then one pointer per entry, in this order.
#define KILN_PIN_SLOT(type, member, slot) \
  static_assert(offsetof(type, member) == 8 + 8 * (slot), #type "." #member " moved")

KILN_PIN_SLOT(kiln_host_api_t, status_create, 0);
KILN_PIN_SLOT(kiln_host_api_t, status_release, 1);
KILN_PIN_SLOT(kiln_host_api_t, status_code, 2);
KILN_PIN_SLOT(kiln_host_api_t, status_message, 3);
KILN_PIN_SLOT(kiln_host_api_t, alloc, 4);
KILN_PIN_SLOT(kiln_host_api_t, free, 5);
KILN_PIN_SLOT(kiln_host_api_t, log, 6);
KILN_PIN_SLOT(kiln_host_api_t, log_enabled, 7);
KILN_PIN_SLOT(kiln_host_api_t, exec_num_threads, 8);
KILN_PIN_SLOT(kiln_host_api_t, parallel_for, 9);
KILN_PIN_SLOT(kiln_host_api_t, exec_allocate_output, 10);
KILN_PIN_SLOT(kiln_host_api_t, graph_name, 11);
KILN_PIN_SLOT(kiln_host_api_t, graph_num_nodes, 12);
KILN_PIN_SLOT(kiln_host_api_t, graph_node, 13);
KILN_PIN_SLOT(kiln_host_api_t, graph_num_inputs, 14);
KILN_PIN_SLOT(kiln_host_api_t, graph_input, 15);
KILN_PIN_SLOT(kiln_host_api_t, graph_num_outputs, 16);
KILN_PIN_SLOT(kiln_host_api_t, graph_output, 17);
KILN_PIN_SLOT(kiln_host_api_t, graph_find_value, 18);
KILN_PIN_SLOT(kiln_host_api_t, graph_opset, 19);
KILN_PIN_SLOT(kiln_host_api_t, node_name, 20);
KILN_PIN_SLOT(kiln_host_api_t, node_op_type, 21);
KILN_PIN_SLOT(kiln_host_api_t, node_domain, 22);
KILN_PIN_SLOT(kiln_host_api_t, node_opset, 23);
KILN_PIN_SLOT(kiln_host_api_t, node_index, 24);
KILN_PIN_SLOT(kiln_host_api_t, node_num_inputs, 25);
KILN_PIN_SLOT(kiln_host_api_t, node_input, 26);
KILN_PIN_SLOT(kiln_host_api_t, node_num_outputs, 27);
KILN_PIN_SLOT(kiln_host_api_t, node_output, 28);
KILN_PIN_SLOT(kiln_host_api_t, node_num_attributes, 29);
KILN_PIN_SLOT(kiln_host_api_t, node_attribute, 30);
KILN_PIN_SLOT(kiln_host_api_t, node_find_attribute, 31);
KILN_PIN_SLOT(kiln_host_api_t, value_name, 32);
KILN_PIN_SLOT(kiln_host_api_t, value_kind, 33);
KILN_PIN_SLOT(kiln_host_api_t, value_dtype, 34);
KILN_PIN_SLOT(kiln_host_api_t, value_rank, 35);
KILN_PIN_SLOT(kiln_host_api_t, value_dim, 36);
KILN_PIN_SLOT(kiln_host_api_t, value_is_constant, 37);
KILN_PIN_SLOT(kiln_host_api_t, value_constant, 38);
KILN_PIN_SLOT(kiln_host_api_t, value_is_graph_input, 39);
KILN_PIN_SLOT(kiln_host_api_t, value_is_graph_output, 40);
KILN_PIN_SLOT(kiln_host_api_t, value_producer, 41);
KILN_PIN_SLOT(kiln_host_api_t, value_num_consumers, 42);
KILN_PIN_SLOT(kiln_host_api_t, value_consumer, 43);
KILN_PIN_SLOT(kiln_host_api_t, value_has_outside_consumers, 44);
KILN_PIN_SLOT(kiln_host_api_t, attribute_name, 45);
KILN_PIN_SLOT(kiln_host_api_t, attribute_type, 46);
KILN_PIN_SLOT(kiln_host_api_t, attribute_count, 47);
KILN_PIN_SLOT(kiln_host_api_t, attribute_int, 48);
KILN_PIN_SLOT(kiln_host_api_t, attribute_float, 49);
KILN_PIN_SLOT(kiln_host_api_t, attribute_ints, 50);
KILN_PIN_SLOT(kiln_host_api_t, attribute_floats, 51);
KILN_PIN_SLOT(kiln_host_api_t, attribute_string, 52);
KILN_PIN_SLOT(kiln_host_api_t, attribute_tensor, 53);
KILN_PIN_SLOT(kiln_host_api_t, attribute_graph, 54);
KILN_PIN_SLOT(kiln_host_api_t, attribute_type_proto, 55);
// 1.0 ended here (56 entries); 1.1 appends:
KILN_PIN_SLOT(kiln_host_api_t, exec_should_cancel, 56);
KILN_PIN_SLOT(kiln_host_api_t, fence_signal, 57);
KILN_PIN_SLOT(kiln_host_api_t, fence_wait, 58);
KILN_PIN_SLOT(kiln_host_api_t, fence_value, 59);
KILN_PIN_SLOT(kiln_host_api_t, exec_workspace, 60);
KILN_PIN_SLOT(kiln_host_api_t, exec_trace_enabled, 61);
KILN_PIN_SLOT(kiln_host_api_t, exec_trace_event, 62);
KILN_PIN_SLOT(kiln_host_api_t, trace_now_ns, 63);
KILN_PIN_SLOT(kiln_host_api_t, value_constant_info, 64);
static_assert(sizeof(kiln_host_api_t) == 8 + 8 * 65, "kiln_host_api_t 1.1 has 65 entries");

KILN_PIN_SLOT(kiln_backend_api_t, plugin_release, 0);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_get_info, 1);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_is_available, 2);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_get_device_count, 3);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_get_device_info, 4);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_get_option_count, 5);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_get_option_info, 6);
KILN_PIN_SLOT(kiln_backend_api_t, instance_create, 7);
KILN_PIN_SLOT(kiln_backend_api_t, instance_release, 8);
KILN_PIN_SLOT(kiln_backend_api_t, instance_set_property, 9);
KILN_PIN_SLOT(kiln_backend_api_t, instance_get_property, 10);
KILN_PIN_SLOT(kiln_backend_api_t, instance_get_capability, 11);
KILN_PIN_SLOT(kiln_backend_api_t, instance_compile, 12);
KILN_PIN_SLOT(kiln_backend_api_t, compiled_release, 13);
KILN_PIN_SLOT(kiln_backend_api_t, compiled_get_info, 14);
KILN_PIN_SLOT(kiln_backend_api_t, compiled_execute, 15);
KILN_PIN_SLOT(kiln_backend_api_t, compiled_export, 16);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_check_compiled, 17);
KILN_PIN_SLOT(kiln_backend_api_t, instance_import, 18);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_get_custom_op_count, 19);
KILN_PIN_SLOT(kiln_backend_api_t, plugin_get_custom_op_info, 20);
// 1.0 ended here (21 entries); 1.1 appends:
KILN_PIN_SLOT(kiln_backend_api_t, instance_alloc, 21);
KILN_PIN_SLOT(kiln_backend_api_t, instance_free, 22);
KILN_PIN_SLOT(kiln_backend_api_t, instance_copy, 23);
KILN_PIN_SLOT(kiln_backend_api_t, instance_stream_wait, 24);
KILN_PIN_SLOT(kiln_backend_api_t, compiled_execute_async, 25);
static_assert(sizeof(kiln_backend_api_t) == 8 + 8 * 26, "kiln_backend_api_t 1.1 has 26 entries");

#define KILN_PIN(type, member, offset) static_assert(offsetof(type, member) == (offset), #type "." #member " moved")

KILN_PIN(kiln_abi_header_t, struct_size, 0);
KILN_PIN(kiln_abi_header_t, abi_major, 4);
KILN_PIN(kiln_abi_header_t, abi_minor, 6);
KILN_PIN(kiln_tensor_t, struct_size, 0);
KILN_PIN(kiln_tensor_t, dtype, 4);
KILN_PIN(kiln_tensor_t, rank, 8);
KILN_PIN(kiln_tensor_t, dims, 16);
KILN_PIN(kiln_tensor_t, data, 24);
KILN_PIN(kiln_tensor_t, nbytes, 32);
KILN_PIN(kiln_tensor_t, memory_kind, 40);  // 1.1
KILN_PIN(kiln_tensor_t, device_index, 44);
static_assert(sizeof(kiln_tensor_t) == 48);
KILN_PIN(kiln_plugin_info_t, name, 8);
KILN_PIN(kiln_plugin_info_t, version, 16);
KILN_PIN(kiln_plugin_info_t, vendor, 24);
KILN_PIN(kiln_plugin_info_t, vendor_sdk_version, 32);
KILN_PIN(kiln_plugin_info_t, description, 40);
KILN_PIN(kiln_plugin_info_t, priority, 48);
KILN_PIN(kiln_plugin_info_t, flags, 52);  // 1.1, in what was padding
static_assert(sizeof(kiln_plugin_info_t) == 56);
KILN_PIN(kiln_device_info_t, name, 8);
KILN_PIN(kiln_device_info_t, kind, 16);
KILN_PIN(kiln_device_info_t, description, 24);
// 1.1 appends device metadata after the 32 bytes of 1.0.
KILN_PIN(kiln_device_info_t, vendor_id, 32);
KILN_PIN(kiln_device_info_t, device_id, 36);
KILN_PIN(kiln_device_info_t, uuid, 40);
KILN_PIN(kiln_device_info_t, memory_bytes, 56);
KILN_PIN(kiln_device_info_t, driver_version, 64);
static_assert(sizeof(kiln_device_info_t) == 72);
KILN_PIN(kiln_option_info_t, name, 8);
KILN_PIN(kiln_option_info_t, type, 16);
KILN_PIN(kiln_option_info_t, default_value, 24);
KILN_PIN(kiln_option_info_t, doc, 32);
static_assert(sizeof(kiln_option_info_t) == 40);
KILN_PIN(kiln_capability_t, num_groups, 8);
KILN_PIN(kiln_capability_t, group_sizes, 16);
KILN_PIN(kiln_capability_t, group_nodes, 24);
KILN_PIN(kiln_capability_t, num_declined, 32);
KILN_PIN(kiln_capability_t, declined_nodes, 40);
KILN_PIN(kiln_capability_t, declined_reasons, 48);
static_assert(sizeof(kiln_capability_t) == 56);
KILN_PIN(kiln_partition_t, id, 8);
KILN_PIN(kiln_partition_t, num_nodes, 16);
KILN_PIN(kiln_partition_t, nodes, 24);
KILN_PIN(kiln_partition_t, num_inputs, 32);
KILN_PIN(kiln_partition_t, inputs, 40);
KILN_PIN(kiln_partition_t, num_outputs, 48);
KILN_PIN(kiln_partition_t, outputs, 56);
static_assert(sizeof(kiln_partition_t) == 64);
KILN_PIN(kiln_compiled_info_t, concurrency, 4);
KILN_PIN(kiln_compiled_info_t, num_inputs, 8);
KILN_PIN(kiln_compiled_info_t, num_outputs, 16);
KILN_PIN(kiln_compiled_info_t, flags, 24);  // 1.1
KILN_PIN(kiln_compiled_info_t, input_memory_kinds, 32);
KILN_PIN(kiln_compiled_info_t, output_memory_kinds, 40);
KILN_PIN(kiln_compiled_info_t, workspace_bytes, 48);
KILN_PIN(kiln_compiled_info_t, num_inplace, 80);
KILN_PIN(kiln_compiled_info_t, inplace_pairs, 88);
KILN_PIN(kiln_compiled_info_t, num_owned_constants, 96);
KILN_PIN(kiln_compiled_info_t, owned_constants, 104);
static_assert(sizeof(kiln_compiled_info_t) == 112);
KILN_PIN(kiln_copy_t, src, 8);
KILN_PIN(kiln_copy_t, src_kind, 16);
KILN_PIN(kiln_copy_t, src_device, 20);
KILN_PIN(kiln_copy_t, dst, 24);
KILN_PIN(kiln_copy_t, dst_kind, 32);
KILN_PIN(kiln_copy_t, dst_device, 36);
KILN_PIN(kiln_copy_t, bytes, 40);
static_assert(sizeof(kiln_copy_t) == 48);
KILN_PIN(kiln_constant_info_t, content_hash, 8);
KILN_PIN(kiln_constant_info_t, external_path, 24);
KILN_PIN(kiln_constant_info_t, external_offset, 32);
KILN_PIN(kiln_constant_info_t, external_length, 40);
static_assert(sizeof(kiln_constant_info_t) == 48);
KILN_PIN(kiln_custom_op_info_t, domain, 8);
KILN_PIN(kiln_custom_op_info_t, op_type, 16);
KILN_PIN(kiln_custom_op_info_t, since_version, 24);
KILN_PIN(kiln_custom_op_info_t, doc, 32);
static_assert(sizeof(kiln_custom_op_info_t) == 40);
KILN_PIN(kiln_backend_entry_args_t, min_abi_major, 4);
KILN_PIN(kiln_backend_entry_args_t, min_abi_minor, 6);
KILN_PIN(kiln_backend_entry_args_t, max_abi_major, 8);
KILN_PIN(kiln_backend_entry_args_t, max_abi_minor, 10);
KILN_PIN(kiln_backend_entry_args_t, host_api, 16);
KILN_PIN(kiln_backend_entry_args_t, host, 24);
static_assert(sizeof(kiln_backend_entry_args_t) == 32);

// Enum values the ABI shares with Kiln's own types.
static_assert(KILN_STATUS_INVALID_ARGUMENT == static_cast<int>(kiln::StatusCode::kInvalidArgument));
static_assert(KILN_STATUS_UNAVAILABLE == static_cast<int>(kiln::StatusCode::kUnavailable));
static_assert(KILN_STATUS_IO == static_cast<int>(kiln::StatusCode::kIo));
static_assert(KILN_STATUS_CANCELLED == static_cast<int>(kiln::StatusCode::kCancelled));
static_assert(KILN_STATUS_DEADLINE_EXCEEDED == static_cast<int>(kiln::StatusCode::kDeadlineExceeded));
static_assert(KILN_STATUS_RESOURCE_EXHAUSTED == static_cast<int>(kiln::StatusCode::kResourceExhausted));
static_assert(KILN_DTYPE_FLOAT32 == static_cast<int>(kiln::DType::kFloat32));
static_assert(KILN_DTYPE_BFLOAT16 == static_cast<int>(kiln::DType::kBFloat16));
static_assert(KILN_DTYPE_BOOL == static_cast<int>(kiln::DType::kBool));
static_assert(KILN_ATTR_GRAPHS == static_cast<int>(kiln::ir::AttrType::kGraphs));
static_assert(KILN_ATTR_TYPE_PROTOS == static_cast<int>(kiln::ir::AttrType::kTypeProtos));

TEST(AbiLayoutTest, CAndCppAgreeOnSizes) {
  EXPECT_EQ(kiln_c_probe_sizeof(0), sizeof(kiln_host_api_t));
  EXPECT_EQ(kiln_c_probe_sizeof(1), sizeof(kiln_backend_api_t));
  EXPECT_EQ(kiln_c_probe_sizeof(2), sizeof(kiln_tensor_t));
  EXPECT_EQ(kiln_c_probe_sizeof(3), sizeof(kiln_plugin_info_t));
  EXPECT_EQ(kiln_c_probe_sizeof(4), sizeof(kiln_capability_t));
  EXPECT_EQ(kiln_c_probe_sizeof(5), sizeof(kiln_partition_t));
  EXPECT_EQ(kiln_c_probe_sizeof(6), sizeof(kiln_backend_entry_args_t));
  EXPECT_EQ(kiln_c_probe_sizeof(7), sizeof(kiln_option_info_t));
  EXPECT_EQ(kiln_c_probe_sizeof(8), sizeof(kiln_device_info_t));
  EXPECT_EQ(kiln_c_probe_sizeof(9), sizeof(kiln_compiled_info_t));
  EXPECT_EQ(kiln_c_probe_sizeof(10), sizeof(kiln_custom_op_info_t));
}

TEST(AbiLayoutTest, CAndCppAgreeOnOffsets) {
  EXPECT_EQ(kiln_c_probe_offset(0), offsetof(kiln_host_api_t, attribute_type_proto));
  EXPECT_EQ(kiln_c_probe_offset(1), offsetof(kiln_backend_api_t, plugin_get_custom_op_info));
  EXPECT_EQ(kiln_c_probe_offset(2), offsetof(kiln_host_api_t, exec_allocate_output));
  EXPECT_EQ(kiln_c_probe_offset(3), offsetof(kiln_backend_api_t, compiled_execute));
  EXPECT_EQ(kiln_c_probe_offset(4), offsetof(kiln_tensor_t, nbytes));
  EXPECT_EQ(kiln_c_probe_offset(5), offsetof(kiln_backend_entry_args_t, host));
}

TEST(AbiLayoutTest, CPluginFillsItsTable) {
  kiln_backend_api_t t{};
  EXPECT_EQ(kiln_c_probe_fill_table(&t), sizeof(t));
  EXPECT_EQ(t.header.struct_size, sizeof(t));
  EXPECT_EQ(t.header.abi_major, KILN_BACKEND_ABI_MAJOR);
  ASSERT_NE(t.plugin_get_info, nullptr);
  EXPECT_EQ(t.plugin_release, nullptr);
  kiln_plugin_info_t info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(t.plugin_get_info(nullptr, &info), nullptr);
  EXPECT_STREQ(info.name, "c_plugin");
}

TEST(AbiLayoutTest, AbiHasChecksTheSize) {
  const size_t upto_execute = offsetof(kiln_backend_api_t, compiled_execute) + sizeof(void*);
  EXPECT_TRUE(KILN_ABI_HAS(kiln_backend_api_t, compiled_execute, upto_execute));
  EXPECT_FALSE(KILN_ABI_HAS(kiln_backend_api_t, compiled_export, upto_execute));
  EXPECT_FALSE(KILN_ABI_HAS(kiln_backend_api_t, plugin_release, 8));
}

}  // namespace
