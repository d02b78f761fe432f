// Kiln backend SDK, part 2: the holders and trampolines that turn the C ABI
// into calls on kiln::sdk::Plugin / Instance / Compiled. Included by
// kiln/c/backend_sdk.hpp; plugin authors never use it directly.
//
// Every trampoline is noexcept and catches every exception into a status;
// every object handed to the host lives in host memory.
//
// \since 1.0
#ifndef KILN_C_BACKEND_SDK_GLUE_HPP_
#define KILN_C_BACKEND_SDK_GLUE_HPP_

#ifndef KILN_C_BACKEND_SDK_HPP_
#error "include kiln/c/backend_sdk.hpp, not this file"
#endif

namespace kiln::sdk {

// ---------------------------------------------------------------------------
// Glue: holders and trampolines (not for plugin authors)
// ---------------------------------------------------------------------------

struct PluginHolder;

struct Glue {
  template <class F>
  static kiln_status_t* guard(const Host& host, const char* what, F&& f) noexcept {
    try {
      f();
      return nullptr;
    } catch (const Error& e) {
      return host.make_status(e.code(), e.what());
    } catch (const std::bad_alloc&) {
      return host.make_status(KILN_STATUS_INTERNAL, "out of memory");
    } catch (const std::exception& e) {
      return message_status(host, what, e.what());
    } catch (...) {
      return message_status(host, what, "an exception that is not a std::exception");
    }
  }

  static kiln_status_t* message_status(const Host& host, const char* what, const char* detail) noexcept {
    try {
      std::string m = std::string("uncaught exception in ") + what + ": " + detail;
      return host.make_status(KILN_STATUS_INTERNAL, m.c_str());
    } catch (...) {
      return host.make_status(KILN_STATUS_INTERNAL, "uncaught exception (and no memory to describe it)");
    }
  }

  // Objects handed to the host live in host memory.
  template <class T, class... A>
  static T* host_new(const Host& host, A&&... args) {
    void* p = host.alloc(sizeof(T), alignof(T) > 64 ? alignof(T) : 64);
    try {
      return new (p) T(std::forward<A>(args)...);
    } catch (...) {
      host.free(p);
      throw;
    }
  }
  // The SDK's part when a plugin call that was handed a fence failed.
  static void disarm(Fence& f) noexcept { f.disarm(); }

  template <class T>
  static void host_delete(const Host& host, T* p) noexcept {
    if (!p) return;
    try {
      p->~T();
    } catch (...) {
      host.log(KILN_LOG_ERROR, "a destructor threw during release; the exception was dropped");
    }
    host.free(p);
  }
};

struct PluginHolder {
  Host host;
  std::unique_ptr<Plugin> impl;
  Plugin::Info info;
  uint32_t flags = 0;  // kiln_plugin_flag_t bits
  // devices() is asked lazily, after the host's availability probe.
  std::once_flag devices_once;
  std::vector<Plugin::Device> devices;
  std::vector<OptionSpec> schema;
  std::vector<Plugin::CustomOp> custom_ops;
  kiln_backend_api_t api;

  PluginHolder(const kiln_host_api_t* api_in, kiln_host_t* ctx) : host(api_in, ctx) { std::memset(&api, 0, sizeof(api)); }
};

struct InstanceHolder {
  PluginHolder* plugin;
  std::unique_ptr<Instance> impl;
};

struct CompiledHolder {
  PluginHolder* plugin;
  std::unique_ptr<Compiled> impl;
  // The 1.1 compiled info, read once after compile/import; the host borrows
  // these arrays until compiled_release.
  uint32_t flags = 0;
  std::vector<int32_t> input_kinds, output_kinds;
  std::array<uint64_t, KILN_MEMORY_KIND_COUNT> workspace{};
  std::vector<size_t> inplace;
  std::vector<std::string> owned;
  std::vector<const char*> owned_ptrs;
  // True once the host read the memory kinds (compiled_get_info with a 1.1
  // struct): until then it passes host memory, as a 1.0 host always does.
  std::atomic<bool> kinds_published{false};

  CompiledHolder(PluginHolder* p, std::unique_ptr<Compiled> c) : plugin(p), impl(std::move(c)) {}

  // Reads and checks the handle's 1.1 declarations (throws naming the problem).
  void read_declarations() {
    auto kinds = [](const std::vector<kiln_memory_kind_t>& in, size_t n, const char* what) {
      if (!in.empty() && in.size() != n) {
        fail(KILN_STATUS_INTERNAL, std::string(what) + " memory kinds: " + std::to_string(in.size()) +
                                       " entries for " + std::to_string(n) + " " + what + "s");
      }
      std::vector<int32_t> out;
      bool any = false;
      for (kiln_memory_kind_t k : in) {
        if (k < KILN_MEMORY_HOST || k > KILN_MEMORY_DEVICE_HOST_VISIBLE)
          fail(KILN_STATUS_INTERNAL, std::string(what) + " memory kind " + std::to_string(k) + " is not a kiln_memory_kind_t");
        out.push_back(static_cast<int32_t>(k));
        any |= k != KILN_MEMORY_HOST;
      }
      if (!any) out.clear();  // all host: NULL, as in 1.0
      return out;
    };
    input_kinds = kinds(impl->input_memory_kinds(), impl->num_inputs(), "input");
    output_kinds = kinds(impl->output_memory_kinds(), impl->num_outputs(), "output");
    workspace = impl->workspace_bytes();
    for (auto [i, o] : impl->inplace_pairs()) {
      if (i >= impl->num_inputs() || o >= impl->num_outputs()) {
        fail(KILN_STATUS_INTERNAL, "in-place pair (input " + std::to_string(i) + ", output " + std::to_string(o) +
                                       ") is out of range");
      }
      inplace.push_back(i);
      inplace.push_back(o);
    }
    owned = impl->owned_constants();
    for (const std::string& n : owned) owned_ptrs.push_back(n.c_str());
    flags = impl->is_async() ? uint32_t{KILN_COMPILED_ASYNC} : 0u;
  }

  // Checks execute's inputs against the handle's specs (count, dtype, shape, kind).
  void check_inputs(const kiln_tensor_t* const* inputs, size_t n) const {
    const size_t want = impl->num_inputs();
    if (n != want) {
      std::string names;
      for (const InputSpec& sp : impl->input_specs()) names += (names.empty() ? "" : ", ") + sp.name;
      fail(KILN_STATUS_INVALID_ARGUMENT, "execute got " + std::to_string(n) + " inputs; the partition takes " +
                                             std::to_string(want) + (names.empty() ? "" : " (" + names + ")"));
    }
    if (n > 0 && !inputs) fail(KILN_STATUS_INVALID_ARGUMENT, "execute: inputs is NULL");
    const std::vector<InputSpec>& specs = impl->input_specs();
    const bool kinds = kinds_published.load(std::memory_order_acquire);
    for (size_t k = 0; k < n; ++k) {
      if (!inputs[k]) fail(KILN_STATUS_INVALID_ARGUMENT, "execute: input " + std::to_string(k) + " is NULL");
      InputSpec spec = k < specs.size() ? specs[k] : InputSpec{};
      spec.memory_kind = kinds && k < input_kinds.size() ? input_kinds[k] : KILN_MEMORY_HOST;
      check_input(k, spec, TensorView::from_c(inputs[k]));
    }
  }
};

template <class P>
struct PluginEntry {
  static PluginHolder* of(kiln_plugin_t* p) { return reinterpret_cast<PluginHolder*>(p); }
  static InstanceHolder* of(kiln_instance_t* p) { return reinterpret_cast<InstanceHolder*>(p); }
  static CompiledHolder* of(kiln_compiled_t* p) { return reinterpret_cast<CompiledHolder*>(p); }

  // The host table of the last entry call: statuses need no host context, so
  // a trampoline called with a NULL handle can still say what is wrong.
  static std::atomic<const kiln_host_api_t*>& boot_api() {
    static std::atomic<const kiln_host_api_t*> api{nullptr};
    return api;
  }

  // INVALID_ARGUMENT for a NULL handle or out-parameter (releases accept NULL instead).
  static kiln_status_t* null_argument(const char* message) noexcept {
    const kiln_host_api_t* a = boot_api().load(std::memory_order_acquire);
    return a ? a->status_create(KILN_STATUS_INVALID_ARGUMENT, message) : nullptr;
  }

  static kiln_status_t* entry(const kiln_backend_entry_args_t* args, const kiln_backend_api_t** out_api,
                              kiln_plugin_t** out_plugin) noexcept {
    if (out_api) *out_api = nullptr;
    if (out_plugin) *out_plugin = nullptr;
    // Without a host table no status can be made; the host sees no table.
    if (!args || !args->host_api || !args->host_api->status_create) return nullptr;
    boot_api().store(args->host_api, std::memory_order_release);
    Host boot(args->host_api, args->host);
    if (!out_api || !out_plugin) return boot.make_status(KILN_STATUS_INVALID_ARGUMENT, "entry: NULL out-parameter");
    if (KILN_BACKEND_ABI_MAJOR < args->min_abi_major || KILN_BACKEND_ABI_MAJOR > args->max_abi_major) {
      std::string m = "plugin speaks backend ABI " + std::to_string(KILN_BACKEND_ABI_MAJOR) + "." +
                      std::to_string(KILN_BACKEND_ABI_MINOR) + ", host speaks " +
                      std::to_string(args->min_abi_major) + "." + std::to_string(args->min_abi_minor) + " to " +
                      std::to_string(args->max_abi_major) + "." + std::to_string(args->max_abi_minor);
      return boot.make_status(KILN_STATUS_FAILED_PRECONDITION, m.c_str());
    }
    PluginHolder* holder = nullptr;
    kiln_status_t* st = Glue::guard(boot, "plugin construction", [&] {
      holder = Glue::host_new<PluginHolder>(boot, args->host_api, args->host);
      try {
        holder->impl.reset(new P());
        holder->impl->host_ = &holder->host;
        holder->info = holder->impl->info();
        if (holder->impl->no_unload()) holder->flags |= KILN_PLUGIN_NO_UNLOAD;
        if (holder->impl->shared_instances()) holder->flags |= KILN_PLUGIN_SHARED_INSTANCES;
        holder->schema = holder->impl->option_schema();
        holder->custom_ops = holder->impl->custom_ops();
        fill_table(holder->api, holder->impl->supports_export(), !holder->custom_ops.empty(),
                   holder->impl->device_memory());
      } catch (...) {
        Glue::host_delete(boot, holder);
        holder = nullptr;
        throw;
      }
    });
    if (st) return st;
    *out_api = &holder->api;
    *out_plugin = reinterpret_cast<kiln_plugin_t*>(holder);
    return nullptr;
  }

  static void fill_table(kiln_backend_api_t& t, bool exports, bool has_custom_ops, bool device_memory) {
    t.header.struct_size = sizeof(kiln_backend_api_t);
    t.header.abi_major = KILN_BACKEND_ABI_MAJOR;
    t.header.abi_minor = KILN_BACKEND_ABI_MINOR;
    t.plugin_release = &plugin_release;
    t.plugin_get_info = &plugin_get_info;
    t.plugin_is_available = &plugin_is_available;
    t.plugin_get_device_count = &plugin_get_device_count;
    t.plugin_get_device_info = &plugin_get_device_info;
    t.plugin_get_option_count = &plugin_get_option_count;
    t.plugin_get_option_info = &plugin_get_option_info;
    t.instance_create = &instance_create;
    t.instance_release = &instance_release;
    t.instance_set_property = &instance_set_property;
    t.instance_get_property = &instance_get_property;
    t.instance_get_capability = &instance_get_capability;
    t.instance_compile = &instance_compile;
    t.compiled_release = &compiled_release;
    t.compiled_get_info = &compiled_get_info;
    t.compiled_execute = &compiled_execute;
    if (exports) {
      t.compiled_export = &compiled_export;
      t.plugin_check_compiled = &plugin_check_compiled;
      t.instance_import = &instance_import;
    }
    if (has_custom_ops) {
      t.plugin_get_custom_op_count = &plugin_get_custom_op_count;
      t.plugin_get_custom_op_info = &plugin_get_custom_op_info;
    }
    if (device_memory) {
      t.instance_alloc = &instance_alloc;
      t.instance_free = &instance_free;
      t.instance_copy = &instance_copy;
    }
    t.compiled_execute_async = &compiled_execute_async;  // used only for handles that declare KILN_COMPILED_ASYNC
  }

  // devices(), asked once on first use (after the host's availability probe).
  static const std::vector<Plugin::Device>& devices_of(PluginHolder* h) {
    std::call_once(h->devices_once, [h] { h->devices = h->impl->devices(); });
    return h->devices;
  }

  // Writes `value` into out->member when the member fits in out->struct_size.
#define KILN_SDK_SET_(out, type, member, value) \
  do {                                          \
    if (KILN_ABI_HAS(type, member, (out)->struct_size)) (out)->member = (value); \
  } while (0)

  static void plugin_release(kiln_plugin_t* p) noexcept {
    if (!p) return;
    PluginHolder* h = of(p);
    Host host = h->host;  // the holder's own copy dies with it
    Glue::host_delete(host, h);
  }

  static kiln_status_t* plugin_get_info(kiln_plugin_t* p, kiln_plugin_info_t* out) noexcept {
    if (!p || !out) return null_argument("plugin_get_info: NULL plugin or out_info");
    PluginHolder* h = of(p);
    return Glue::guard(h->host, "plugin_get_info", [&] {
      KILN_SDK_SET_(out, kiln_plugin_info_t, name, h->info.name.c_str());
      KILN_SDK_SET_(out, kiln_plugin_info_t, version, h->info.version.c_str());
      KILN_SDK_SET_(out, kiln_plugin_info_t, vendor, h->info.vendor.c_str());
      KILN_SDK_SET_(out, kiln_plugin_info_t, vendor_sdk_version, h->info.vendor_sdk_version.c_str());
      KILN_SDK_SET_(out, kiln_plugin_info_t, description, h->info.description.c_str());
      KILN_SDK_SET_(out, kiln_plugin_info_t, priority, h->info.priority);
      KILN_SDK_SET_(out, kiln_plugin_info_t, flags, h->flags);
    });
  }

  static kiln_status_t* plugin_is_available(kiln_plugin_t* p) noexcept {
    if (!p) return null_argument("plugin_is_available: NULL plugin");
    PluginHolder* h = of(p);
    std::string why;
    kiln_status_t* st = Glue::guard(h->host, "plugin_is_available", [&] { why = h->impl->unavailable_reason(); });
    if (st) return st;
    return why.empty() ? nullptr : h->host.make_status(KILN_STATUS_UNAVAILABLE, why.c_str());
  }

  static kiln_status_t* plugin_get_device_count(kiln_plugin_t* p, size_t* out) noexcept {
    if (!p || !out) return null_argument("plugin_get_device_count: NULL plugin or out_count");
    PluginHolder* h = of(p);
    return Glue::guard(h->host, "plugin_get_device_count", [&] { *out = devices_of(h).size(); });
  }

  static kiln_status_t* plugin_get_device_info(kiln_plugin_t* p, size_t index, kiln_device_info_t* out) noexcept {
    if (!p || !out) return null_argument("plugin_get_device_info: NULL plugin or out_info");
    PluginHolder* h = of(p);
    return Glue::guard(h->host, "plugin_get_device_info", [&] {
      const std::vector<Plugin::Device>& devices = devices_of(h);
      if (index >= devices.size())
        fail(KILN_STATUS_OUT_OF_RANGE, "device " + std::to_string(index) + " of " + std::to_string(devices.size()));
      const Plugin::Device& d = devices[index];
      KILN_SDK_SET_(out, kiln_device_info_t, name, d.name.c_str());
      KILN_SDK_SET_(out, kiln_device_info_t, kind, static_cast<int32_t>(d.kind));
      KILN_SDK_SET_(out, kiln_device_info_t, description, d.description.c_str());
      KILN_SDK_SET_(out, kiln_device_info_t, vendor_id, d.vendor_id);
      KILN_SDK_SET_(out, kiln_device_info_t, device_id, d.device_id);
      if (KILN_ABI_HAS(kiln_device_info_t, uuid, out->struct_size)) std::memcpy(out->uuid, d.uuid.data(), 16);
      KILN_SDK_SET_(out, kiln_device_info_t, memory_bytes, d.memory_bytes);
      KILN_SDK_SET_(out, kiln_device_info_t, driver_version, d.driver_version.c_str());
    });
  }

  static kiln_status_t* plugin_get_option_count(kiln_plugin_t* p, size_t* out) noexcept {
    if (!p || !out) return null_argument("plugin_get_option_count: NULL plugin or out_count");
    *out = of(p)->schema.size();
    return nullptr;
  }

  static kiln_status_t* plugin_get_option_info(kiln_plugin_t* p, size_t index, kiln_option_info_t* out) noexcept {
    if (!p || !out) return null_argument("plugin_get_option_info: NULL plugin or out_info");
    PluginHolder* h = of(p);
    return Glue::guard(h->host, "plugin_get_option_info", [&] {
      if (index >= h->schema.size())
        fail(KILN_STATUS_OUT_OF_RANGE, "option " + std::to_string(index) + " of " + std::to_string(h->schema.size()));
      const OptionSpec& o = h->schema[index];
      KILN_SDK_SET_(out, kiln_option_info_t, name, o.name.c_str());
      KILN_SDK_SET_(out, kiln_option_info_t, type, static_cast<int32_t>(o.type));
      KILN_SDK_SET_(out, kiln_option_info_t, default_value, o.default_value.c_str());
      KILN_SDK_SET_(out, kiln_option_info_t, doc, o.doc.c_str());
    });
  }

  static kiln_status_t* plugin_get_custom_op_count(kiln_plugin_t* p, size_t* out) noexcept {
    if (!p || !out) return null_argument("plugin_get_custom_op_count: NULL plugin or out_count");
    *out = of(p)->custom_ops.size();
    return nullptr;
  }

  static kiln_status_t* plugin_get_custom_op_info(kiln_plugin_t* p, size_t index, kiln_custom_op_info_t* out) noexcept {
    if (!p || !out) return null_argument("plugin_get_custom_op_info: NULL plugin or out_info");
    PluginHolder* h = of(p);
    return Glue::guard(h->host, "plugin_get_custom_op_info", [&] {
      if (index >= h->custom_ops.size())
        fail(KILN_STATUS_OUT_OF_RANGE, "custom op " + std::to_string(index) + " of " + std::to_string(h->custom_ops.size()));
      const Plugin::CustomOp& c = h->custom_ops[index];
      KILN_SDK_SET_(out, kiln_custom_op_info_t, domain, c.domain.c_str());
      KILN_SDK_SET_(out, kiln_custom_op_info_t, op_type, c.op_type.c_str());
      KILN_SDK_SET_(out, kiln_custom_op_info_t, since_version, c.since_version);
      KILN_SDK_SET_(out, kiln_custom_op_info_t, doc, c.doc.c_str());
    });
  }

  static kiln_status_t* instance_create(kiln_plugin_t* p, size_t device_index, const char* const* keys,
                                        const char* const* values, size_t n, kiln_instance_t** out) noexcept {
    if (!p) return null_argument("instance_create: NULL plugin");
    PluginHolder* h = of(p);
    return Glue::guard(h->host, "instance_create", [&] {
      if (!out) fail(KILN_STATUS_INVALID_ARGUMENT, "instance_create: out_instance is NULL");
      if (n > 0 && (!keys || !values)) fail(KILN_STATUS_INVALID_ARGUMENT, "instance_create: NULL option arrays");
      if (device_index >= devices_of(h).size()) {
        fail(KILN_STATUS_OUT_OF_RANGE, "device " + std::to_string(device_index) + " does not exist; '" +
                                           h->info.name + "' has " + std::to_string(devices_of(h).size()));
      }
      Options opts(h->schema);
      for (size_t i = 0; i < n; ++i) {
        if (!keys[i] || !values[i]) fail(KILN_STATUS_INVALID_ARGUMENT, "option " + std::to_string(i) + " is NULL");
        opts.set(keys[i], values[i]);
      }
      h->impl->validate_options(opts);
      std::unique_ptr<Instance> impl = h->impl->create_instance(device_index, std::move(opts));
      if (!impl) fail(KILN_STATUS_INTERNAL, "create_instance returned null");
      InstanceHolder* ih = Glue::host_new<InstanceHolder>(h->host, InstanceHolder{h, std::move(impl)});
      *out = reinterpret_cast<kiln_instance_t*>(ih);
    });
  }

  static void instance_release(kiln_instance_t* i) noexcept {
    if (!i) return;
    InstanceHolder* ih = of(i);
    Glue::host_delete(ih->plugin->host, ih);
  }

  static kiln_status_t* instance_set_property(kiln_instance_t* i, const char* key, const char* value) noexcept {
    if (!i) return null_argument("instance_set_property: NULL instance");
    InstanceHolder* ih = of(i);
    return Glue::guard(ih->plugin->host, "instance_set_property", [&] {
      if (!key || !value) fail(KILN_STATUS_INVALID_ARGUMENT, "set_property: NULL key or value");
      bool in_schema = false;
      for (const OptionSpec& o : ih->impl->options().schema()) in_schema |= o.name == key;
      if (in_schema) {  // validate the would-be options first: a refusal changes nothing
        Options next = ih->impl->options();
        next.set(key, value);
        ih->plugin->impl->validate_options(next);
      }
      ih->impl->set_property(key, value);
    });
  }

  static kiln_status_t* instance_get_property(kiln_instance_t* i, const char* key, char** out) noexcept {
    if (!i) return null_argument("instance_get_property: NULL instance");
    InstanceHolder* ih = of(i);
    return Glue::guard(ih->plugin->host, "instance_get_property", [&] {
      if (!key || !out) fail(KILN_STATUS_INVALID_ARGUMENT, "get_property: NULL key or out_value");
      std::string v = ih->impl->get_property(key);
      *out = ih->plugin->host.strdup(v);
    });
  }

  static kiln_status_t* instance_get_capability(kiln_instance_t* i, const kiln_graph_t* g,
                                                kiln_capability_t* out) noexcept {
    if (!i) return null_argument("instance_get_capability: NULL instance");
    InstanceHolder* ih = of(i);
    const Host& host = ih->plugin->host;
    return Glue::guard(host, "instance_get_capability", [&] {
      if (!g || !out) fail(KILN_STATUS_INVALID_ARGUMENT, "get_capability: NULL graph or out_capability");
      Capability cap;
      ih->impl->get_capability(Graph(&host, g), cap);
      size_t total = 0;
      for (const auto& grp : cap.groups()) total += grp.size();
      // The host frees whatever is stored here, also if a later step throws.
      out->num_groups = cap.groups().size();
      out->group_sizes = host.alloc_array<size_t>(cap.groups().size());
      out->group_nodes = host.alloc_array<size_t>(total);
      size_t k = 0;
      for (size_t j = 0; j < cap.groups().size(); ++j) {
        out->group_sizes[j] = cap.groups()[j].size();
        for (size_t n : cap.groups()[j]) out->group_nodes[k++] = n;
      }
      const auto& dec = cap.declined();
      out->declined_nodes = host.alloc_array<size_t>(dec.size());
      out->declined_reasons = host.alloc_array<char*>(dec.size());
      for (size_t j = 0; j < dec.size(); ++j) out->declined_reasons[j] = nullptr;
      out->num_declined = dec.size();
      for (size_t j = 0; j < dec.size(); ++j) {
        out->declined_nodes[j] = dec[j].first;
        out->declined_reasons[j] = host.strdup(dec[j].second);
      }
    });
  }

  static kiln_status_t* instance_compile(kiln_instance_t* i, const kiln_graph_t* g, const kiln_partition_t* part,
                                         kiln_compiled_t** out) noexcept {
    if (!i) return null_argument("instance_compile: NULL instance");
    InstanceHolder* ih = of(i);
    const Host& host = ih->plugin->host;
    return Glue::guard(host, "instance_compile", [&] {
      if (!g || !part || !out) fail(KILN_STATUS_INVALID_ARGUMENT, "compile: NULL graph, partition or out_compiled");
      Partition p;
      p.id = part->id ? part->id : "";
      p.nodes.assign(part->nodes, part->nodes + part->num_nodes);
      for (size_t k = 0; k < part->num_inputs; ++k) p.inputs.emplace_back(&host, part->inputs[k]);
      for (size_t k = 0; k < part->num_outputs; ++k) p.outputs.emplace_back(&host, part->outputs[k]);
      std::unique_ptr<Compiled> c = ih->impl->compile(Graph(&host, g), p);
      if (!c) fail(KILN_STATUS_INTERNAL, "compile returned null");
      if (!c->has_input_specs()) {
        std::vector<InputSpec> specs;
        for (const Value& v : p.inputs) specs.push_back(InputSpec::of(v));
        c->set_input_specs(std::move(specs));
      }
      *out = finish(host, ih->plugin, std::move(c));
    });
  }

  // A holder for a new handle, its 1.1 declarations read and checked.
  static kiln_compiled_t* finish(const Host& host, PluginHolder* plugin, std::unique_ptr<Compiled> c) {
    CompiledHolder* ch = Glue::host_new<CompiledHolder>(host, plugin, std::move(c));
    try {
      ch->read_declarations();
    } catch (...) {
      Glue::host_delete(host, ch);
      throw;
    }
    return reinterpret_cast<kiln_compiled_t*>(ch);
  }

  static void compiled_release(kiln_compiled_t* c) noexcept {
    if (!c) return;
    CompiledHolder* ch = of(c);
    Glue::host_delete(ch->plugin->host, ch);
  }

  static kiln_status_t* compiled_get_info(kiln_compiled_t* c, kiln_compiled_info_t* out) noexcept {
    if (!c || !out) return null_argument("compiled_get_info: NULL compiled or out_info");
    CompiledHolder* ch = of(c);
    return Glue::guard(ch->plugin->host, "compiled_get_info", [&] {
      KILN_SDK_SET_(out, kiln_compiled_info_t, concurrency, static_cast<int32_t>(ch->impl->concurrency()));
      KILN_SDK_SET_(out, kiln_compiled_info_t, num_inputs, ch->impl->num_inputs());
      KILN_SDK_SET_(out, kiln_compiled_info_t, num_outputs, ch->impl->num_outputs());
      // 1.1 members: a 1.0 host's struct ends before them, so it sees none.
      KILN_SDK_SET_(out, kiln_compiled_info_t, flags, ch->flags);
      KILN_SDK_SET_(out, kiln_compiled_info_t, input_memory_kinds, ch->input_kinds.empty() ? nullptr : ch->input_kinds.data());
      KILN_SDK_SET_(out, kiln_compiled_info_t, output_memory_kinds, ch->output_kinds.empty() ? nullptr : ch->output_kinds.data());
      if (KILN_ABI_HAS(kiln_compiled_info_t, workspace_bytes, out->struct_size))
        for (size_t k = 0; k < KILN_MEMORY_KIND_COUNT; ++k) out->workspace_bytes[k] = ch->workspace[k];
      KILN_SDK_SET_(out, kiln_compiled_info_t, num_inplace, ch->inplace.size() / 2);
      KILN_SDK_SET_(out, kiln_compiled_info_t, inplace_pairs, ch->inplace.empty() ? nullptr : ch->inplace.data());
      KILN_SDK_SET_(out, kiln_compiled_info_t, num_owned_constants, ch->owned_ptrs.size());
      KILN_SDK_SET_(out, kiln_compiled_info_t, owned_constants, ch->owned_ptrs.empty() ? nullptr : ch->owned_ptrs.data());
      if (KILN_ABI_HAS(kiln_compiled_info_t, input_memory_kinds, out->struct_size))
        ch->kinds_published.store(true, std::memory_order_release);
    });
  }

  static kiln_status_t* compiled_execute(kiln_compiled_t* c, kiln_exec_context_t* ctx,
                                         const kiln_tensor_t* const* inputs, size_t n) noexcept {
    if (!c) return null_argument("compiled_execute: NULL compiled");
    CompiledHolder* ch = of(c);
    const Host& host = ch->plugin->host;
    return Glue::guard(host, "compiled_execute", [&] {
      ch->check_inputs(inputs, n);
      ExecContext ec(&host, ctx);
      ch->impl->execute(ec, Inputs(inputs, n));
    });
  }

  static kiln_status_t* compiled_execute_async(kiln_compiled_t* c, kiln_exec_context_t* ctx,
                                               const kiln_tensor_t* const* inputs, size_t n, kiln_fence_t* fence,
                                               uint64_t value) noexcept {
    if (!c || !fence) return null_argument("compiled_execute_async: NULL compiled or fence");
    CompiledHolder* ch = of(c);
    const Host& host = ch->plugin->host;
    Fence done;
    kiln_status_t* st = Glue::guard(host, "compiled_execute_async", [&] {
      ch->check_inputs(inputs, n);
      done = Fence(&host, fence, value);
      ExecContext ec(&host, ctx);
      ch->impl->execute_async(ec, Inputs(inputs, n), done);
    });
    if (st) Glue::disarm(done);  // nothing was queued: the fence is not signalled
    return st;
  }

  static kiln_status_t* instance_alloc(kiln_instance_t* i, int32_t kind, uint32_t device, size_t size,
                                       size_t alignment, void** out) noexcept {
    if (!i || !out) return null_argument("instance_alloc: NULL instance or out_ptr");
    InstanceHolder* ih = of(i);
    return Glue::guard(ih->plugin->host, "instance_alloc", [&] {
      if (kind <= KILN_MEMORY_HOST || kind > KILN_MEMORY_DEVICE_HOST_VISIBLE)
        fail(KILN_STATUS_INVALID_ARGUMENT, "instance_alloc: " + memory_kind_name(kind) + " is not a kind to allocate");
      if (alignment == 0) alignment = 64;
      if ((alignment & (alignment - 1)) != 0)
        fail(KILN_STATUS_INVALID_ARGUMENT, "instance_alloc: alignment " + std::to_string(alignment) + " is not a power of two");
      void* p = ih->impl->allocate(static_cast<kiln_memory_kind_t>(kind), device, size, alignment);
      if (!p) fail(KILN_STATUS_RESOURCE_EXHAUSTED, "instance_alloc: no " + memory_kind_name(kind) + " memory for " + std::to_string(size) + " bytes");
      *out = p;
    });
  }

  static void instance_free(kiln_instance_t* i, int32_t kind, void* ptr) noexcept {
    if (!i || !ptr) return;
    of(i)->impl->deallocate(static_cast<kiln_memory_kind_t>(kind), ptr);
  }

  static kiln_status_t* instance_copy(kiln_instance_t* i, const kiln_copy_t* copies, size_t n, kiln_fence_t* fence,
                                      uint64_t value) noexcept {
    if (!i || (n > 0 && !copies)) return null_argument("instance_copy: NULL instance or copies");
    InstanceHolder* ih = of(i);
    const Host& host = ih->plugin->host;
    Fence done;
    kiln_status_t* st = Glue::guard(host, "instance_copy", [&] {
      std::vector<Copy> list;
      for (size_t k = 0; k < n; ++k) {
        const kiln_copy_t& c = copies[k];
        if (c.bytes > 0 && (!c.src || !c.dst)) fail(KILN_STATUS_INVALID_ARGUMENT, "copy " + std::to_string(k) + ": NULL src or dst");
        list.push_back({c.src, c.src_kind, c.src_device, c.dst, c.dst_kind, c.dst_device, c.bytes});
      }
      if (fence) done = Fence(&host, fence, value);
      ih->impl->copy(list, done);
    });
    if (st) Glue::disarm(done);
    return st;
  }

  static kiln_status_t* compiled_export(kiln_compiled_t* c, void** out_bytes, size_t* out_size) noexcept {
    if (!c) return null_argument("compiled_export: NULL compiled");
    CompiledHolder* ch = of(c);
    const Host& host = ch->plugin->host;
    return Glue::guard(host, "compiled_export", [&] {
      if (!out_bytes || !out_size) fail(KILN_STATUS_INVALID_ARGUMENT, "export: NULL out-parameter");
      std::vector<uint8_t> bytes = ch->impl->export_bytes();
      void* p = host.alloc(bytes.size());
      if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
      *out_bytes = p;
      *out_size = bytes.size();
    });
  }

  static kiln_status_t* plugin_check_compiled(kiln_plugin_t* p, const void* bytes, size_t size) noexcept {
    if (!p) return null_argument("plugin_check_compiled: NULL plugin");
    PluginHolder* h = of(p);
    return Glue::guard(h->host, "plugin_check_compiled", [&] {
      if (!bytes && size > 0) fail(KILN_STATUS_INVALID_ARGUMENT, "check_compiled: bytes is NULL");
      h->impl->check_compiled(static_cast<const uint8_t*>(bytes), size);
    });
  }

  static kiln_status_t* instance_import(kiln_instance_t* i, const void* bytes, size_t size,
                                        kiln_compiled_t** out) noexcept {
    if (!i) return null_argument("instance_import: NULL instance");
    InstanceHolder* ih = of(i);
    const Host& host = ih->plugin->host;
    return Glue::guard(host, "instance_import", [&] {
      if ((!bytes && size > 0) || !out) fail(KILN_STATUS_INVALID_ARGUMENT, "import: NULL bytes or out_compiled");
      ih->plugin->impl->check_compiled(static_cast<const uint8_t*>(bytes), size);
      std::unique_ptr<Compiled> c = ih->impl->import_compiled(static_cast<const uint8_t*>(bytes), size);
      if (!c) fail(KILN_STATUS_INTERNAL, "import_compiled returned null");
      *out = finish(host, ih->plugin, std::move(c));
    });
  }
#undef KILN_SDK_SET_
};

}  // namespace kiln::sdk

#endif  // KILN_C_BACKEND_SDK_GLUE_HPP_
