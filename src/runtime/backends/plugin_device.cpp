// The 1.1 device half of the plugin wrappers (plugin.h): reading and checking
// what a compiled handle declares about memory kinds, async execution,
// workspace and in-place pairs, and the instance's memory entries
// (instance_alloc / free / copy / stream_wait) and compiled_execute_async.
#include <cstring>

#include "runtime/backends/plugin.h"

namespace kiln::runtime {
namespace {

bool kind_known(int32_t kind) { return kind >= 0 && kind < KILN_MEMORY_KIND_COUNT; }

// Copies `n` kinds from `kinds` (NULL: all host), checking each.
Status read_kinds(const int32_t* kinds, size_t n, const char* what, const std::string& label,
                  std::vector<int32_t>* out) {
  if (!kinds) return Status::ok();
  out->assign(kinds, kinds + n);
  for (size_t i = 0; i < n; ++i) {
    if (!kind_known(kinds[i])) {
      return invalid_argument(label, ": compiled_get_info: ", what, "[", i, "] is ", kinds[i],
                              ", not a kiln_memory_kind_t (0..", KILN_MEMORY_KIND_COUNT - 1, ")");
    }
  }
  return Status::ok();
}

bool any_not_host(const std::vector<int32_t>& kinds) {
  for (int32_t k : kinds)
    if (k != KILN_MEMORY_HOST) return true;
  return false;
}

}  // namespace

bool CompiledDeviceInfo::uses_device_memory() const { return any_not_host(input_kinds) || any_not_host(output_kinds); }

bool CompiledDeviceInfo::has_workspace() const {
  for (uint64_t b : workspace_bytes)
    if (b) return true;
  return false;
}

Result<CompiledDeviceInfo> read_compiled_device_info(const kiln_compiled_info_t& info, const kiln_backend_api_t& api,
                                                     const std::string& label) {
  CompiledDeviceInfo out;
  const size_t size = info.struct_size;  // the plugin may have said it wrote less
  // Members past the size the plugin declares read as zero: the 1.0 behaviour.
  if (KILN_ABI_HAS(kiln_compiled_info_t, flags, size)) out.flags = info.flags;
  if (KILN_ABI_HAS(kiln_compiled_info_t, input_memory_kinds, size))
    KILN_RETURN_IF_ERROR(read_kinds(info.input_memory_kinds, info.num_inputs, "input_memory_kinds", label,
                                    &out.input_kinds));
  if (KILN_ABI_HAS(kiln_compiled_info_t, output_memory_kinds, size))
    KILN_RETURN_IF_ERROR(read_kinds(info.output_memory_kinds, info.num_outputs, "output_memory_kinds", label,
                                    &out.output_kinds));
  if (KILN_ABI_HAS(kiln_compiled_info_t, workspace_bytes, size))
    for (size_t k = 0; k < KILN_MEMORY_KIND_COUNT; ++k) out.workspace_bytes[k] = info.workspace_bytes[k];
  if (KILN_ABI_HAS(kiln_compiled_info_t, inplace_pairs, size) && info.num_inplace > 0) {
    if (!info.inplace_pairs) {
      return invalid_argument(label, ": compiled_get_info: num_inplace is ", info.num_inplace,
                              " but inplace_pairs is NULL");
    }
    for (size_t i = 0; i < info.num_inplace; ++i) {
      const size_t in = info.inplace_pairs[2 * i], o = info.inplace_pairs[2 * i + 1];
      if (in >= info.num_inputs || o >= info.num_outputs) {
        return make_status(StatusCode::kOutOfRange, label, ": compiled_get_info: in-place pair ", i, " (input ", in,
                           ", output ", o, ") is out of range (", info.num_inputs, " inputs, ", info.num_outputs,
                           " outputs)");
      }
      if (out.input_kind(in) != out.output_kind(o)) {
        return invalid_argument(label, ": compiled_get_info: in-place pair ", i, " joins input ", in, " (memory kind ",
                                out.input_kind(in), ") and output ", o, " (memory kind ", out.output_kind(o),
                                "); they must be of one kind");
      }
      out.inplace.emplace_back(in, o);
    }
  }
  if (KILN_ABI_HAS(kiln_compiled_info_t, owned_constants, size) && info.num_owned_constants > 0) {
    if (!info.owned_constants) {
      return invalid_argument(label, ": compiled_get_info: num_owned_constants is ", info.num_owned_constants,
                              " but owned_constants is NULL");
    }
    for (size_t i = 0; i < info.num_owned_constants; ++i) {
      if (!info.owned_constants[i]) return invalid_argument(label, ": compiled_get_info: owned_constants[", i, "] is NULL");
      out.owned_constants.emplace_back(info.owned_constants[i]);
    }
  }
  // What the declarations need from the plugin's table.
  bool needs_memory = out.uses_device_memory();
  for (size_t k = KILN_MEMORY_HOST_PINNED; k < KILN_MEMORY_KIND_COUNT; ++k) needs_memory |= out.workspace_bytes[k] != 0;
  const bool has_memory = KILN_ABI_HAS(kiln_backend_api_t, instance_copy, api.header.struct_size) &&
                          api.instance_alloc && api.instance_free && api.instance_copy;
  if (needs_memory && !has_memory) {
    return invalid_argument(label, ": compiled_get_info declares non-host memory but the plugin has no "
                                   "instance_alloc, instance_free and instance_copy");
  }
  if (out.async() && (!KILN_ABI_HAS(kiln_backend_api_t, compiled_execute_async, api.header.struct_size) ||
                      !api.compiled_execute_async)) {
    return invalid_argument(label, ": compiled_get_info declares KILN_COMPILED_ASYNC but the plugin has no "
                                   "compiled_execute_async");
  }
  return out;
}

// --- BackendInstance: memory ---------------------------------------------------

bool BackendInstance::has_memory() const {
  const kiln_backend_api_t& a = plugin_->api();
  return a.instance_alloc && a.instance_free && a.instance_copy;
}

Result<void*> BackendInstance::alloc(int32_t kind, uint32_t device_index, size_t bytes, size_t alignment) {
  const kiln_backend_api_t& a = plugin_->api();
  if (!a.instance_alloc) return unimplemented(plugin_->label(), " cannot allocate device memory (no instance_alloc)");
  if (!kind_known(kind) || kind == KILN_MEMORY_HOST)
    return invalid_argument(plugin_->label(), ": instance_alloc of memory kind ", kind, " (not a device kind)");
  void* p = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  KILN_RETURN_IF_ERROR(take_status(a.instance_alloc(instance_, kind, device_index, bytes, alignment, &p),
                                   plugin_->label() + ": instance_alloc of " + std::to_string(bytes) + " bytes"));
  if (!p && bytes > 0) return internal_error(plugin_->label(), ": instance_alloc returned OK and no memory");
  return p;
}

void BackendInstance::free(int32_t kind, void* ptr) {
  const kiln_backend_api_t& a = plugin_->api();
  if (!ptr || !a.instance_free) return;
  std::lock_guard<std::mutex> lock(mu_);
  a.instance_free(instance_, kind, ptr);
}

Status BackendInstance::copy(const kiln_copy_t* copies, size_t n, kiln_fence_t* fence, uint64_t value) {
  const kiln_backend_api_t& a = plugin_->api();
  if (!a.instance_copy) return unimplemented(plugin_->label(), " cannot copy device memory (no instance_copy)");
  std::lock_guard<std::mutex> lock(mu_);
  return take_status(a.instance_copy(instance_, copies, n, fence, value), plugin_->label() + ": instance_copy");
}

bool BackendInstance::has_stream_wait() const { return plugin_->api().instance_stream_wait != nullptr; }

Status BackendInstance::stream_wait(kiln_fence_t* fence, uint64_t value) {
  const kiln_backend_api_t& a = plugin_->api();
  if (!a.instance_stream_wait) return unimplemented(plugin_->label(), " has no instance_stream_wait");
  std::lock_guard<std::mutex> lock(mu_);
  return take_status(a.instance_stream_wait(instance_, fence, value), plugin_->label() + ": instance_stream_wait");
}

// --- CompiledPartition: async ----------------------------------------------------

Status CompiledPartition::execute_async(kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs,
                                        size_t num_inputs, kiln_fence_t* fence, uint64_t value) const {
  const kiln_backend_api_t& a = instance_->plugin().api();
  if (!device_.async() || !a.compiled_execute_async)
    return internal_error(instance_->plugin().label(), ": execute_async on a handle that is not KILN_COMPILED_ASYNC");
  kiln_status_t* st;
  if (concurrency_ == KILN_CONCURRENCY_REENTRANT) {
    st = a.compiled_execute_async(compiled_, ctx, inputs, num_inputs, fence, value);
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    st = a.compiled_execute_async(compiled_, ctx, inputs, num_inputs, fence, value);
  }
  return take_status(st, instance_->plugin().label());
}

}  // namespace kiln::runtime
