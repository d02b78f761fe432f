#include "runtime/backends/registry.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace kiln {

namespace fs = std::filesystem;

const char* fallback_policy_name(FallbackPolicy p) { return p == FallbackPolicy::kRequire ? "require" : "allow"; }

Result<FallbackPolicy> parse_fallback_policy(std::string_view text) {
  if (text == "allow") return FallbackPolicy::kAllow;
  if (text == "require") return FallbackPolicy::kRequire;
  return invalid_argument("fallback policy must be 'allow' or 'require', got '", text, "'");
}

Result<BackendOption> parse_backend_option(std::string_view text) {
  size_t dot = text.find('.');
  size_t eq = text.find('=');
  if (dot == std::string_view::npos || eq == std::string_view::npos || dot > eq || dot == 0 || eq == dot + 1) {
    return invalid_argument("backend option '", text, "' must look like NAME.KEY=VALUE (e.g. template.max_group_size=4)");
  }
  return BackendOption{std::string(text.substr(0, dot)), std::string(text.substr(dot + 1, eq - dot - 1)),
                       std::string(text.substr(eq + 1))};
}

Result<std::vector<std::string>> parse_backend_list(std::string_view text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    if (end == start) return invalid_argument("--backends '", text, "' has an empty name (write e.g. template,portable)");
    names.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return names;
}

namespace runtime {

std::string unsafe_plugin_location(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";  // not there: the loader names that
  auto octal = [](mode_t m) {
    char b[8];
    std::snprintf(b, sizeof(b), "%04o", static_cast<unsigned>(m & 07777));
    return std::string(b);
  };
  if (S_ISDIR(st.st_mode)) {
    if (st.st_mode & S_IWOTH) {
      return "plugin folder is writable by every user (mode " + octal(st.st_mode) +
             "): anyone could plant a library there; refused (chmod o-w it, or name the plugin file itself)";
    }
    return "";
  }
  if (st.st_mode & S_IWOTH) {
    return "plugin file is writable by every user (mode " + octal(st.st_mode) + "); refused (chmod o-w it)";
  }
  const std::string dir = fs::path(path).parent_path().string();
  struct stat ds;
  if (::stat(dir.empty() ? "." : dir.c_str(), &ds) == 0 && (ds.st_mode & S_IWOTH) && !(ds.st_mode & S_ISVTX)) {
    return "plugin file is in a folder writable by every user without the sticky bit (mode " + octal(ds.st_mode) +
           "): anyone could replace it; refused";
  }
  return "";
}

std::vector<std::string> default_backend_dirs() {
  std::vector<std::string> dirs;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path().parent_path() / "lib" / "kiln" / "backends").string());
#ifdef KILN_INSTALL_BACKEND_DIR
  dirs.push_back(KILN_INSTALL_BACKEND_DIR);
#endif
#ifdef KILN_BUILD_DIR
  // The build tree's plugins, only for executables that live in the build tree.
  if (!ec) {
    std::string e = exe.string(), b = fs::weakly_canonical(KILN_BUILD_DIR, ec).string();
    if (!ec && !b.empty() && e.rfind(b + "/", 0) == 0) dirs.push_back(b + "/lib/kiln/backends");
  }
#endif
  return dirs;
}

}  // namespace runtime

Status BackendRegistry::Impl::add(std::shared_ptr<runtime::LoadedPlugin> plugin) {
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& p : plugins) {
    if (p->name() == plugin->name()) {
      Status st = make_status(StatusCode::kFailedPrecondition, "duplicate backend name '", plugin->name(),
                              "': already loaded from ", p->path(), "; this one is ignored");
      errors.push_back({plugin->path(), st.message()});
      return st;
    }
  }
  plugins.push_back(std::move(plugin));
  return Status::ok();
}

Status BackendRegistry::Impl::load_file(const std::string& given) {
  std::error_code ec;
  // Always an absolute path: dlopen of a bare name would search the library path instead.
  const std::string path = fs::absolute(given, ec).lexically_normal().string();
  if (ec || path.empty()) return invalid_argument("cannot make an absolute path of '", given, "'");
  std::string canonical = fs::weakly_canonical(path, ec).string();
  if (ec) canonical = path;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (std::find(seen_paths.begin(), seen_paths.end(), canonical) != seen_paths.end()) return Status::ok();
    seen_paths.push_back(canonical);
  }
  if (std::string why = runtime::unsafe_plugin_location(path); !why.empty()) {
    Status st = make_status(StatusCode::kFailedPrecondition, why);
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back({path, st.message()});
    return std::move(st).with_context(path);
  }
  auto loaded = runtime::LoadedPlugin::load(path, load_options);
  if (!loaded.is_ok()) {
    Status st = std::move(loaded).status();
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back({path, st.message()});
    return std::move(st).with_context(path);
  }
  return add(std::move(loaded).value());
}

Status BackendRegistry::Impl::add_entry(kiln_backend_entry_fn entry, const std::string& origin) {
  auto loaded = runtime::LoadedPlugin::from_entry(entry, origin, load_options);
  if (!loaded.is_ok()) {
    Status st = std::move(loaded).status();
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back({origin, st.message()});
    return std::move(st).with_context(origin);
  }
  return add(std::move(loaded).value());
}

Result<std::shared_ptr<runtime::BackendInstance>> BackendRegistry::Impl::instance_for(
    const std::shared_ptr<runtime::LoadedPlugin>& plugin, size_t device,
    const std::vector<std::pair<std::string, std::string>>& options) {
  if (!plugin->info().shared_instances) return plugin->create_instance(device, options);
  // The key: name, device and the options in key order (the order a session
  // listed them in does not make another instance; for one key, the order
  // of its values does).
  std::vector<std::pair<std::string, std::string>> sorted = options;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string key = plugin->name() + '\n' + std::to_string(device);
  for (const auto& [k, v] : sorted) {
    key += '\n' + std::to_string(k.size()) + ':' + k;
    key += '=' + std::to_string(v.size()) + ':' + v;
  }
  std::lock_guard<std::mutex> lock(instances_mu);
  for (auto it = shared_instances.begin(); it != shared_instances.end();) {  // forget released ones
    it = it->second.expired() ? shared_instances.erase(it) : std::next(it);
  }
  auto it = shared_instances.find(key);
  if (it != shared_instances.end()) {
    if (auto inst = it->second.lock()) return inst;
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::BackendInstance> inst, plugin->create_instance(device, options));
  shared_instances[key] = inst;
  return inst;
}

std::shared_ptr<runtime::LoadedPlugin> BackendRegistry::Impl::find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& p : plugins)
    if (p->name() == name) return p;
  return nullptr;
}

std::vector<std::shared_ptr<runtime::LoadedPlugin>> BackendRegistry::Impl::all() const {
  std::lock_guard<std::mutex> lock(mu);
  return plugins;
}

std::string BackendRegistry::Impl::known_names() const {
  std::lock_guard<std::mutex> lock(mu);
  std::string s;
  for (const auto& p : plugins) s += (s.empty() ? "" : ", ") + p->name() + " (" + p->path() + ")";
  return s.empty() ? "none" : s;
}

BackendRegistry::BackendRegistry() : impl_(std::make_unique<Impl>()) {}
BackendRegistry::~BackendRegistry() = default;

std::shared_ptr<BackendRegistry> BackendRegistry::create(const BackendDiscovery& discovery) {
  std::shared_ptr<BackendRegistry> r(new BackendRegistry());
  Impl& impl = *r->impl_;
  auto scan = [&](const std::string& dir, bool explicit_path) {
    std::error_code ec;
    if (fs::path(dir).is_relative() && !explicit_path) {
      impl.errors.push_back({dir, "relative folder in KILN_BACKEND_PATH refused: plugins are found through absolute "
                                  "paths only (give a relative one explicitly, e.g. --backend-path, to mean it)"});
      return;
    }
    if (!fs::is_directory(dir, ec)) {
      if (fs::exists(dir, ec)) {
        (void)impl.load_file(dir);
      } else if (explicit_path) {
        impl.errors.push_back({dir, "file or folder not found"});
      }
      return;
    }
    std::string canon = fs::weakly_canonical(fs::absolute(dir, ec), ec).string();
    if (ec) canon = dir;
    if (std::find(impl.dirs.begin(), impl.dirs.end(), canon) != impl.dirs.end()) return;
    if (std::string why = runtime::unsafe_plugin_location(canon); !why.empty()) {
      impl.errors.push_back({dir, why});
      return;
    }
    impl.dirs.push_back(canon);
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".so" && !e.is_directory(ec)) files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) (void)impl.load_file(f);
  };
  for (const std::string& p : discovery.paths) scan(p, true);
  if (discovery.use_environment) {
    if (const char* env = std::getenv("KILN_BACKEND_PATH")) {
      std::string s(env);
      size_t start = 0;
      while (start <= s.size()) {
        size_t end = s.find(':', start);
        if (end == std::string::npos) end = s.size();
        if (end > start) scan(s.substr(start, end - start), fs::path(s.substr(start, end - start)).is_absolute());
        start = end + 1;
      }
    }
  }
  if (discovery.use_default_dirs) {
    for (const std::string& d : runtime::default_backend_dirs()) scan(d, false);
  }
  return r;
}

Status BackendRegistry::load(const std::string& path) { return impl_->load_file(path); }

std::vector<BackendInfo> BackendRegistry::backends() const {
  std::vector<BackendInfo> out;
  for (const auto& p : impl_->all()) out.push_back(p->info());
  return out;
}

Result<BackendInfo> BackendRegistry::find(std::string_view name) const {
  auto p = impl_->find(name);
  if (!p) return not_found("no backend named '", name, "'; loaded: ", impl_->known_names());
  return p->info();
}

std::vector<BackendLoadError> BackendRegistry::errors() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->errors;
}

std::vector<std::string> BackendRegistry::search_dirs() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->dirs;
}

}  // namespace kiln
