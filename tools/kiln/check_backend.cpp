// kiln check-backend LIB.so: loads any plugin and checks its contract.
// This file: the command, group isolation (fork), the ABI, lifecycle and
// unload groups. check_backend_exec.cpp: capability, execute, node tests.
#include "check_backend.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "runtime/backends/host.h"
#include "runtime/backends/registry.h"

namespace kiln::cli {
namespace check {

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
  reg->impl().load_options = capture.load_options();
  KILN_RETURN_IF_ERROR(reg->impl().load_file(o.library));
  return reg;
}

namespace {

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

std::string str(const char* s) { return s ? s : "(null)"; }

// Calls a plugin entry that returned a status: converts and frees it.
Status take(kiln_status_t* st) { return runtime::take_status(st); }

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

  // A host that speaks only a future major: the plugin must say no.
  {
    args.min_abi_major = args.max_abi_major = KILN_BACKEND_ABI_MAJOR + 1;
    const kiln_backend_api_t* t = nullptr;
    kiln_plugin_t* p = nullptr;
    Status st = take(entry(&args, &t, &p));
    if (!st.is_ok()) {
      r.pass("entry refuses an ABI it does not speak", st.message());
    } else {
      r.fail("entry refuses an ABI it does not speak",
             "asked for ABI " + std::to_string(KILN_BACKEND_ABI_MAJOR + 1) + ".x only, it returned a table of " +
                 (t ? std::to_string(t->header.abi_major) + "." + std::to_string(t->header.abi_minor) : "(none)") +
                 " instead of an error");
      if (t && p && t->header.abi_major == KILN_BACKEND_ABI_MAJOR && t->plugin_release) t->plugin_release(p);
    }
  }
  args.min_abi_major = KILN_BACKEND_ABI_MAJOR;
  args.min_abi_minor = 0;
  args.max_abi_major = KILN_BACKEND_ABI_MAJOR;
  args.max_abi_minor = KILN_BACKEND_ABI_MINOR;
  const kiln_backend_api_t* table = nullptr;
  kiln_plugin_t* plugin = nullptr;
  Status st = take(entry(&args, &table, &plugin));
  if (!st.is_ok() || !table || !plugin) {
    r.fail("entry", st.is_ok() ? "returned no table or no plugin object" : "init failed: " + st.message());
    dlclose(dl);
    return;
  }
  r.pass("entry", "returned a table and a plugin object");
  const kiln_abi_header_t h = table->header;
  const std::string versions = "plugin " + std::to_string(h.abi_major) + "." + std::to_string(h.abi_minor) +
                               ", host " + std::to_string(KILN_BACKEND_ABI_MAJOR) + "." +
                               std::to_string(KILN_BACKEND_ABI_MINOR);
  if (h.abi_major != KILN_BACKEND_ABI_MAJOR) {
    r.fail("abi version", "major mismatch: " + versions + " (the host would refuse it)");
    dlclose(dl);  // the table's layout is unknown: nothing in it is called
    return;
  }
  const int plugin_minor = h.abi_minor, host_minor = KILN_BACKEND_ABI_MINOR;
  std::string skew = plugin_minor > host_minor   ? " (newer plugin: the host reads what it knows)"
                     : plugin_minor < host_minor ? " (older plugin: later entries count as NULL)"
                                                 : "";
  r.pass("abi version", versions + skew);
  const size_t min_size = offsetof(kiln_backend_api_t, compiled_execute) + sizeof(void*);
  if (h.struct_size < min_size) {
    r.fail("table size", std::to_string(h.struct_size) + " bytes; every 1.x table has at least " +
                             std::to_string(min_size));
    dlclose(dl);
    return;
  }
  r.pass("table size", std::to_string(h.struct_size) + " bytes (host table: " + std::to_string(sizeof(kiln_backend_api_t)) + ")");
  kiln_backend_api_t api{};
  std::memcpy(&api, table, std::min<size_t>(h.struct_size, sizeof(api)));

  std::string missing;
  auto need = [&](const void* f, const char* n) {
    if (!f) missing += (missing.empty() ? "" : ", ") + std::string(n);
  };
  need(reinterpret_cast<const void*>(api.plugin_release), "plugin_release");
  need(reinterpret_cast<const void*>(api.plugin_get_info), "plugin_get_info");
  need(reinterpret_cast<const void*>(api.instance_create), "instance_create");
  need(reinterpret_cast<const void*>(api.instance_release), "instance_release");
  need(reinterpret_cast<const void*>(api.instance_get_capability), "instance_get_capability");
  need(reinterpret_cast<const void*>(api.instance_compile), "instance_compile");
  need(reinterpret_cast<const void*>(api.compiled_release), "compiled_release");
  need(reinterpret_cast<const void*>(api.compiled_execute), "compiled_execute");
  if (!missing.empty()) {
    r.fail("required entries", "NULL: " + missing);
    dlclose(dl);
    return;
  }
  r.pass("required entries", "all 8 present");

  std::string present, inconsistent;
  auto opt = [&](const void* f, const char* n) {
    if (f) present += (present.empty() ? "" : ", ") + std::string(n);
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
  if (!inconsistent.empty()) r.fail("optional entries", inconsistent);
  else r.pass("optional entries", present.empty() ? "none (defaults apply)" : present);

  kiln_plugin_info_t info{};
  info.struct_size = sizeof(info);
  st = take(api.plugin_get_info(plugin, &info));
  const std::string name = str(info.name);
  if (!st.is_ok()) r.fail("info", st.message());
  else if (!valid_name(name)) r.fail("info", "name '" + name + "' is not 1-64 characters of a-z, 0-9, _");
  else if (!info.version || !*info.version) r.fail("info", "no version");
  else r.pass("info", name + " " + info.version + " (" + str(info.vendor) + "), priority " + std::to_string(info.priority));

  if (api.plugin_is_available) {
    st = take(api.plugin_is_available(plugin));
    if (st.is_ok()) r.pass("availability", "available");
    else if (st.message().empty() || st.message() == "(no message)") r.fail("availability", "unavailable without a reason");
    else if (st.code() != StatusCode::kUnavailable)
      r.fail("availability", std::string("is_available failed with ") + status_code_name(st.code()) +
                                 " (only KILN_STATUS_UNAVAILABLE means unavailable): " + st.message());
    else r.pass("availability", "unavailable: " + st.message());
  } else {
    r.pass("availability", "no is_available: always available");
  }

  if (api.plugin_get_device_count && api.plugin_get_device_info) {
    size_t n = 0;
    st = take(api.plugin_get_device_count(plugin, &n));
    std::string detail, problem = st.is_ok() ? "" : st.message();
    if (st.is_ok() && n == 0) problem = "zero devices";
    for (size_t i = 0; problem.empty() && i < n; ++i) {
      kiln_device_info_t d{};
      d.struct_size = sizeof(d);
      st = take(api.plugin_get_device_info(plugin, i, &d));
      if (!st.is_ok()) problem = "device " + std::to_string(i) + ": " + st.message();
      else if (!d.name || !*d.name) problem = "device " + std::to_string(i) + " has no name";
      else detail += (detail.empty() ? "" : ", ") + std::to_string(i) + ": " + d.name;
    }
    kiln_device_info_t d{};
    d.struct_size = sizeof(d);
    if (problem.empty() && take(api.plugin_get_device_info(plugin, n, &d)).is_ok())
      problem = "device " + std::to_string(n) + " (out of range) did not fail";
    if (problem.empty()) r.pass("devices", detail);
    else r.fail("devices", problem);
  } else {
    r.pass("devices", "none declared: one default device");
  }

  if (api.plugin_get_option_count && api.plugin_get_option_info) {
    size_t n = 0;
    st = take(api.plugin_get_option_count(plugin, &n));
    std::string problem = st.is_ok() ? "" : st.message(), detail;
    std::vector<std::string> names;
    for (size_t i = 0; problem.empty() && i < n; ++i) {
      kiln_option_info_t oi{};
      oi.struct_size = sizeof(oi);
      st = take(api.plugin_get_option_info(plugin, i, &oi));
      if (!st.is_ok()) {
        problem = "option " + std::to_string(i) + ": " + st.message();
        break;
      }
      BackendInfo probe;
      probe.name = name;
      const char* types[] = {"bool", "int", "float", "string"};
      std::string oname = str(oi.name);
      if (!valid_name(oname)) problem = "option name '" + oname + "' is not valid";
      else if (oi.type < 0 || oi.type > 3) problem = "option '" + oname + "' has unknown type " + std::to_string(oi.type);
      else if (std::find(names.begin(), names.end(), oname) != names.end()) problem = "option '" + oname + "' twice";
      else if (!oi.doc || !*oi.doc) problem = "option '" + oname + "' has no doc";
      else {
        probe.options.push_back({oname, types[oi.type], "", ""});
        Status pv = runtime::check_options(probe, {{oname, str(oi.default_value)}});
        if (!pv.is_ok()) problem = "default of '" + oname + "': " + pv.message();
      }
      names.push_back(oname);
      detail += (detail.empty() ? "" : ", ") + oname + " (" + (oi.type >= 0 && oi.type <= 3 ? types[oi.type] : "?") +
                " = " + str(oi.default_value) + ")";
    }
    if (problem.empty()) r.pass("option schema", n == 0 ? "no options" : detail);
    else r.fail("option schema", problem);
  } else {
    r.pass("option schema", "no schema: takes no options");
  }

  if (api.plugin_get_custom_op_count && api.plugin_get_custom_op_info) {
    size_t n = 0;
    st = take(api.plugin_get_custom_op_count(plugin, &n));
    std::string problem = st.is_ok() ? "" : st.message(), detail;
    for (size_t i = 0; problem.empty() && i < n; ++i) {
      kiln_custom_op_info_t c{};
      c.struct_size = sizeof(c);
      st = take(api.plugin_get_custom_op_info(plugin, i, &c));
      std::string d = str(c.domain);
      if (!st.is_ok()) problem = st.message();
      else if (d.empty() || d == "(null)" || d == "ai.onnx") problem = "custom op in domain '" + d + "'";
      else detail += (detail.empty() ? "" : ", ") + d + "." + str(c.op_type);
    }
    if (problem.empty()) r.pass("custom ops", detail.empty() ? "none" : detail);
    else r.fail("custom ops", problem);
  }

  api.plugin_release(plugin);
  runtime::HostStats s = host.stats();
  if (s.live_blocks != 0) {
    r.fail("plugin release", std::to_string(s.live_blocks) + " blocks (" + std::to_string(s.live_bytes) +
                                 " bytes) of host memory still allocated after plugin_release");
  } else {
    r.pass("plugin release", "all host memory returned (" + std::to_string(s.total_blocks) + " blocks)");
  }
  dlclose(dl);
}

void check_lifecycle(const Options& o, Report& r) {
  LogCapture capture;
  auto reg = load_for_check(o, capture);
  if (!reg.ok()) {
    r.fail("load through the runtime", reg.status().message());
    return;
  }
  std::shared_ptr<runtime::LoadedPlugin> p = (*reg)->impl().all().at(0);
  r.pass("load through the runtime", p->name() + " from " + p->path());
  const kiln_backend_api_t& api = p->api();
  if (!p->available()) {
    r.skip("create/release", "the plugin is not available here: " + p->info().unavailable_reason);
    return;
  }
  const int64_t before = p->stats().live_blocks;
  std::string problem;
  for (int i = 0; i < 3 && problem.empty(); ++i) {
    auto inst = p->create_instance(0, {});
    if (!inst.ok()) problem = inst.status().message();
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
    auto inst = p->create_instance(0, {});
    std::string problem2;
    if (!inst.ok()) {
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
        if (!v.ok()) problem2 = "get_property('" + oi.name + "'): " + v.status().message();
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
  LogCapture capture;
  {
    auto reg = load_for_check(o, capture);
    if (!reg.ok()) {
      r.fail("unload", reg.status().message());
      return;
    }
    auto p = (*reg)->impl().all().at(0);
    name = p->name();
    if (p->available()) {
      auto inst = p->create_instance(0, {});
      if (!inst.ok()) r.fail("unload", "create_instance: " + inst.status().message());
    }
  }  // every object released: the library must be unmapped
  void* still = dlopen(o.library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (still) {
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
  if (!reg.ok()) {
    r.fail("reload", reg.status().message());
    return;
  }
  auto p = (*reg)->impl().all().at(0);
  if (p->name() != name) {
    r.fail("reload", "the name changed from '" + name + "' to '" + p->name() + "'");
  } else if (p->available()) {
    auto inst = p->create_instance(0, {});
    r.expect(inst.ok(), "reload", inst.ok() ? "load -> unload -> load, then create works" : inst.status().message());
  } else {
    r.pass("reload", "load -> unload -> load");
  }
}

namespace {

// Runs `group` in a child process; its rows come back through a pipe. A
// child killed by a signal adds a failure naming the signal.
void run_isolated(const std::string& title, void (*group)(const Options&, Report&), const Options& o, Report& r) {
  int fds[2];
  if (pipe(fds) != 0) {
    r.fail(title, std::string("pipe: ") + std::strerror(errno));
    return;
  }
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = fork();
  if (pid < 0) {
    r.fail(title, std::string("fork: ") + std::strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    Report child;
    child.sink = [fd = fds[1]](const Row& row) {
      std::string line = std::to_string(static_cast<int>(row.outcome)) + "|" + row.check + "|" + row.detail + "\n";
      size_t off = 0;
      while (off < line.size()) {
        ssize_t n = write(fd, line.data() + off, line.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
    };
    group(o, child);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string data;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0) data.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  size_t start = 0;
  while (start < data.size()) {
    size_t end = data.find('\n', start);
    if (end == std::string::npos) break;
    std::string line = data.substr(start, end - start);
    size_t a = line.find('|'), b = line.find('|', a + 1);
    if (a != std::string::npos && b != std::string::npos) {
      r.add(line.substr(a + 1, b - a - 1), static_cast<Outcome>(std::stoi(line.substr(0, a))), line.substr(b + 1));
    }
    start = end + 1;
  }
  if (WIFSIGNALED(status)) {
    r.fail(title + " crashed", std::string("the plugin killed the process with ") + strsignal(WTERMSIG(status)) +
                                   " (after the checks above)");
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.fail(title + " crashed", "the check process exited with status " + std::to_string(WEXITSTATUS(status)));
  }
}

constexpr const char* kUsage = R"(usage: kiln check-backend LIB.so [options]

Loads a backend plugin and checks its contract: table sizes and versions,
info, devices and option schema, create/release pairs under a tracking
allocator, error paths (bad options, unknown properties, compiling a group it
did not claim, executing with wrong inputs), every ONNX node test whose nodes
the plugin claims (through the plugin and through portable kernels,
compared), export/import, concurrent execute under the declared concurrency,
and unload -> reload. Each group runs in its own process: a crash fails it.

  --suite DIR         ONNX node tests to run (default: the libonnx-testdata
                      node tests, /usr/include/onnx/backend/test/data/node)
  --no-suite          skip the node tests
  --filter TEXT       only node tests whose name contains TEXT
)";

constexpr FlagSpec kFlags[] = {{"--suite", true, false},
                               {"--no-suite", false, false},
                               {"--filter", true, false},
                               {"--help", false, false}};

const char* outcome_name(Outcome o) {
  return o == Outcome::kPass ? "pass" : o == Outcome::kFail ? "FAIL" : "skip";
}

}  // namespace
}  // namespace check

int check_backend_command(std::span<const std::string> argv) {
  using namespace check;
  Result<Args> parsed = Args::parse(argv, kFlags, "check-backend");
  if (!parsed.ok()) return cli::fail(parsed.status().message(), kExitUsage);
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (args.positionals().size() != 1) return cli::fail("kiln check-backend needs one LIB.so (see --help)", kExitUsage);
  Options o;
  o.library = args.positionals()[0];
  std::error_code ec;
  if (!std::filesystem::exists(o.library, ec)) return cli::fail("plugin file '" + o.library + "' does not exist");
  o.library = std::filesystem::absolute(o.library, ec).string();
  o.suite = args.value("--suite").value_or("/usr/include/onnx/backend/test/data/node");
  if (args.has("--no-suite")) o.suite.clear();
  o.filter = args.value("--filter").value_or("");

  std::cout << "kiln check-backend " << o.library << "\n";
  Report r;
  run_isolated("abi", &check_abi, o, r);
  // Later groups need a plugin the host can load at all.
  bool loads = true;
  for (const Row& row : r.rows()) {
    static const char* const fatal[] = {"load library", "entry symbol", "entry", "abi version",
                                        "table size", "required entries", "abi crashed"};
    for (const char* f : fatal) loads &= !(row.outcome == Outcome::kFail && row.check == f);
  }
  struct Group {
    const char* title;
    void (*fn)(const Options&, Report&);
  };
  const Group groups[] = {{"lifecycle", &check_lifecycle}, {"capability", &check_capability},
                          {"execute", &check_execute},     {"node tests", &check_node_tests},
                          {"unload", &check_unload}};
  for (const Group& g : groups) {
    if (!loads) {
      r.skip(g.title, "the plugin does not load (see above)");
      continue;
    }
    run_isolated(g.title, g.fn, o, r);
  }
  std::vector<std::vector<std::string>> rows{{"CHECK", "RESULT", "DETAIL"}};
  size_t passed = 0, failed = 0, skipped = 0;
  for (const Row& row : r.rows()) {
    std::string detail = row.detail.size() > 160 ? row.detail.substr(0, 157) + "..." : row.detail;
    rows.push_back({row.check, outcome_name(row.outcome), detail});
    passed += row.outcome == Outcome::kPass;
    failed += row.outcome == Outcome::kFail;
    skipped += row.outcome == Outcome::kSkip;
  }
  print_table(rows);
  std::cout << passed << " passed, " << failed << " failed";
  if (skipped) std::cout << ", " << skipped << " skipped";
  std::cout << "\n";
  return failed == 0 ? kExitOk : kExitFailure;
}

}  // namespace kiln::cli
