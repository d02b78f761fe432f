// Backends: plugins (shared libraries built against kiln/c/backend.h) that
// run parts of a model. A BackendRegistry finds and loads them; a Session
// partitions its model over the ones the user selects (SessionOptions) and
// reports where every node went (Session::placement()).
//
//   auto registry = kiln::BackendRegistry::create({.paths = {"/opt/vendor/kiln"}});
//   for (const kiln::BackendInfo& b : registry->backends()) ...
//   kiln::SessionOptions o;
//   o.backend_registry = registry;
//   o.backends = {"template", "portable"};
//   o.fallback = kiln::FallbackPolicy::kRequire;
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/result.h"

namespace kiln {

/// What happens to nodes no selected plugin claims.
enum class FallbackPolicy : uint8_t {
  kAllow,    ///< they run on portable kernels; the placement report lists them
  kRequire,  ///< loading fails, naming every such node and why each backend declined it
};
/// "allow" / "require".
const char* fallback_policy_name(FallbackPolicy p);
/// Parses "allow" or "require".
Result<FallbackPolicy> parse_fallback_policy(std::string_view text);

/// One backend option: `backend.key=value` on the command line.
struct BackendOption {
  std::string backend;
  std::string key;
  std::string value;
};
/// Parses "NAME.KEY=VALUE" (the key may hold dots; the value anything).
Result<BackendOption> parse_backend_option(std::string_view text);
/// Splits a `--backends` list ("template,portable") into names in order; an
/// empty name (",", "a,,b", "") is an error that quotes the list.
Result<std::vector<std::string>> parse_backend_list(std::string_view text);

struct BackendOptionInfo {
  std::string name;
  std::string type;  ///< "bool", "int", "float", "string"
  std::string default_value;
  std::string doc;
};

struct BackendDeviceInfo {
  std::string name;
  std::string kind;  ///< "cpu", "gpu", "npu", "other"
  std::string description;
  // What the plugin knows about the device (ABI 1.1); 0 / "" where it does not say.
  uint32_t vendor_id = 0;       ///< PCI vendor id
  uint32_t device_id = 0;       ///< PCI device id or the vendor's model number
  std::string uuid{};           ///< 32 lower-case hex digits; "" when unknown
  uint64_t memory_bytes = 0;    ///< the device's own memory
  std::string driver_version{};
};

struct BackendCustomOpInfo {
  std::string domain;
  std::string op_type;
  int since_version = 1;
  std::string doc;
};

/// A plugin that loaded: what it says about itself.
struct BackendInfo {
  std::string name;
  std::string version;
  std::string vendor;
  std::string vendor_sdk_version;  ///< "" when it uses none
  std::string description;
  std::string path;         ///< the library file ("(built-in)" for linked-in entries)
  std::string abi_version;  ///< the plugin's "major.minor"
  int priority = 0;         ///< default order, higher first; 0 = only when named
  bool available = false;
  std::string unavailable_reason;
  bool supports_export = false;
  bool no_unload = false;   ///< the plugin keeps threads: its library is never unloaded (KILN_PLUGIN_NO_UNLOAD)
  /// Sessions of one registry share its instances, one per device and
  /// options (KILN_PLUGIN_SHARED_INSTANCES, ABI 1.1).
  bool shared_instances = false;
  std::vector<BackendDeviceInfo> devices;
  std::vector<BackendOptionInfo> options;
  std::vector<BackendCustomOpInfo> custom_ops;
};

/// A plugin that did not load, and why (one line).
struct BackendLoadError {
  std::string path;
  std::string message;
};

/// Where to look for plugins. Order: `paths` (files or folders), then
/// KILN_BACKEND_PATH (colon-separated), then the install's lib/kiln/backends
/// (relative to the running executable, then the configured prefix) and the
/// build tree's, for development. A folder contributes every *.so in it.
struct BackendDiscovery {
  std::vector<std::string> paths;
  bool use_environment = true;
  bool use_default_dirs = true;
};

namespace runtime {
struct RegistryAccess;  // the runtime's way in (runtime/backends/registry.h)
}  // namespace runtime

/// The plugins one runtime instance knows. No global registry exists: each
/// is created explicitly. Loading never stops at a broken plugin: each
/// failure becomes one BackendLoadError and the others still load. Thread-
/// safe; a plugin's library stays loaded while any object it created lives,
/// even after the registry is gone.
class BackendRegistry {
 public:
  /// Discovers and loads plugins. Never fails; see errors().
  static std::shared_ptr<BackendRegistry> create(const BackendDiscovery& discovery = {});
  ~BackendRegistry();
  BackendRegistry(const BackendRegistry&) = delete;
  BackendRegistry& operator=(const BackendRegistry&) = delete;

  /// Loads one more plugin file. The error is also recorded in errors().
  Status load(const std::string& path);

  /// Loaded plugins, in load order.
  std::vector<BackendInfo> backends() const;
  /// The loaded plugin named `name`, or an error listing the known ones.
  Result<BackendInfo> find(std::string_view name) const;
  /// Plugins that failed to load (and duplicates that were ignored).
  std::vector<BackendLoadError> errors() const;
  /// Folders searched, in order.
  std::vector<std::string> search_dirs() const;

  /// The inside, for the runtime only (runtime/backends/registry.h).
  struct Impl;

 private:
  friend struct runtime::RegistryAccess;
  BackendRegistry();
  std::unique_ptr<Impl> impl_;
};

/// One partition: a group of nodes a plugin runs as one compiled unit.
struct PartitionInfo {
  std::string id;       ///< stable: "<backend>:<hash of the group's ops and names>"
  std::string backend;
  std::vector<std::string> nodes;                        ///< node labels, topological order
  std::vector<std::pair<std::string, int>> op_histogram; ///< op type -> count, by count
  std::vector<std::string> inputs;   ///< boundary inputs (values read from outside)
  std::vector<std::string> outputs;  ///< boundary outputs (values read outside)
  int64_t boundary_bytes = -1;       ///< bytes crossing the boundary per run; -1 when shapes are dynamic
  bool serial = true;                ///< the plugin declared its handle non-reentrant
  bool custom_op = false;            ///< a custom op of the plugin's domain
};

/// Where one node of the main graph went.
struct NodePlacement {
  std::string node;       ///< label: "Conv 'conv1'"
  std::string op_type;
  std::string placement;  ///< backend name, "portable" or "folded"
  std::string partition;  ///< partition id when a plugin runs it
  /// For nodes on portable: each backend that declined it and why.
  std::vector<std::pair<std::string, std::string>> reasons;
};

/// How a session's model was partitioned.
struct PlacementReport {
  std::vector<std::string> backends;  ///< the order tried (ends with "portable")
  FallbackPolicy fallback = FallbackPolicy::kAllow;
  std::vector<PartitionInfo> partitions;
  std::vector<NodePlacement> nodes;   ///< every node of the main graph, in order
  std::vector<std::string> notes;     ///< skipped backends, split groups, plugin diagnostics
  /// Answers of a plugin the host ignored (a node index out of range, a node
  /// claimed twice): also in `notes`; `kiln run` prints these as warnings.
  std::vector<std::string> warnings;
  /// Load-time graph rewrites that applied, with how often ("conv+batchnorm", 20).
  std::vector<std::pair<std::string, int>> rewrites;
  /// Constants whose host copy was dropped because every node reading them
  /// runs in partitions whose plugins own copies of their own (ABI 1.1
  /// owned_constants), and their bytes. Also in `notes`.
  size_t num_dropped_constants = 0;
  uint64_t dropped_constant_bytes = 0;
  /// Nodes that run on portable kernels because no plugin claimed them.
  size_t num_fallback() const {
    size_t n = 0;
    for (const NodePlacement& p : nodes) n += p.placement == "portable";
    return n;
  }
};

}  // namespace kiln
