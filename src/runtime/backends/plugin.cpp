#include "runtime/backends/plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "runtime/backends/graph_view.h"
#include "runtime/backends/plugin_contract.h"

namespace kiln::runtime {
namespace {

// Frees host-allocated arrays a plugin stored in a kiln_capability_t.
struct CapabilityArrays {
  kiln_host* host;
  kiln_capability_t* cap;
  ~CapabilityArrays() {
    if (cap->declined_reasons) {
      size_t n = std::min(cap->num_declined, host_block_size(host, cap->declined_reasons) / sizeof(char*));
      for (size_t i = 0; i < n; ++i) host_free(host, cap->declined_reasons[i]);
    }
    host_free(host, cap->declined_reasons);
    host_free(host, cap->declined_nodes);
    host_free(host, cap->group_nodes);
    host_free(host, cap->group_sizes);
  }
};

// The names in kiln_compiled_info_t.owned_constants (within the struct's
// size). A malformed list (NULL array, NULL or unterminated names, an absurd
// count) owns nothing: the host then keeps every constant, which is safe.
std::vector<std::string> owned_constant_names(const kiln_compiled_info_t& ci) {
  std::vector<std::string> names;
  if (!KILN_ABI_HAS(kiln_compiled_info_t, owned_constants, ci.struct_size)) return names;
  if (ci.num_owned_constants == 0 || !ci.owned_constants || ci.num_owned_constants > (size_t{1} << 20)) return names;
  for (size_t i = 0; i < ci.num_owned_constants; ++i) {
    const char* n = ci.owned_constants[i];
    const size_t len = n ? strnlen(n, 4096) : 4096;
    if (len == 4096) return {};
    names.emplace_back(n, len);
  }
  return names;
}

}  // namespace

Status check_options(const BackendInfo& info, const std::vector<std::pair<std::string, std::string>>& options) {
  for (const auto& [key, value] : options) {
    const BackendOptionInfo* spec = nullptr;
    for (const BackendOptionInfo& o : info.options)
      if (o.name == key) spec = &o;
    if (!spec) {
      std::string known;
      for (const BackendOptionInfo& o : info.options) known += (known.empty() ? "" : ", ") + o.name + " (" + o.type + ")";
      return invalid_argument("unknown option '", key, "' for backend '", info.name, "'; known options: ",
                              known.empty() ? std::string("none") : known);
    }
    if (!option_value_parses(spec->type, value)) {
      return invalid_argument("option '", info.name, ".", key, "' must be ", spec->type, ", got '", value, "'");
    }
  }
  return Status::ok();
}

// --- LoadedPlugin --------------------------------------------------------------

Result<std::shared_ptr<LoadedPlugin>> LoadedPlugin::load(const std::string& path, const PluginLoadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return not_found("file not found");
  if (std::filesystem::is_directory(path, ec)) return invalid_argument("is a folder, not a plugin library");
  dlerror();
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* e = dlerror();
    std::string err = e ? e : "unknown dlopen error";
    // dlerror names the file it could not open: a dependency when it is not `path`.
    if (err.find("cannot open shared object file") != std::string::npos && err.rfind(path + ":", 0) != 0) {
      std::string dep = err.substr(0, err.find(':'));
      return make_status(StatusCode::kUnavailable, "a library it needs is missing: ", dep,
                         " (install it or add its folder to LD_LIBRARY_PATH)");
    }
    if (err.find("invalid ELF header") != std::string::npos || err.find("file too short") != std::string::npos ||
        err.find("not an ELF") != std::string::npos) {
      return invalid_argument("not a Kiln plugin: not a shared library (", err, ")");
    }
    if (err.find("undefined symbol") != std::string::npos) {
      return make_status(StatusCode::kUnavailable, "a symbol it needs is missing: ", err);
    }
    return make_status(StatusCode::kUnavailable, "cannot load: ", err);
  }
  auto* entry = reinterpret_cast<kiln_backend_entry_fn>(dlsym(dl, KILN_BACKEND_ENTRY_SYMBOL));
  if (!entry) {
    dlclose(dl);
    return invalid_argument("not a Kiln plugin: it does not export '", KILN_BACKEND_ENTRY_SYMBOL, "'");
  }
  std::shared_ptr<LoadedPlugin> p(new LoadedPlugin());
  p->dl_ = dl;
  p->info_.path = path;
  p->host_ = std::make_unique<kiln_host>();
  p->host_->name = std::filesystem::path(path).filename().string();
  p->host_->sink = options.log_sink;
  p->host_->log_level = options.log_level;
  return init(std::move(p), entry);
}

Result<std::shared_ptr<LoadedPlugin>> LoadedPlugin::from_entry(kiln_backend_entry_fn entry, const std::string& origin,
                                                               const PluginLoadOptions& options) {
  if (!entry) return invalid_argument("no entry function");
  std::shared_ptr<LoadedPlugin> p(new LoadedPlugin());
  p->info_.path = origin;
  p->host_ = std::make_unique<kiln_host>();
  p->host_->name = origin;
  p->host_->sink = options.log_sink;
  p->host_->log_level = options.log_level;
  return init(std::move(p), entry);
}

Result<std::shared_ptr<LoadedPlugin>> LoadedPlugin::init(std::shared_ptr<LoadedPlugin> p, kiln_backend_entry_fn entry) {
  kiln_backend_entry_args_t args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = sizeof(args);
  args.min_abi_major = KILN_BACKEND_ABI_MAJOR;
  args.min_abi_minor = 0;
  args.max_abi_major = KILN_BACKEND_ABI_MAJOR;
  args.max_abi_minor = KILN_BACKEND_ABI_MINOR;
  args.host_api = host_api();
  args.host = p->host_.get();
  EntryAnswer answer;
  const Status st = take_status(entry(&args, &answer.table, &answer.plugin));
  const ContractFindings table_findings = check_entry_answer(st, answer, &p->api_);
  if (table_findings.refused()) {
    // A table of this major: the plugin_release within its declared size is called whatever was refused.
    if (answer.plugin && p->api_.plugin_release) p->api_.plugin_release(answer.plugin);
    return table_findings.first_refusal();
  }
  p->declared_size_ = answer.table->header.struct_size;
  p->plugin_ = answer.plugin;
  p->info_.abi_version =
      std::to_string(answer.table->header.abi_major) + "." + std::to_string(answer.table->header.abi_minor);
  const ContractFindings info_findings = read_plugin_info(p->api_, p->plugin_, &p->info_, /*stop_at_refusal=*/true);
  p->hung_ = info_findings.hung();
  KILN_RETURN_IF_ERROR(info_findings.first_refusal());
  p->host_->name = p->info_.name;
  return p;
}

LoadedPlugin::~LoadedPlugin() {
  if (hung_) {
    // A thread may still be inside the plugin: never release it, never unmap
    // it. Its host context stays reachable (for that thread, and so leak
    // checkers see it kept on purpose).
    static std::mutex kept_mu;
    static std::vector<std::unique_ptr<kiln_host>>* kept = new std::vector<std::unique_ptr<kiln_host>>();
    std::lock_guard<std::mutex> lock(kept_mu);
    kept->push_back(std::move(host_));
    return;
  }
  if (plugin_ && api_.plugin_release) api_.plugin_release(plugin_);
  if (host_) {
    HostStats s = host_->stats();
    if (s.live_blocks > 0) {
      host_->log(KILN_LOG_WARNING, "leak: " + std::to_string(s.live_blocks) + " blocks (" +
                                       std::to_string(s.live_bytes) + " bytes) of host memory were never freed; "
                                       "freed at unload");
    }
  }
  // A plugin that keeps threads past plugin_release stays mapped (KILN_PLUGIN_NO_UNLOAD).
  if (dl_ && !info_.no_unload) dlclose(dl_);
  // The plugin is gone: nothing can use its leftover host memory any more.
  if (host_) host_free_all(host_.get());
}

Status LoadedPlugin::check_available() const {
  if (hung_) return Status(StatusCode::kUnavailable, info_.unavailable_reason);
  if (!api_.plugin_is_available) return Status::ok();
  std::lock_guard<std::mutex> lock(mu_);
  Status s = take_status(api_.plugin_is_available(plugin_));
  if (s.is_ok()) return s;
  return Status(StatusCode::kUnavailable, s.message());
}

Result<std::shared_ptr<BackendInstance>> LoadedPlugin::create_instance(
    size_t device_index, const std::vector<std::pair<std::string, std::string>>& options) {
  if (device_index >= info_.devices.size()) {
    return make_status(StatusCode::kOutOfRange, label(), ": device ", device_index, " does not exist (it has ",
                       info_.devices.size(), ")");
  }
  KILN_RETURN_IF_ERROR(check_options(info_, options));
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : options) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  kiln_instance_t* inst = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  KILN_RETURN_IF_ERROR(take_status(
      api_.instance_create(plugin_, device_index, keys.data(), values.data(), keys.size(), &inst),
      label() + ": instance_create"));
  if (!inst) return internal_error(label(), ": instance_create returned no instance");
  return std::make_shared<BackendInstance>(shared_from_this(), inst, device_index);
}

Status LoadedPlugin::check_compiled(const void* bytes, size_t size) const {
  if (!api_.plugin_check_compiled) return unimplemented(label(), " cannot check compiled blobs");
  std::lock_guard<std::mutex> lock(mu_);
  return take_status(api_.plugin_check_compiled(plugin_, bytes, size), label() + ": check_compiled");
}

// --- BackendInstance -----------------------------------------------------------

BackendInstance::~BackendInstance() { plugin_->api().instance_release(instance_); }

Status BackendInstance::set_property(const std::string& key, const std::string& value) {
  if (!plugin_->api().instance_set_property) return unimplemented(plugin_->label(), " has no properties to set");
  KILN_RETURN_IF_ERROR(check_options(plugin_->info(), {{key, value}}));
  std::lock_guard<std::mutex> lock(mu_);
  return take_status(plugin_->api().instance_set_property(instance_, key.c_str(), value.c_str()),
                     plugin_->label() + ": set_property");
}

Result<std::string> BackendInstance::get_property(const std::string& key) {
  if (!plugin_->api().instance_get_property) return unimplemented(plugin_->label(), " has no properties to read");
  char* out = nullptr;
  std::unique_lock<std::mutex> lock(mu_);
  Status st = take_status(plugin_->api().instance_get_property(instance_, key.c_str(), &out),
                          plugin_->label() + ": get_property");
  std::string value;
  if (out) {
    size_t cap = host_block_size(plugin_->host(), out);
    if (cap == 0) {
      if (st.is_ok()) st = internal_error(plugin_->label(), ": get_property returned memory not from the host allocator");
    } else {
      value.assign(out, strnlen(out, cap));
    }
    host_free(plugin_->host(), out);
  } else if (st.is_ok()) {
    st = internal_error(plugin_->label(), ": get_property returned no value");
  }
  if (!st.is_ok()) return st;
  return value;
}

Result<Capability> BackendInstance::get_capability(const kiln_graph_t* view) {
  kiln_capability_t cap;
  std::memset(&cap, 0, sizeof(cap));
  cap.struct_size = sizeof(cap);
  kiln_host* host = plugin_->host();
  CapabilityArrays guard{host, &cap};
  {
    std::lock_guard<std::mutex> lock(mu_);
    KILN_RETURN_IF_ERROR(take_status(plugin_->api().instance_get_capability(instance_, view, &cap)));
  }

  Capability out;
  const size_t num_nodes = view->nodes.size();
  auto array_ok = [&](const void* p, size_t n, size_t elem, const char* what) {
    if (n == 0) return true;
    if (host_block_size(host, p) / elem < n) {
      out.problems.push_back(std::string(what) + " is not a host-allocated array of " + std::to_string(n) +
                             " entries; ignored");
      return false;
    }
    return true;
  };
  std::vector<int8_t> seen(num_nodes, 0);
  if (array_ok(cap.group_sizes, cap.num_groups, sizeof(size_t), "group_sizes")) {
    size_t total = 0;
    bool sizes_ok = true;
    for (size_t g = 0; g < cap.num_groups; ++g) {
      if (cap.group_sizes[g] == 0 || cap.group_sizes[g] > num_nodes) sizes_ok = false;
      total += cap.group_sizes[g];
    }
    if (!sizes_ok) {
      out.problems.push_back("a group size is 0 or larger than the view; all groups ignored");
    } else if (array_ok(cap.group_nodes, total, sizeof(size_t), "group_nodes")) {
      size_t k = 0;
      for (size_t g = 0; g < cap.num_groups; ++g) {
        std::vector<size_t> group;
        for (size_t j = 0; j < cap.group_sizes[g]; ++j, ++k) {
          size_t n = cap.group_nodes[k];
          if (n >= num_nodes) {
            out.problems.push_back("node index " + std::to_string(n) + " is out of range (the view has " +
                                   std::to_string(num_nodes) + " nodes); ignored");
          } else if (seen[n]) {
            out.problems.push_back("node " + std::to_string(n) + " is claimed twice; ignored the second time");
          } else {
            seen[n] = 1;
            group.push_back(n);
          }
        }
        std::sort(group.begin(), group.end());
        if (!group.empty()) out.groups.push_back(std::move(group));
      }
    }
  }
  if (array_ok(cap.declined_nodes, cap.num_declined, sizeof(size_t), "declined_nodes") &&
      array_ok(cap.declined_reasons, cap.num_declined, sizeof(char*), "declined_reasons")) {
    for (size_t j = 0; j < cap.num_declined; ++j) {
      size_t n = cap.declined_nodes[j];
      if (n >= num_nodes) continue;
      std::string reason;
      const char* r = cap.declined_reasons ? cap.declined_reasons[j] : nullptr;
      size_t rcap = host_block_size(host, r);
      if (r && rcap) reason.assign(r, strnlen(r, rcap));
      if (reason.empty()) reason = "declined (no reason given)";
      out.declined.emplace_back(n, std::move(reason));
    }
  }
  return out;
}

Result<std::shared_ptr<CompiledPartition>> BackendInstance::wrap(kiln_compiled_t* c, const std::string& what) {
  const kiln_backend_api_t& a = plugin_->api();
  if (!c) return internal_error(what, " returned no handle");
  kiln_concurrency_t conc = KILN_CONCURRENCY_SERIAL;
  int64_t nin = -1, nout = -1;
  CompiledDeviceInfo device;
  std::vector<std::string> owned;
  if (a.compiled_get_info) {
    kiln_compiled_info_t ci;
    std::memset(&ci, 0, sizeof(ci));
    ci.struct_size = sizeof(ci);
    Status st = take_status(a.compiled_get_info(c, &ci), "compiled_get_info");
    if (!st.is_ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      a.compiled_release(c);
      return st;
    }
    conc = ci.concurrency == KILN_CONCURRENCY_REENTRANT ? KILN_CONCURRENCY_REENTRANT : KILN_CONCURRENCY_SERIAL;
    nin = static_cast<int64_t>(ci.num_inputs);
    nout = static_cast<int64_t>(ci.num_outputs);
    // The 1.1 members (memory kinds, async, workspace, in-place): checked here, once.
    Result<CompiledDeviceInfo> dev = read_compiled_device_info(ci, a, plugin_->label());
    if (!dev.is_ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      a.compiled_release(c);
      return std::move(dev).status();
    }
    device = std::move(*dev);
    owned = owned_constant_names(ci);
  }
  auto compiled = std::make_shared<CompiledPartition>(shared_from_this(), c, conc, nin, nout, std::move(device));
  compiled->owned_constants_ = std::move(owned);
  return compiled;
}

Result<std::shared_ptr<CompiledPartition>> BackendInstance::compile(const kiln_graph_t* view,
                                                                     const kiln_partition_t& partition) {
  kiln_compiled_t* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    KILN_RETURN_IF_ERROR(take_status(plugin_->api().instance_compile(instance_, view, &partition, &c)));
  }
  KILN_ASSIGN_OR_RETURN(auto compiled, wrap(c, "compile"));
  if (compiled->num_inputs() >= 0 &&
      (compiled->num_inputs() != static_cast<int64_t>(partition.num_inputs) ||
       compiled->num_outputs() != static_cast<int64_t>(partition.num_outputs))) {
    return internal_error("compile: the handle declares ", compiled->num_inputs(), " inputs and ",
                          compiled->num_outputs(), " outputs; the partition has ", partition.num_inputs, " and ",
                          partition.num_outputs);
  }
  return compiled;
}

Result<std::shared_ptr<CompiledPartition>> BackendInstance::import_compiled(const void* bytes, size_t size) {
  const kiln_backend_api_t& a = plugin_->api();
  if (!a.instance_import) return unimplemented(plugin_->label(), " cannot import compiled partitions");
  if (a.plugin_check_compiled) KILN_RETURN_IF_ERROR(plugin_->check_compiled(bytes, size));
  kiln_compiled_t* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    KILN_RETURN_IF_ERROR(take_status(a.instance_import(instance_, bytes, size, &c), plugin_->label() + ": import"));
  }
  return wrap(c, "import");
}

// --- CompiledPartition -----------------------------------------------------------

CompiledPartition::~CompiledPartition() {
  std::lock_guard<std::mutex> lock(instance_->mu_);  // never during an instance call on its instance
  instance_->plugin().api().compiled_release(compiled_);
}

Status CompiledPartition::execute(kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs,
                                  size_t num_inputs) const {
  const kiln_backend_api_t& a = instance_->plugin().api();
  kiln_status_t* st;
  if (concurrency_ == KILN_CONCURRENCY_REENTRANT) {
    st = a.compiled_execute(compiled_, ctx, inputs, num_inputs);
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    st = a.compiled_execute(compiled_, ctx, inputs, num_inputs);
  }
  return take_status(st, instance_->plugin().label());
}

Result<std::vector<uint8_t>> CompiledPartition::export_bytes() const {
  LoadedPlugin& p = instance_->plugin();
  if (!p.api().compiled_export) return unimplemented(p.label(), " cannot export compiled partitions");
  void* bytes = nullptr;
  size_t size = 0;
  std::unique_lock<std::mutex> lock(mu_);  // never alongside a serial execute
  Status st = take_status(p.api().compiled_export(compiled_, &bytes, &size), p.label() + ": export");
  lock.unlock();
  std::vector<uint8_t> out;
  if (st.is_ok()) {
    if (size > 0 && host_block_size(p.host(), bytes) < size) {
      st = internal_error(p.label(), ": export returned ", size, " bytes not allocated with the host allocator");
    } else if (size > 0) {
      out.assign(static_cast<uint8_t*>(bytes), static_cast<uint8_t*>(bytes) + size);
    }
  }
  host_free(p.host(), bytes);
  if (!st.is_ok()) return st;
  return out;
}

}  // namespace kiln::runtime
