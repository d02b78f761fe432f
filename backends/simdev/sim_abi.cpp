// simdev's plugin class and its entry: the SDK's table for the 1.0 entries,
// with the 1.1 device entries (memory, copies, stream waits, asynchronous
// execution, the 1.1 compiled info and the shared-instances flag) filled in
// here by trampolines that catch everything, as the SDK's do.
#include <cstring>

#include "sim_plugin.h"

namespace simdev {

using kiln::sdk::fail;
using kiln::sdk::OptionSpec;

SimPlugin::Info SimPlugin::info() const {
  Info i;
  i.name = "simdev";
  i.version = "1.1.0";
  i.vendor = "Kiln project";
  i.vendor_sdk_version = "";
  i.description = "simulated discrete accelerator on the CPU: device memory, copies, fences, async queue (tests ABI 1.1)";
  i.priority = 0;  // a test device: used only when named (--backends simdev)
  return i;
}

std::vector<SimPlugin::Device> SimPlugin::devices() const {
  Device d;
  d.name = "sim0";
  d.kind = KILN_DEVICE_GPU;
  d.description = "simulated discrete accelerator (CPU kernels behind a guarded device memory)";
  d.vendor_id = 0x4b4c;  // "KL": not a PCI-SIG vendor, a simulation
  d.device_id = 0x0001;
  const char uuid[17] = "kiln-simdev-0000";
  std::memcpy(d.uuid.data(), uuid, 16);
  d.memory_bytes = kDefaultMemoryBytes;
  d.driver_version = "simdev 1.1.0";
  return {d};
}

std::vector<OptionSpec> SimPlugin::option_schema() const {
  return {
      {"latency_us", KILN_OPTION_INT, "0", "simulated device time per op, microseconds (cancellation is polled meanwhile)"},
      {"copy_latency_us", KILN_OPTION_INT, "0", "simulated time per instance_copy batch, microseconds"},
      {"memory_bytes", KILN_OPTION_INT, std::to_string(kDefaultMemoryBytes),
       "device memory capacity; allocations beyond it fail with RESOURCE_EXHAUSTED"},
      {"guard", KILN_OPTION_BOOL, "true", "keep device memory PROT_NONE outside plugin calls (a host read faults)"},
      {"fail_after", KILN_OPTION_INT, "0",
       "after this many executions every further one fails as out of device memory (0: never)"},
      {"async", KILN_OPTION_BOOL, "true", "declare compiled partitions KILN_COMPILED_ASYNC"},
      {"own_constants", KILN_OPTION_BOOL, "true",
       "declare the device copies of constants owned_constants (the host may drop its copies, and with them the "
       "partitions' portable fallback)"},
      {"fuse", KILN_OPTION_BOOL, "true", "claim connected nodes as one group (false: one node per group)"},
      {"max_group_size", KILN_OPTION_INT, "0", "largest number of nodes in one group (0: no limit)"},
  };
}

std::unique_ptr<kiln::sdk::Instance> SimPlugin::create_instance(size_t, kiln::sdk::Options options) {
  return std::make_unique<SimInstance>(host(), std::move(options));
}

namespace {

using Entry = kiln::sdk::PluginEntry<SimPlugin>;
using kiln::sdk::Glue;

SimInstance* instance_of(kiln_instance_t* i) { return static_cast<SimInstance*>(Entry::of(i)->impl.get()); }
SimCompiled* compiled_of(kiln_compiled_t* c) { return static_cast<SimCompiled*>(Entry::of(c)->impl.get()); }

kiln_status_t* plugin_get_info(kiln_plugin_t* p, kiln_plugin_info_t* out) noexcept {
  kiln_status_t* st = Entry::plugin_get_info(p, out);
  if (!st && KILN_ABI_HAS(kiln_plugin_info_t, flags, out->struct_size)) out->flags |= KILN_PLUGIN_SHARED_INSTANCES;
  return st;
}

kiln_status_t* compiled_get_info(kiln_compiled_t* c, kiln_compiled_info_t* out) noexcept {
  if (!c || !out) return Entry::null_argument("compiled_get_info: NULL compiled or out_info");
  return Glue::guard(Entry::of(c)->plugin->host, "compiled_get_info", [&] { compiled_of(c)->fill_info(out); });
}

kiln_status_t* compiled_execute(kiln_compiled_t* c, kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs,
                                size_t n) noexcept {
  if (!c) return Entry::null_argument("compiled_execute: NULL compiled");
  return Glue::guard(Entry::of(c)->plugin->host, "compiled_execute",
                     [&] { compiled_of(c)->enqueue(ctx, inputs, n, nullptr, 0); });
}

kiln_status_t* compiled_execute_async(kiln_compiled_t* c, kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs,
                                      size_t n, kiln_fence_t* fence, uint64_t value) noexcept {
  if (!c || !fence) return Entry::null_argument("compiled_execute_async: NULL compiled or fence");
  return Glue::guard(Entry::of(c)->plugin->host, "compiled_execute_async",
                     [&] { compiled_of(c)->enqueue(ctx, inputs, n, fence, value); });
}

kiln_status_t* instance_alloc(kiln_instance_t* i, int32_t kind, uint32_t device, size_t size, size_t alignment,
                              void** out) noexcept {
  if (!i || !out) return Entry::null_argument("instance_alloc: NULL instance or out_ptr");
  return Glue::guard(Entry::of(i)->plugin->host, "instance_alloc",
                     [&] { *out = instance_of(i)->alloc(kind, device, size, alignment); });
}

void instance_free(kiln_instance_t* i, int32_t kind, void* ptr) noexcept {
  if (!i || !ptr) return;
  kiln_status_t* st = Glue::guard(Entry::of(i)->plugin->host, "instance_free", [&] { instance_of(i)->free(kind, ptr); });
  if (st) Entry::of(i)->plugin->host.api().status_release(st);
}

kiln_status_t* instance_copy(kiln_instance_t* i, const kiln_copy_t* copies, size_t n, kiln_fence_t* fence,
                             uint64_t value) noexcept {
  if (!i) return Entry::null_argument("instance_copy: NULL instance");
  return Glue::guard(Entry::of(i)->plugin->host, "instance_copy",
                     [&] { instance_of(i)->copy_batch(copies, n, fence, value); });
}

kiln_status_t* instance_stream_wait(kiln_instance_t* i, kiln_fence_t* fence, uint64_t value) noexcept {
  if (!i) return Entry::null_argument("instance_stream_wait: NULL instance");
  return Glue::guard(Entry::of(i)->plugin->host, "instance_stream_wait",
                     [&] { instance_of(i)->stream_wait(fence, value); });
}

kiln_backend_api_t make_table(const kiln_backend_api_t& sdk) {
  kiln_backend_api_t t = sdk;
  t.plugin_get_info = &plugin_get_info;
  t.compiled_get_info = &compiled_get_info;
  t.compiled_execute = &compiled_execute;
  t.instance_alloc = &instance_alloc;
  t.instance_free = &instance_free;
  t.instance_copy = &instance_copy;
  t.instance_stream_wait = &instance_stream_wait;
  t.compiled_execute_async = &compiled_execute_async;
  return t;
}

}  // namespace
}  // namespace simdev

extern "C" KILN_BACKEND_EXPORT kiln_status_t* kiln_backend_entry(const kiln_backend_entry_args_t* args,
                                                                 const kiln_backend_api_t** out_api,
                                                                 kiln_plugin_t** out_plugin) {
  const kiln_backend_api_t* sdk = nullptr;
  if (out_api) *out_api = nullptr;
  kiln_status_t* st = simdev::Entry::entry(args, out_api ? &sdk : nullptr, out_plugin);
  if (st || !sdk) return st;
  // Every plugin object shares one table (its entries do not depend on the object).
  static const kiln_backend_api_t table = simdev::make_table(*sdk);
  *out_api = &table;
  return nullptr;
}
