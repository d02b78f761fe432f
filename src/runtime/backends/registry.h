// The inside of kiln::BackendRegistry (include/kiln/backends.h): the loaded
// plugins of one runtime instance, and the load errors.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backends.h"
#include "runtime/backends/plugin.h"

namespace kiln {

struct BackendRegistry::Impl {
  mutable std::mutex mu;
  std::vector<std::shared_ptr<runtime::LoadedPlugin>> plugins;
  std::vector<BackendLoadError> errors;
  std::vector<std::string> dirs;        // searched folders, in order
  std::vector<std::string> seen_paths;  // canonical paths already tried
  runtime::PluginLoadOptions load_options;
  // Instances of KILN_PLUGIN_SHARED_INSTANCES plugins, one per (plugin,
  // device, options), shared by this registry's sessions. Weak: an instance
  // is released when the last session (compiled partition) holding it goes,
  // which may be after the registry itself is gone.
  std::mutex instances_mu;  // held across instance_create, so two loads make one instance
  std::map<std::string, std::weak_ptr<runtime::BackendInstance>> shared_instances;

  /// Loads one file; records the error (or a duplicate name) and returns it.
  Status load_file(const std::string& path);
  /// Adds a plugin linked into the process (tests, built-ins).
  Status add_entry(kiln_backend_entry_fn entry, const std::string& origin);
  /// Adds an already loaded plugin (duplicate names are refused).
  Status add(std::shared_ptr<runtime::LoadedPlugin> plugin);
  /// The plugin named `name`, or null.
  std::shared_ptr<runtime::LoadedPlugin> find(std::string_view name) const;
  /// An instance of `plugin` on `device` with `options` (checked against
  /// the schema): the one this registry's sessions share when the plugin
  /// sets KILN_PLUGIN_SHARED_INSTANCES (made on first use), a new one
  /// otherwise (the 1.0 behaviour: one per session).
  Result<std::shared_ptr<runtime::BackendInstance>> instance_for(
      const std::shared_ptr<runtime::LoadedPlugin>& plugin, size_t device,
      const std::vector<std::pair<std::string, std::string>>& options);
  /// A snapshot of the loaded plugins.
  std::vector<std::shared_ptr<runtime::LoadedPlugin>> all() const;
  /// "template (/path/libkiln_template.so), xnnpack (...)" or "none".
  std::string known_names() const;
};

namespace runtime {

/// The runtime's access to a registry's inside (not part of the public API).
struct RegistryAccess {
  static BackendRegistry::Impl& impl(const BackendRegistry& r) { return *r.impl_; }
};
inline BackendRegistry::Impl& registry_impl(const BackendRegistry& r) { return RegistryAccess::impl(r); }

/// The default plugin folders: next to the executable (../lib/kiln/backends),
/// the install prefix's, and the build tree's (development builds).
std::vector<std::string> default_backend_dirs();

/// Why plugins must not be loaded from `path` (a plugin file or a folder of
/// them), or "" when they may: a folder or file writable by every user, or
/// a file in such a folder without the sticky bit (docs/security.md).
std::string unsafe_plugin_location(const std::string& path);
}  // namespace runtime

}  // namespace kiln
