// The backend conformance kit (kiln/backend_check.h): the report, loading the
// plugin under test, and the groups that load and unload it: abi (through
// the contract's validators, plugin_contract.h), lifecycle and unload.
// backend_check_exec.cpp: the groups that compile and execute.
#include "kiln/backend_check.h"

#include <dlfcn.h>

#include <cstring>

#include "runtime/backends/backend_check_util.h"
#include "runtime/backends/host.h"
#include "runtime/backends/plugin_contract.h"
#include "runtime/backends/registry.h"

namespace kiln::backend_check {

void Report::add(std::string check, Outcome o, std::string detail) {
  for (char& c : detail)
    if (c == '\n' || c == '\r') c = ' ';
  rows_.push_back({std::move(check), o, std::move(detail)});
  if (sink) sink(rows_.back());
}

size_t Report::failures() const {
  size_t n = 0;
  for (const Row& r : rows_) n += r.outcome == Outcome::kFail;
  return n;
}

std::string encode_row(const Row& row) {
  return std::to_string(static_cast<int>(row.outcome)) + "|" + row.check + "|" + row.detail + "\n";
}

void decode_rows(const std::string& data, Report& r) {
  size_t start = 0;
  while (start < data.size()) {
    size_t end = data.find('\n', start);
    if (end == std::string::npos) break;
    std::string line = data.substr(start, end - start);
    size_t a = line.find('|'), b = line.find('|', a + 1);
    if (a != std::string::npos && b != std::string::npos && a > 0 && line.find_first_not_of("0123456789") >= a) {
      const int o = std::stoi(line.substr(0, a));
      if (o >= 0 && o <= 2) r.add(line.substr(a + 1, b - a - 1), static_cast<Outcome>(o), line.substr(b + 1));
    }
    start = end + 1;
  }
}

bool loads(const Report& abi_rows) {
  static const char* const fatal[] = {"load library", "entry symbol", "entry", "abi version",
                                      "table size", "required entries", "abi crashed"};
  for (const Row& row : abi_rows.rows())
    for (const char* f : fatal)
      if (row.outcome == Outcome::kFail && row.check == f) return false;
  return true;
}

runtime::PluginLoadOptions LogCapture::load_options() {
  runtime::PluginLoadOptions o;
  o.log_level = KILN_LOG_WARNING;
  o.log_sink = [this](kiln_log_level_t, const std::string&, const std::string& m) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(m);
  };
  return o;
}

std::vector<std::string> LogCapture::find(const std::string& needle) {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<std::string> out;
  for (const std::string& l : lines)
    if (l.find(needle) != std::string::npos) out.push_back(l);
  return out;
}

Result<std::shared_ptr<BackendRegistry>> load_for_check(const Options& o, LogCapture& capture) {
  BackendDiscovery none;
  none.use_environment = false;
  none.use_default_dirs = false;
  std::shared_ptr<BackendRegistry> reg = BackendRegistry::create(none);
  runtime::registry_impl(*reg).load_options = capture.load_options();
  KILN_RETURN_IF_ERROR(runtime::registry_impl(*reg).load_file(o.library));
  return reg;
}

bool load_usable(const Options& o, LogCapture& capture, Report& r, const char* what, Loaded* out) {
  auto reg = load_for_check(o, capture);
  if (!reg.is_ok()) {
    r.fail(what, reg.status().message());
    return false;
  }
  out->registry = *reg;
  out->plugin = runtime::registry_impl(**reg).all().at(0);
  if (!out->plugin->available()) {
    r.skip(what, "the plugin is not available here: " + out->plugin->info().unavailable_reason);
    return false;
  }
  return true;
}

namespace {

// Calls a plugin entry that returned a status: converts and frees it.
Status take(kiln_status_t* st) { return runtime::take_status(st); }

void add_rows(const runtime::ContractFindings& findings, Report& r) {
  for (const runtime::ContractFinding& f : findings.items()) r.expect(f.ok, f.check, f.detail);
}

// A host that speaks only a future major: the plugin must say no.
void check_refuses_future_abi(kiln_backend_entry_fn entry, kiln_backend_entry_args_t args, Report& r) {
  args.min_abi_major = args.max_abi_major = KILN_BACKEND_ABI_MAJOR + 1;
  const kiln_backend_api_t* t = nullptr;
  kiln_plugin_t* p = nullptr;
  Status st = take(entry(&args, &t, &p));
  if (!st.is_ok()) return r.pass("entry refuses an ABI it does not speak", st.message());
  r.fail("entry refuses an ABI it does not speak",
         "asked for ABI " + std::to_string(KILN_BACKEND_ABI_MAJOR + 1) + ".x only, it returned a table of " +
             (t ? std::to_string(t->header.abi_major) + "." + std::to_string(t->header.abi_minor) : "(none)") +
             " instead of an error");
  if (t && p && t->header.abi_major == KILN_BACKEND_ABI_MAJOR && t->plugin_release) t->plugin_release(p);
}

// The entry's answer and the plugin's info, through the validators the loader
// uses. False when the library must stay loaded: a call never returned, or the
// plugin asks never to be unloaded (KILN_PLUGIN_NO_UNLOAD).
bool check_entry_and_info(kiln_backend_entry_fn entry, kiln_backend_entry_args_t args, Report& r) {
  args.min_abi_major = KILN_BACKEND_ABI_MAJOR;
  args.min_abi_minor = 0;
  args.max_abi_major = KILN_BACKEND_ABI_MAJOR;
  args.max_abi_minor = KILN_BACKEND_ABI_MINOR;
  runtime::EntryAnswer answer;
  Status st = take(entry(&args, &answer.table, &answer.plugin));
  kiln_backend_api_t api;
  const runtime::ContractFindings table = runtime::check_entry_answer(st, answer, &api);
  add_rows(table, r);
  if (table.refused()) {
    if (answer.plugin && api.plugin_release) api.plugin_release(answer.plugin);
    return true;
  }
  BackendInfo info;
  const runtime::ContractFindings found = runtime::read_plugin_info(api, answer.plugin, &info, /*stop_at_refusal=*/false);
  add_rows(found, r);
  if (found.hung()) return false;
  api.plugin_release(answer.plugin);
  runtime::HostStats s = args.host->stats();
  if (s.live_blocks != 0) {
    r.fail("plugin release", std::to_string(s.live_blocks) + " blocks (" + std::to_string(s.live_bytes) +
                                 " bytes) of host memory still allocated after plugin_release");
  } else {
    r.pass("plugin release", "all host memory returned (" + std::to_string(s.total_blocks) + " blocks)");
  }
  return !info.no_unload;
}

}  // namespace

void check_abi(const Options& o, Report& r) {
  dlerror();
  void* dl = dlopen(o.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* e = dlerror();
    r.fail("load library", e ? e : "dlopen failed");
    return;
  }
  r.pass("load library", "dlopen(RTLD_NOW | RTLD_LOCAL)");
  auto entry = reinterpret_cast<kiln_backend_entry_fn>(dlsym(dl, KILN_BACKEND_ENTRY_SYMBOL));
  if (!entry) {
    r.fail("entry symbol", std::string("not a Kiln plugin: no '") + KILN_BACKEND_ENTRY_SYMBOL + "' symbol");
    dlclose(dl);
    return;
  }
  r.pass("entry symbol", KILN_BACKEND_ENTRY_SYMBOL);
  LogCapture capture;
  kiln_host host;
  host.name = "check";
  host.sink = capture.load_options().log_sink;
  kiln_backend_entry_args_t args{};
  args.struct_size = sizeof(args);
  args.host_api = runtime::host_api();
  args.host = &host;
  check_refuses_future_abi(entry, args, r);
  if (!check_entry_and_info(entry, args, r)) return;  // a thread may still run its code: no dlclose
  dlclose(dl);
}

void check_lifecycle(const Options& o, Report& r) {
  LogCapture capture;
  auto reg = load_for_check(o, capture);
  if (!reg.is_ok()) {
    r.fail("load through the runtime", reg.status().message());
    return;
  }
  std::shared_ptr<runtime::LoadedPlugin> p = runtime::registry_impl(**reg).all().at(0);
  r.pass("load through the runtime", p->name() + " from " + p->path());
  const kiln_backend_api_t& api = p->api();
  if (!p->available()) {
    r.skip("create/release", "the plugin is not available here: " + p->info().unavailable_reason);
    return;
  }
  const int64_t before = p->stats().live_blocks;
  std::string problem;
  for (int i = 0; i < 3 && problem.empty(); ++i) {
    auto inst = p->create_instance(0, o.backend_options);
    if (!inst.is_ok()) problem = inst.status().message();
  }
  const int64_t leaked = p->stats().live_blocks - before;
  if (!problem.empty()) r.fail("create/release", problem);
  else if (leaked != 0) r.fail("create/release", std::to_string(leaked) + " host blocks leaked by 3 create/release pairs");
  else r.pass("create/release", "3 pairs, host memory balanced");

  auto raw_create = [&](const char* key, const char* value, size_t device, std::string* message) {
    kiln_instance_t* inst = nullptr;
    const char* keys[] = {key};
    const char* values[] = {value};
    Status st = runtime::take_status(api.instance_create(p->handle(), device, keys, values, key ? 1 : 0, &inst));
    if (inst) api.instance_release(inst);
    *message = st.message();
    return st.is_ok();
  };
  std::string msg;
  if (raw_create("kiln_check_no_such_option", "1", 0, &msg)) {
    r.fail("unknown option rejected", "instance_create accepted 'kiln_check_no_such_option'");
  } else if (!p->info().options.empty() && msg.find(p->info().options[0].name) == std::string::npos) {
    r.fail("unknown option rejected", "the error does not list the known options: " + msg);
  } else {
    r.pass("unknown option rejected", msg);
  }
  const BackendOptionInfo* typed = nullptr;
  for (const BackendOptionInfo& oi : p->info().options)
    if (oi.type != "string" && !typed) typed = &oi;
  if (!typed) {
    r.skip("invalid option value rejected", "no bool, int or float option");
  } else if (raw_create(typed->name.c_str(), "kiln-check-not-a-value", 0, &msg)) {
    r.fail("invalid option value rejected", typed->name + "=kiln-check-not-a-value was accepted");
  } else {
    r.pass("invalid option value rejected", msg);
  }
  if (raw_create(nullptr, nullptr, p->info().devices.size(), &msg)) {
    r.fail("missing device rejected", "device " + std::to_string(p->info().devices.size()) + " was accepted");
  } else {
    r.pass("missing device rejected", msg);
  }

  if (api.instance_set_property && api.instance_get_property) {
    auto inst = p->create_instance(0, o.backend_options);
    std::string problem2;
    if (!inst.is_ok()) {
      problem2 = inst.status().message();
    } else {
      kiln_instance_t* h = (*inst)->handle();
      char* out = nullptr;
      Status st = runtime::take_status(api.instance_get_property(h, "kiln_check_no_such_property", &out));
      if (out) runtime::host_free(p->host(), out);
      if (st.is_ok()) problem2 = "get_property of an unknown key succeeded";
      st = runtime::take_status(api.instance_set_property(h, "kiln_check_no_such_property", "1"));
      if (problem2.empty() && st.is_ok()) problem2 = "set_property of an unknown key succeeded";
      for (const BackendOptionInfo& oi : p->info().options) {
        if (!problem2.empty()) break;
        auto v = (*inst)->get_property(oi.name);
        if (!v.is_ok()) problem2 = "get_property('" + oi.name + "'): " + v.status().message();
        else if (Status s = (*inst)->set_property(oi.name, *v); !s.is_ok())
          problem2 = "set_property('" + oi.name + "', '" + *v + "'): " + s.message();
      }
    }
    if (problem2.empty()) r.pass("properties", "unknown keys rejected; every option reads and writes back");
    else r.fail("properties", problem2);
  } else {
    r.skip("properties", "the plugin has no set/get_property");
  }

  api.instance_release(nullptr);
  api.compiled_release(nullptr);
  api.plugin_release(nullptr);
  r.pass("release accepts NULL", "plugin_release, instance_release, compiled_release");
}

void check_unload(const Options& o, Report& r) {
  std::string name;
  bool no_unload = false;
  LogCapture capture;
  {
    auto reg = load_for_check(o, capture);
    if (!reg.is_ok()) {
      r.fail("unload", reg.status().message());
      return;
    }
    auto p = runtime::registry_impl(**reg).all().at(0);
    name = p->name();
    if (p->hung()) {
      r.skip("unload", "kept mapped on purpose: " + p->info().unavailable_reason);
      return;
    }
    no_unload = p->info().no_unload;
    if (p->available()) {
      auto inst = p->create_instance(0, o.backend_options);
      if (!inst.is_ok()) r.fail("unload", "create_instance: " + inst.status().message());
    }
  }  // every object released: the library must be unmapped
  void* still = dlopen(o.library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (still && no_unload) {
    dlclose(still);
    r.pass("unload", "kept mapped after the last release, as the plugin asks (KILN_PLUGIN_NO_UNLOAD)");
  } else if (still) {
    dlclose(still);
    r.fail("unload", "the library is still mapped after its last object was released (a leaked reference, or "
                     "STB_GNU_UNIQUE symbols: build with -fvisibility=hidden and export only the entry)");
  } else {
    r.pass("unload", "unmapped after the last release");
  }
  auto leaks = capture.find("leak:");
  if (leaks.empty()) r.pass("no leaks at unload", "host allocator balanced after plugin_release");
  else r.fail("no leaks at unload", leaks[0]);
  auto reg = load_for_check(o, capture);
  if (!reg.is_ok()) {
    r.fail("reload", reg.status().message());
    return;
  }
  auto p = runtime::registry_impl(**reg).all().at(0);
  if (p->name() != name) {
    r.fail("reload", "the name changed from '" + name + "' to '" + p->name() + "'");
  } else if (p->available()) {
    auto inst = p->create_instance(0, o.backend_options);
    r.expect(inst.is_ok(), "reload", inst.is_ok() ? "load -> unload -> load, then create works" : inst.status().message());
  } else {
    r.pass("reload", "load -> unload -> load");
  }
}

}  // namespace kiln::backend_check
