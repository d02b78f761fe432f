// A loaded backend plugin and the objects it creates, as the host sees them.
//
// Lifetimes: a CompiledPartition holds its BackendInstance, which holds its
// LoadedPlugin, which holds the dlopen handle. shared_ptr is used because
// several sessions (and their concurrent runs) share one plugin, and the
// library must stay mapped exactly as long as any object it created lives:
// release order is always compiled -> instance -> plugin -> dlclose.
//
// Every call into the plugin is checked: statuses are converted (and prefixed
// with the plugin's name), returned arrays are validated and freed with the
// host allocator, NULL optional entries get their documented defaults.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backends.h"
#include "kiln/c/backend.h"
#include "kiln/result.h"
#include "runtime/backends/host.h"

namespace kiln::runtime {

class BackendInstance;

/// Options for loading one plugin.
struct PluginLoadOptions {
  LogSink log_sink;                       // null: stderr
  kiln_log_level_t log_level = default_log_level();
};

class LoadedPlugin : public std::enable_shared_from_this<LoadedPlugin> {
 public:
  /// dlopens `path` (RTLD_NOW | RTLD_LOCAL), calls its entry and checks the
  /// answer. Each failure is one line: file missing, not a shared library,
  /// a dependency missing, no entry symbol, ABI mismatch, init error.
  static Result<std::shared_ptr<LoadedPlugin>> load(const std::string& path, const PluginLoadOptions& options = {});
  /// The same for an entry linked into the process (`origin` names it).
  static Result<std::shared_ptr<LoadedPlugin>> from_entry(kiln_backend_entry_fn entry, const std::string& origin,
                                                          const PluginLoadOptions& options = {});
  ~LoadedPlugin();
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  const std::string& name() const { return info_.name; }
  const std::string& path() const { return info_.path; }
  /// Everything the plugin said about itself at load (availability included).
  const BackendInfo& info() const { return info_; }
  int priority() const { return info_.priority; }
  bool available() const { return info_.available; }
  /// is_available never answered: the plugin is kept loaded and never called again.
  bool hung() const { return hung_; }
  const kiln_backend_api_t& api() const { return api_; }
  kiln_plugin_t* handle() const { return plugin_; }
  kiln_host* host() { return host_.get(); }
  HostStats stats() const { return host_->stats(); }
  /// The plugin's table size and version as it declared them.
  uint32_t declared_table_size() const { return declared_size_; }

  /// Asks is_available again (the answer may change, e.g. a driver loaded).
  Status check_available() const;

  /// Creates an instance on `device_index` with string options (checked
  /// against the schema first: unknown keys and bad values name the problem).
  Result<std::shared_ptr<BackendInstance>> create_instance(
      size_t device_index, const std::vector<std::pair<std::string, std::string>>& options);

  /// plugin_check_compiled (kUnimplemented when the plugin has no export).
  Status check_compiled(const void* bytes, size_t size) const;

  /// "backend 'name'" for messages.
  std::string label() const { return "backend '" + info_.name + "'"; }

 private:
  LoadedPlugin() = default;
  // Calls the entry, then checks its answer and reads the plugin's info
  // with the contract's validators (plugin_contract.h).
  static Result<std::shared_ptr<LoadedPlugin>> init(std::shared_ptr<LoadedPlugin> p, kiln_backend_entry_fn entry);

  void* dl_ = nullptr;
  std::unique_ptr<kiln_host> host_;
  kiln_backend_api_t api_{};
  uint32_t declared_size_ = 0;
  kiln_plugin_t* plugin_ = nullptr;
  bool hung_ = false;  // is_available never answered: never called, released or unloaded again
  BackendInfo info_;
  // Plugin-level calls are never concurrent on one plugin object (the ABI's
  // rule), even when sessions on several threads share a registry.
  mutable std::mutex mu_;
};

/// The answer of get_capability, checked and copied out of host memory.
struct Capability {
  std::vector<std::vector<size_t>> groups;
  std::vector<std::pair<size_t, std::string>> declined;
  std::vector<std::string> problems;  // invalid entries the host dropped
};

class CompiledPartition;

class BackendInstance : public std::enable_shared_from_this<BackendInstance> {
 public:
  BackendInstance(std::shared_ptr<LoadedPlugin> plugin, kiln_instance_t* instance, size_t device)
      : plugin_(std::move(plugin)), instance_(instance), device_(device) {}
  ~BackendInstance();
  BackendInstance(const BackendInstance&) = delete;
  BackendInstance& operator=(const BackendInstance&) = delete;

  LoadedPlugin& plugin() const { return *plugin_; }
  const std::string& name() const { return plugin_->name(); }
  kiln_instance_t* handle() const { return instance_; }
  size_t device() const { return device_; }

  Status set_property(const std::string& key, const std::string& value);
  Result<std::string> get_property(const std::string& key);

  /// get_capability over `view`; node indices are checked against the view.
  Result<Capability> get_capability(const kiln_graph_t* view);
  /// compile; the handle keeps this instance (and the library) alive.
  Result<std::shared_ptr<CompiledPartition>> compile(const kiln_graph_t* view, const kiln_partition_t& partition);
  /// import of exported bytes (checked with plugin_check_compiled first).
  Result<std::shared_ptr<CompiledPartition>> import_compiled(const void* bytes, size_t size);

  // --- device memory (\since 1.1) ---------------------------------------
  /// True when the plugin offers instance_alloc, instance_free and instance_copy.
  bool has_memory() const;
  /// instance_alloc of `bytes` of `kind` (not host) on device `device_index`.
  Result<void*> alloc(int32_t kind, uint32_t device_index, size_t bytes, size_t alignment = 64);
  /// instance_free (NULL is fine).
  void free(int32_t kind, void* ptr);
  /// instance_copy; with a fence the plugin signals `value` when the copies are done.
  Status copy(const kiln_copy_t* copies, size_t n, kiln_fence_t* fence = nullptr, uint64_t value = 0);
  /// True when the plugin offers instance_stream_wait.
  bool has_stream_wait() const;
  /// instance_stream_wait (kUnimplemented without it: the caller waits on the host).
  Status stream_wait(kiln_fence_t* fence, uint64_t value);

 private:
  friend class CompiledPartition;  // compiled_release takes mu_ too
  Result<std::shared_ptr<CompiledPartition>> wrap(kiln_compiled_t* c, const std::string& what);
  std::shared_ptr<LoadedPlugin> plugin_;
  kiln_instance_t* instance_;
  size_t device_;
  // Instance-level calls, and compiled_release of its handles (which may
  // touch instance state), are never concurrent.
  std::mutex mu_;
};

/// What a handle declared beyond 1.0 in kiln_compiled_info_t, checked and
/// copied (all empty / zero for a 1.0 plugin: host memory, synchronous).
struct CompiledDeviceInfo {
  uint32_t flags = 0;                 ///< kiln_compiled_flag_t bits
  std::vector<int32_t> input_kinds;   ///< per input; empty: all host
  std::vector<int32_t> output_kinds;  ///< per output; empty: all host
  std::array<uint64_t, KILN_MEMORY_KIND_COUNT> workspace_bytes{};
  std::vector<std::pair<size_t, size_t>> inplace;  ///< (input, output) pairs
  std::vector<std::string> owned_constants;

  bool async() const { return (flags & KILN_COMPILED_ASYNC) != 0; }
  int32_t input_kind(size_t i) const { return i < input_kinds.size() ? input_kinds[i] : KILN_MEMORY_HOST; }
  int32_t output_kind(size_t i) const { return i < output_kinds.size() ? output_kinds[i] : KILN_MEMORY_HOST; }
  /// True when some input or output is not ordinary host memory.
  bool uses_device_memory() const;
  /// True when the handle asks for any scratch.
  bool has_workspace() const;
};

/// Reads and checks the 1.1 members of `info` (only those within its
/// struct_size): kinds in range, in-place indices in range and of one kind,
/// arrays non-NULL where counts say so, device kinds only from a plugin with
/// instance_alloc/free/copy, KILN_COMPILED_ASYNC only with
/// compiled_execute_async. Errors are one line naming `plugin_label`.
Result<CompiledDeviceInfo> read_compiled_device_info(const kiln_compiled_info_t& info, const kiln_backend_api_t& api,
                                                     const std::string& plugin_label);

class CompiledPartition {
 public:
  CompiledPartition(std::shared_ptr<BackendInstance> instance, kiln_compiled_t* compiled,
                    kiln_concurrency_t concurrency, int64_t num_inputs, int64_t num_outputs,
                    CompiledDeviceInfo device = {})
      : instance_(std::move(instance)), compiled_(compiled), concurrency_(concurrency),
        num_inputs_(num_inputs), num_outputs_(num_outputs), device_(std::move(device)) {}
  ~CompiledPartition();
  CompiledPartition(const CompiledPartition&) = delete;
  CompiledPartition& operator=(const CompiledPartition&) = delete;

  BackendInstance& instance() const { return *instance_; }
  kiln_compiled_t* handle() const { return compiled_; }
  kiln_concurrency_t concurrency() const { return concurrency_; }
  /// Declared by the plugin; -1 when it has no compiled_get_info.
  int64_t num_inputs() const { return num_inputs_; }
  int64_t num_outputs() const { return num_outputs_; }

  /// The 1.1 declarations: memory kinds, async, workspace, in-place pairs.
  const CompiledDeviceInfo& device() const { return device_; }
  /// The constants (graph value names) the handle declared it owns
  /// (kiln_compiled_info_t.owned_constants, ABI 1.1), copied at creation.
  const std::vector<std::string>& owned_constants() const { return owned_constants_; }

  /// compiled_execute, serialized when the handle is not reentrant.
  Status execute(kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs, size_t num_inputs) const;
  /// compiled_execute_async (only for handles that declared KILN_COMPILED_ASYNC):
  /// on OK the plugin signals `fence` to `value` when done; on error nothing
  /// was queued.
  Status execute_async(kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs, size_t num_inputs,
                       kiln_fence_t* fence, uint64_t value) const;
  /// compiled_export (kUnimplemented when the plugin has none).
  Result<std::vector<uint8_t>> export_bytes() const;

 private:
  std::shared_ptr<BackendInstance> instance_;
  kiln_compiled_t* compiled_;
  kiln_concurrency_t concurrency_;
  int64_t num_inputs_;
  int64_t num_outputs_;
  CompiledDeviceInfo device_;
  std::vector<std::string> owned_constants_;  // set by BackendInstance::wrap
  mutable std::mutex mu_;
  friend class BackendInstance;
};

/// Checks string options against a plugin's schema: unknown keys (listing
/// the known ones) and values that do not parse as their type.
Status check_options(const BackendInfo& info, const std::vector<std::pair<std::string, std::string>>& options);

}  // namespace kiln::runtime
