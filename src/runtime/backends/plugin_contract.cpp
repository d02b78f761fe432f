#include "runtime/backends/plugin_contract.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/backends/host.h"

namespace kiln::runtime {
namespace {

constexpr size_t kMaxListed = 4096;  // devices, options, custom ops

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

std::string copy_str(const char* s) { return s ? std::string(s) : std::string(); }

const char* option_type_name(int32_t t) {
  switch (t) {
    case KILN_OPTION_BOOL: return "bool";
    case KILN_OPTION_INT: return "int";
    case KILN_OPTION_FLOAT: return "float";
    case KILN_OPTION_STRING: return "string";
    default: return "";
  }
}

const char* device_kind_name(int32_t k) {
  switch (k) {
    case KILN_DEVICE_CPU: return "cpu";
    case KILN_DEVICE_GPU: return "gpu";
    case KILN_DEVICE_NPU: return "npu";
    default: return "other";
  }
}

void join(std::string* list, const std::string& item) { *list += (list->empty() ? "" : ", ") + item; }

// A device as the plugin described it (members past its struct_size read as zero).
BackendDeviceInfo device_of(const kiln_device_info_t& d) {
  BackendDeviceInfo out{copy_str(d.name), device_kind_name(d.kind), copy_str(d.description)};
  out.vendor_id = d.vendor_id;
  out.device_id = d.device_id;
  out.memory_bytes = d.memory_bytes;
  out.driver_version = copy_str(d.driver_version);
  if (std::any_of(std::begin(d.uuid), std::end(d.uuid), [](uint8_t b) { return b != 0; })) {
    static const char kHex[] = "0123456789abcdef";
    for (uint8_t b : d.uuid) {
      out.uuid += kHex[b >> 4];
      out.uuid += kHex[b & 15];
    }
  }
  return out;
}

// Refuses with the status a plugin call returned (its code, message prefixed).
void refuse_status(ContractFindings& f, const std::string& check, const Status& st) {
  f.refuse(check, st.code(), st.message());
}

std::string versions_of(const kiln_abi_header_t& h) {
  std::string s = "plugin " + std::to_string(h.abi_major) + "." + std::to_string(h.abi_minor) + ", host " +
                  std::to_string(KILN_BACKEND_ABI_MAJOR) + "." + std::to_string(KILN_BACKEND_ABI_MINOR);
  const int plugin_minor = h.abi_minor, host_minor = KILN_BACKEND_ABI_MINOR;
  if (plugin_minor > host_minor) s += " (newer plugin: the host reads what it knows)";
  if (plugin_minor < host_minor) s += " (older plugin: later entries count as NULL)";
  return s;
}

// Entries that exist only in pairs (or sets): one without the other is a bug
// the loader survives (it uses neither), so the kit fails it and the loader does not.
void check_optional_entries(const kiln_backend_api_t& api, ContractFindings& f) {
  std::string present, inconsistent;
  auto opt = [&](const void* fn, const char* n) {
    if (fn) join(&present, n);
  };
  opt(reinterpret_cast<const void*>(api.plugin_is_available), "is_available");
  opt(reinterpret_cast<const void*>(api.plugin_get_device_count), "devices");
  opt(reinterpret_cast<const void*>(api.plugin_get_option_count), "options");
  opt(reinterpret_cast<const void*>(api.instance_set_property), "properties");
  opt(reinterpret_cast<const void*>(api.compiled_get_info), "compiled_get_info");
  opt(reinterpret_cast<const void*>(api.compiled_export), "export/import");
  opt(reinterpret_cast<const void*>(api.plugin_get_custom_op_count), "custom ops");
  if (!api.plugin_get_device_count != !api.plugin_get_device_info) inconsistent += "device count without device info; ";
  if (!api.plugin_get_option_count != !api.plugin_get_option_info) inconsistent += "option count without option info; ";
  if (!api.instance_set_property != !api.instance_get_property) inconsistent += "set_property without get_property; ";
  if (api.compiled_export && (!api.instance_import || !api.plugin_check_compiled))
    inconsistent += "export without import and check_compiled; ";
  if (!api.plugin_get_custom_op_count != !api.plugin_get_custom_op_info) inconsistent += "custom op count without info; ";
  if (!inconsistent.empty()) f.problem("optional entries", inconsistent);
  else f.pass("optional entries", present.empty() ? "none (defaults apply)" : present);
}

}  // namespace

int64_t probe_timeout_ms() {
  const char* env = std::getenv("KILN_PLUGIN_PROBE_TIMEOUT_MS");
  if (!env || !*env) return 10000;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(env, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) return 10000;  // not a number: the default
  return static_cast<int64_t>(v);
}

bool option_value_parses(const std::string& type, const std::string& v) {
  if (type == "bool") {
    return v == "true" || v == "false" || v == "1" || v == "0" || v == "on" || v == "off" || v == "yes" ||
           v == "no";
  }
  if (type == "int" || type == "float") {
    if (v.empty()) return false;
    errno = 0;
    char* end = nullptr;
    double d = 0;
    if (type == "int") (void)std::strtoll(v.c_str(), &end, 10);
    else d = std::strtod(v.c_str(), &end);
    return errno == 0 && end == v.c_str() + v.size() && std::isfinite(d);
  }
  return true;
}

Status ContractFindings::first_refusal() const {
  for (const ContractFinding& f : items_)
    if (f.refused) return Status(f.code, f.detail);
  return Status::ok();
}

bool ContractFindings::refused() const {
  return std::any_of(items_.begin(), items_.end(), [](const ContractFinding& f) { return f.refused; });
}

ContractFindings check_entry_answer(const Status& entry_status, const EntryAnswer& answer, kiln_backend_api_t* api) {
  ContractFindings f;
  std::memset(api, 0, sizeof(*api));
  if (!entry_status.is_ok()) {
    f.refuse("entry",
             entry_status.code() == StatusCode::kUnavailable ? StatusCode::kUnavailable : StatusCode::kFailedPrecondition,
             "the plugin's init failed: " + entry_status.message());
    return f;
  }
  if (!answer.table) {
    f.refuse("entry", StatusCode::kInternal, "the entry returned no function table");
    return f;
  }
  f.pass("entry", answer.plugin ? "returned a table and a plugin object" : "returned a table");
  const kiln_abi_header_t h = answer.table->header;
  if (h.abi_major != KILN_BACKEND_ABI_MAJOR) {
    // The table's layout is unknown: nothing in it may be called.
    f.refuse("abi version", StatusCode::kFailedPrecondition,
             "ABI major version mismatch: the plugin speaks " + std::to_string(h.abi_major) + "." +
                 std::to_string(h.abi_minor) + ", this host speaks " + std::to_string(KILN_BACKEND_ABI_MAJOR) + "." +
                 std::to_string(KILN_BACKEND_ABI_MINOR) + " (rebuild the plugin against this Kiln's kiln/c/backend.h)");
    return f;
  }
  f.pass("abi version", versions_of(h));
  // Copied before any later refusal, so that the loader can still call the
  // plugin_release that lies within the declared size.
  std::memcpy(api, answer.table, std::min<size_t>(h.struct_size, sizeof(*api)));
  const size_t min_size = offsetof(kiln_backend_api_t, compiled_execute) + sizeof(void*);
  if (h.struct_size < min_size) {
    f.refuse("table size", StatusCode::kFailedPrecondition,
             "the plugin's function table is " + std::to_string(h.struct_size) + " bytes, smaller than the " +
                 std::to_string(min_size) + " bytes every 1.x plugin has");
    return f;
  }
  f.pass("table size", std::to_string(h.struct_size) + " bytes (host table: " + std::to_string(sizeof(kiln_backend_api_t)) + ")");

  std::vector<std::string> missing;
  auto need = [&](const void* fn, const char* n) {
    if (!fn) missing.emplace_back(n);
  };
  need(reinterpret_cast<const void*>(api->plugin_release), "plugin_release");
  need(reinterpret_cast<const void*>(api->plugin_get_info), "plugin_get_info");
  need(reinterpret_cast<const void*>(api->instance_create), "instance_create");
  need(reinterpret_cast<const void*>(api->instance_release), "instance_release");
  need(reinterpret_cast<const void*>(api->instance_get_capability), "instance_get_capability");
  need(reinterpret_cast<const void*>(api->instance_compile), "instance_compile");
  need(reinterpret_cast<const void*>(api->compiled_release), "compiled_release");
  need(reinterpret_cast<const void*>(api->compiled_execute), "compiled_execute");
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) join(&list, "'" + m + "'");
    f.refuse("required entries", StatusCode::kFailedPrecondition,
             missing.size() == 1 ? "required entry " + list + " is NULL" : "required entries " + list + " are NULL");
    return f;
  }
  f.pass("required entries", "all 8 present");
  if (!answer.plugin) {
    f.refuse("entry", StatusCode::kInternal, "the entry returned no plugin object");
    return f;
  }
  check_optional_entries(*api, f);
  return f;
}

namespace {

// A plugin and the table it is read through.
struct PluginRef {
  const kiln_backend_api_t& api;
  kiln_plugin_t* plugin;
  bool probe;  // also call what the loader never calls (the kit: a device out of range)
};

void read_identity(PluginRef p, BackendInfo* info, ContractFindings& f) {
  kiln_plugin_info_t pi;
  std::memset(&pi, 0, sizeof(pi));
  pi.struct_size = sizeof(pi);
  Status st = take_status(p.api.plugin_get_info(p.plugin, &pi), "plugin_get_info");
  if (!st.is_ok()) return refuse_status(f, "info", st);
  info->name = copy_str(pi.name);
  info->version = copy_str(pi.version);
  info->vendor = copy_str(pi.vendor);
  info->vendor_sdk_version = copy_str(pi.vendor_sdk_version);
  info->description = copy_str(pi.description);
  info->priority = pi.priority;
  info->no_unload = (pi.flags & KILN_PLUGIN_NO_UNLOAD) != 0;
  info->shared_instances = (pi.flags & KILN_PLUGIN_SHARED_INSTANCES) != 0;
  if (!valid_name(info->name)) {
    f.refuse("info", StatusCode::kInvalidArgument,
             "plugin_get_info: name '" + info->name + "' is not valid (1 to 64 characters of a-z, 0-9 and _)");
  } else if (info->name == "portable") {
    f.refuse("info", StatusCode::kInvalidArgument, "plugin_get_info: the name 'portable' is reserved");
  } else if (info->version.empty()) {
    f.problem("info", "no version");
  } else {
    f.pass("info", info->name + " " + info->version + " (" + (pi.vendor ? info->vendor : "(null)") + "), priority " +
                       std::to_string(info->priority));
  }
}

// The loader records an unavailable plugin; only KILN_STATUS_UNAVAILABLE with
// a reason keeps the contract.
// plugin_is_available on a thread of its own, waited for at most
// probe_timeout_ms(). nullopt when it did not answer in time: the thread is
// left inside the plugin (detached; it frees its status if it ever returns).
std::optional<Status> probe_available(PluginRef p) {
  const int64_t timeout = probe_timeout_ms();
  if (timeout <= 0) return take_status(p.api.plugin_is_available(p.plugin));
  struct Probe {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false, abandoned = false;
    kiln_status_t* status = nullptr;
  };
  auto probe = std::make_shared<Probe>();
  std::thread([probe, fn = p.api.plugin_is_available, plugin = p.plugin] {
    kiln_status_t* st = fn(plugin);
    std::lock_guard<std::mutex> lock(probe->mu);
    if (probe->abandoned) {
      (void)take_status(st);  // nobody waits for it any more
      return;
    }
    probe->status = st;
    probe->done = true;
    probe->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(probe->mu);
  if (!probe->cv.wait_for(lock, std::chrono::milliseconds(timeout), [&] { return probe->done; })) {
    probe->abandoned = true;
    return std::nullopt;
  }
  return take_status(probe->status);
}

void read_availability(PluginRef p, BackendInfo* info, ContractFindings& f) {
  info->available = true;
  info->unavailable_reason.clear();
  if (!p.api.plugin_is_available) return f.pass("availability", "no is_available: always available");
  std::optional<Status> answer = probe_available(p);
  if (!answer) {
    info->available = false;
    info->unavailable_reason = "is_available did not answer within " + std::to_string(probe_timeout_ms()) +
                               " ms (KILN_PLUGIN_PROBE_TIMEOUT_MS); the plugin is kept loaded but never called "
                               "again, since a thread is still inside it";
    f.problem("availability", info->unavailable_reason);
    f.mark_hung();
    return;
  }
  Status st = std::move(*answer);
  if (st.is_ok()) return f.pass("availability", "available");
  info->available = false;
  info->unavailable_reason = st.message();
  if (st.message().empty() || st.message() == "(no message)") {
    f.problem("availability", "unavailable without a reason");
  } else if (st.code() != StatusCode::kUnavailable) {
    f.problem("availability", std::string("is_available failed with ") + status_code_name(st.code()) +
                                  " (only KILN_STATUS_UNAVAILABLE means unavailable): " + st.message());
  } else {
    f.pass("availability", "unavailable: " + st.message());
  }
}

void read_devices(PluginRef p, BackendInfo* info, ContractFindings& f) {
  if (!p.api.plugin_get_device_count || !p.api.plugin_get_device_info) {
    info->devices.push_back({"default", "cpu", "the plugin declares no devices"});
    return f.pass("devices", "none declared: one default device");
  }
  size_t n = 0;
  Status st = take_status(p.api.plugin_get_device_count(p.plugin, &n), "plugin_get_device_count");
  if (!st.is_ok()) return refuse_status(f, "devices", st);
  if (n == 0) {
    // No device here (1.1): the plugin loads, unavailable, with its reason.
    if (!info->available) return f.pass("devices", "none found; unavailable: " + info->unavailable_reason);
    info->available = false;
    info->unavailable_reason = "it found no device";
    return f.problem("devices", "0 devices while is_available says available (return KILN_STATUS_UNAVAILABLE "
                                "saying why no device was found)");
  }
  if (n > kMaxListed) {
    return f.refuse("devices", StatusCode::kInvalidArgument,
                    "plugin_get_device_count: " + std::to_string(n) + " devices (0 to 4096 expected)");
  }
  std::string detail, unnamed;
  for (size_t i = 0; i < n; ++i) {
    kiln_device_info_t d;
    std::memset(&d, 0, sizeof(d));
    d.struct_size = sizeof(d);
    st = take_status(p.api.plugin_get_device_info(p.plugin, i, &d), "plugin_get_device_info");
    if (!st.is_ok()) return refuse_status(f, "devices", st);
    info->devices.push_back(device_of(d));
    if (!d.name || !*d.name) unnamed = "device " + std::to_string(i) + " has no name";
    join(&detail, std::to_string(i) + ": " + copy_str(d.name));
  }
  kiln_device_info_t d;
  std::memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  if (!unnamed.empty()) f.problem("devices", unnamed);
  else if (p.probe && take_status(p.api.plugin_get_device_info(p.plugin, n, &d)).is_ok())
    f.problem("devices", "device " + std::to_string(n) + " (out of range) did not fail");
  else f.pass("devices", detail);
}

// One option's declaration: a refusal, a problem (no doc) or "".
void check_option(const BackendInfo& info, const kiln_option_info_t& o, size_t i, const BackendOptionInfo& oi,
                  ContractFindings& f) {
  const char* check = "option schema";
  if (!valid_name(oi.name)) return f.refuse(check, StatusCode::kInvalidArgument, "option " + std::to_string(i) + ": name '" + oi.name + "' is not valid");
  if (oi.name == "device") return f.refuse(check, StatusCode::kInvalidArgument, "option 'device' is reserved for the host");
  if (oi.type.empty()) return f.refuse(check, StatusCode::kInvalidArgument, "option '" + oi.name + "': unknown type " + std::to_string(o.type));
  if (!option_value_parses(oi.type, oi.default_value)) {
    return f.refuse(check, StatusCode::kInvalidArgument,
                    "option '" + oi.name + "': default '" + oi.default_value + "' is not a valid " + oi.type);
  }
  for (const BackendOptionInfo& prev : info.options)
    if (prev.name == oi.name) return f.refuse(check, StatusCode::kInvalidArgument, "option '" + oi.name + "' is declared twice");
  if (oi.doc.empty()) f.problem(check, "option '" + oi.name + "' has no doc");
}

void read_options(PluginRef p, BackendInfo* info, ContractFindings& f) {
  if (!p.api.plugin_get_option_count || !p.api.plugin_get_option_info) {
    return f.pass("option schema", "no schema: takes no options");
  }
  size_t n = 0;
  Status st = take_status(p.api.plugin_get_option_count(p.plugin, &n), "plugin_get_option_count");
  if (!st.is_ok()) return refuse_status(f, "option schema", st);
  if (n > kMaxListed) {
    return f.refuse("option schema", StatusCode::kInvalidArgument, "plugin_get_option_count: " + std::to_string(n) + " options");
  }
  const size_t before = f.items().size();
  std::string detail;
  for (size_t i = 0; i < n; ++i) {
    kiln_option_info_t o;
    std::memset(&o, 0, sizeof(o));
    o.struct_size = sizeof(o);
    st = take_status(p.api.plugin_get_option_info(p.plugin, i, &o), "plugin_get_option_info");
    if (!st.is_ok()) return refuse_status(f, "option schema", st);
    BackendOptionInfo oi{copy_str(o.name), option_type_name(o.type), copy_str(o.default_value), copy_str(o.doc)};
    check_option(*info, o, i, oi, f);
    if (f.refused()) return;
    join(&detail, oi.name + " (" + (oi.type.empty() ? "?" : oi.type) + " = " + copy_str(o.default_value) + ")");
    info->options.push_back(std::move(oi));
  }
  if (f.items().size() == before) f.pass("option schema", n == 0 ? "no options" : detail);
}

void read_custom_ops(PluginRef p, BackendInfo* info, ContractFindings& f) {
  if (!p.api.plugin_get_custom_op_count || !p.api.plugin_get_custom_op_info) return;
  size_t n = 0;
  Status st = take_status(p.api.plugin_get_custom_op_count(p.plugin, &n), "plugin_get_custom_op_count");
  if (!st.is_ok()) return refuse_status(f, "custom ops", st);
  if (n > kMaxListed) {
    return f.refuse("custom ops", StatusCode::kInvalidArgument, "plugin_get_custom_op_count: " + std::to_string(n) + " ops");
  }
  std::string detail;
  for (size_t i = 0; i < n; ++i) {
    kiln_custom_op_info_t c;
    std::memset(&c, 0, sizeof(c));
    c.struct_size = sizeof(c);
    st = take_status(p.api.plugin_get_custom_op_info(p.plugin, i, &c), "plugin_get_custom_op_info");
    if (!st.is_ok()) return refuse_status(f, "custom ops", st);
    BackendCustomOpInfo ci{copy_str(c.domain), copy_str(c.op_type), c.since_version, copy_str(c.doc)};
    if (ci.domain.empty() || ci.domain == "ai.onnx" || ci.domain == "ai.onnx.ml" || ci.op_type.empty()) {
      return f.refuse("custom ops", StatusCode::kInvalidArgument,
                      "custom op " + std::to_string(i) + " ('" + ci.domain + "', '" + ci.op_type +
                          "') must name an op of the plugin's own domain");
    }
    join(&detail, ci.domain + "." + ci.op_type);
    info->custom_ops.push_back(std::move(ci));
  }
  f.pass("custom ops", detail.empty() ? "none" : detail);
}

}  // namespace

ContractFindings read_plugin_info(const kiln_backend_api_t& api, kiln_plugin_t* plugin, BackendInfo* info,
                                  bool stop_at_refusal) {
  ContractFindings all;
  const PluginRef p{api, plugin, !stop_at_refusal};
  using Reader = void (*)(PluginRef, BackendInfo*, ContractFindings&);
  for (Reader read : {read_identity, read_availability, read_devices, read_options, read_custom_ops}) {
    ContractFindings f;
    read(p, info, f);
    all.append(f);
    if ((stop_at_refusal && f.refused()) || f.hung()) return all;
  }
  info->supports_export = api.compiled_export && api.instance_import;
  return all;
}

}  // namespace kiln::runtime
