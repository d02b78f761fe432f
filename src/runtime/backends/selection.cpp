#include "runtime/backends/selection.h"

#include <algorithm>

#include "runtime/backends/registry.h"

namespace kiln::runtime {
namespace {

std::string load_errors(const BackendRegistry& registry) {
  std::string s;
  for (const BackendLoadError& e : registry.errors()) s += "\n  " + e.path + ": " + e.message;
  return s.empty() ? s : "; plugins that did not load:" + s;
}

Result<size_t> device_index(const LoadedPlugin& p, const std::string& value) {
  const auto& devices = p.info().devices;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i].name == value || std::to_string(i) == value) return i;
  std::string known;
  for (size_t i = 0; i < devices.size(); ++i) known += (i ? ", " : "") + std::to_string(i) + " (" + devices[i].name + ")";
  return invalid_argument("backend '", p.name(), "' has no device '", value, "'; its devices: ", known);
}

}  // namespace

Result<PartitionRequest> select_backends(const BackendRegistry& registry, const std::vector<std::string>& names,
                                         const std::vector<BackendOption>& options, FallbackPolicy fallback) {
  PartitionRequest req;
  req.fallback = fallback;
  const BackendRegistry::Impl& reg = registry_impl(registry);
  std::vector<std::shared_ptr<LoadedPlugin>> chosen;
  std::vector<std::string> order;  // names incl. "portable"
  if (names.empty()) {
    std::vector<std::shared_ptr<LoadedPlugin>> all = reg.all();
    std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a->priority() > b->priority(); });
    for (const auto& p : all) {
      if (p->priority() <= 0) continue;
      if (!p->available()) {
        req.notes.push_back("backend '" + p->name() + "' skipped: not available: " + p->info().unavailable_reason);
        continue;
      }
      order.push_back(p->name());
      chosen.push_back(p);
    }
  } else {
    for (const std::string& name : names) {
      if (std::find(order.begin(), order.end(), name) != order.end())
        return invalid_argument("backend '", name, "' is listed twice");
      if (name == "portable") {
        order.push_back(name);
        chosen.push_back(nullptr);
        continue;
      }
      std::shared_ptr<LoadedPlugin> p = reg.find(name);
      if (!p) {
        return not_found("unknown backend '", name, "'; loaded: ", reg.known_names(), load_errors(registry));
      }
      if (!p->available()) {
        if (fallback == FallbackPolicy::kRequire) {
          return make_status(StatusCode::kUnavailable, "backend '", name, "' is not available: ",
                             p->info().unavailable_reason);
        }
        req.notes.push_back("backend '" + name + "' skipped: not available: " + p->info().unavailable_reason);
        order.push_back(name);
        chosen.push_back(p);
        continue;
      }
      order.push_back(name);
      chosen.push_back(p);
    }
  }
  // Options per backend, checked before any instance exists.
  for (const BackendOption& o : options) {
    auto it = std::find(order.begin(), order.end(), o.backend);
    if (o.backend == "portable") return invalid_argument("backend 'portable' takes no options (got '", o.key, "')");
    if (it == order.end()) {
      if (!reg.find(o.backend)) {
        return not_found("option ", o.backend, ".", o.key, ": unknown backend '", o.backend, "'; loaded: ",
                         reg.known_names());
      }
      return invalid_argument("option ", o.backend, ".", o.key, ": backend '", o.backend,
                              "' is not selected (add it to the backend list)");
    }
  }
  for (size_t i = 0; i < order.size(); ++i) {
    if (!chosen[i]) {
      req.backends.push_back({"portable", nullptr});
      continue;
    }
    const std::shared_ptr<LoadedPlugin>& plugin = chosen[i];
    LoadedPlugin& p = *plugin;
    size_t device = 0;
    std::vector<std::pair<std::string, std::string>> kv;
    for (const BackendOption& o : options) {
      if (o.backend != p.name()) continue;
      if (o.key == "device") {
        KILN_ASSIGN_OR_RETURN(device, device_index(p, o.value));
      } else {
        kv.emplace_back(o.key, o.value);
      }
    }
    KILN_RETURN_IF_ERROR(check_options(p.info(), kv));
    if (!p.available()) continue;  // skipped (noted above); options were still checked
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<BackendInstance> inst,
                          registry_impl(registry).instance_for(plugin, device, kv));
    req.backends.push_back({p.name(), std::move(inst)});
  }
  for (const auto& p : reg.all()) {
    bool selected = false;
    for (const SelectedBackend& b : req.backends) selected |= b.name == p->name();
    if (selected) continue;
    for (const BackendCustomOpInfo& op : p->info().custom_ops) req.unselected_custom_ops.emplace_back(op, p->name());
  }
  return req;
}

}  // namespace kiln::runtime
