#include "runtime/compile_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/backends/content_key.h"

namespace kiln::runtime {
namespace fs = std::filesystem;

namespace {

constexpr char kEntryMagic[8] = {'K', 'I', 'L', 'N', 'C', 'C', 'H', '1'};
constexpr const char* kEntrySuffix = ".kcc";
// magic, u32 name length, u32 reserved, u64 blob size, 32-char checksum of
// the rest (backend name, blob)
constexpr size_t kEntryHeader = 8 + 4 + 4 + 8 + 32;

std::string sanitize(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "_" : out;
}


constexpr char kSumMagic[] = "KILNPSUM1";
constexpr const char* kProgramSuffix = ".kiln";

std::string sum_text(const std::string& hash) { return std::string(kSumMagic) + "\n" + hash + "\n"; }

}  // namespace

Result<std::string> hash_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return invalid_argument("cannot stat '", path, "'");
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    static const char kEmpty = 0;
    return wide_hash_hex(&kEmpty, 0) + ":0";
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return invalid_argument("cannot map '", path, "': ", std::strerror(errno));
  ::madvise(base, size, MADV_SEQUENTIAL);
  std::string h = wide_hash_hex(base, size) + ":" + std::to_string(size);
  ::munmap(base, size);
  return h;
}

Status check_program_entry(const std::string& path) {
  std::ifstream f(path + ".sum", std::ios::binary);
  if (!f) return invalid_argument("no checksum file");
  const std::string want((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  KILN_ASSIGN_OR_RETURN(const std::string have, hash_file(path));
  if (want != sum_text(have)) return invalid_argument("checksum mismatch (corrupt or truncated)");
  return Status::ok();
}

Status write_program_entry_sum(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(const std::string hash, hash_file(path));
  const std::string tmp = path + ".sum.tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << sum_text(hash);
    if (!f.flush()) return invalid_argument("cannot write '", tmp, "'");
  }
  std::error_code ec;
  fs::rename(tmp, path + ".sum", ec);
  if (ec) return invalid_argument("cannot rename '", tmp, "': ", ec.message());
  return Status::ok();
}

namespace {
}  // namespace

std::string compat_key(const SelectedBackend& sb) {
  const BackendInfo& info = sb.instance->plugin().info();
  std::string device = std::to_string(sb.instance->device());
  if (sb.instance->device() < info.devices.size()) device += ":" + info.devices[sb.instance->device()].name;
  return info.name + "/" + info.version + "/abi " + info.abi_version + "/sdk " + info.vendor_sdk_version +
         "/device " + device;
}

std::string CompileCache::entry_path(const SelectedBackend& sb, const std::string& key) const {
  const std::string all = key + "\n" + compat_key(sb) + "\n" + options_key_;
  return (fs::path(dir_) / sanitize(sb.name) / (hash_hex(all.data(), all.size()) + kEntrySuffix)).string();
}

void CompileCache::warn(std::string message) {
  std::fprintf(stderr, "kiln: warning: compile cache: %s\n", message.c_str());
  warnings_.push_back(std::move(message));
}

Result<std::shared_ptr<CompiledPartition>> CompileCache::compile(const SelectedBackend& sb, const std::string& id,
                                                                 const std::string& key, const CompileFn& compile) {
  const std::string path = entry_path(sb, key);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    auto blob = read_cache_entry(path);
    if (!blob.is_ok()) {
      warn("ignoring entry " + path + " for " + id + ": " + blob.status().message());
    } else {
      auto imported = sb.instance->import_compiled(blob->data(), blob->size());
      if (imported.is_ok()) {
        ++hits_;
        return imported;
      }
      warn("entry " + path + " for " + id + " was rejected (" + imported.status().message() + "); recompiling");
    }
  }
  ++misses_;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<CompiledPartition> compiled, compile());
  auto bytes = compiled->export_bytes();
  if (!bytes.is_ok()) return compiled;  // a backend without export is simply not cached
  Status st = write_cache_entry(path, sb.name, *bytes);
  if (!st.is_ok()) warn("cannot store " + id + ": " + st.message());
  return compiled;
}

Result<std::vector<uint8_t>> read_cache_entry(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open '", path, "'");
  std::vector<uint8_t> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (all.size() < kEntryHeader || std::memcmp(all.data(), kEntryMagic, 8) != 0)
    return invalid_argument("not a compile cache entry (bad header)");
  uint32_t name_len, reserved;
  uint64_t size;
  std::memcpy(&name_len, all.data() + 8, 4);
  std::memcpy(&reserved, all.data() + 12, 4);
  if (reserved != 0) return invalid_argument("not a compile cache entry (reserved field set)");
  std::memcpy(&size, all.data() + 16, 8);
  const size_t rest = all.size() - kEntryHeader;
  if (name_len > rest || size != rest - name_len)
    return invalid_argument("truncated entry (", all.size(), " bytes, header says ", size, " + ", name_len, ")");
  const uint8_t* blob = all.data() + kEntryHeader + name_len;
  const std::string want(reinterpret_cast<const char*>(all.data() + 24), 32);
  if (hash_hex(all.data() + kEntryHeader, rest) != want) return invalid_argument("checksum mismatch");
  return std::vector<uint8_t>(blob, blob + size);
}

Status write_cache_entry(const std::string& path, const std::string& backend, const std::vector<uint8_t>& blob) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return invalid_argument("cannot create '", fs::path(path).parent_path().string(), "': ", ec.message());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return invalid_argument("cannot write '", tmp, "'");
    char header[kEntryHeader] = {};
    std::memcpy(header, kEntryMagic, 8);
    const auto name_len = static_cast<uint32_t>(backend.size());
    const uint64_t size = blob.size();
    std::memcpy(header + 8, &name_len, 4);
    std::memcpy(header + 16, &size, 8);
    std::string body = backend;
    body.append(reinterpret_cast<const char*>(blob.data()), blob.size());
    std::memcpy(header + 24, hash_hex(body.data(), body.size()).data(), 32);
    f.write(header, kEntryHeader);
    f.write(backend.data(), static_cast<std::streamsize>(backend.size()));
    f.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    if (!f.flush()) {
      fs::remove(tmp, ec);
      return invalid_argument("cannot write '", tmp, "' (disk full?)");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return invalid_argument("cannot rename '", tmp, "' into place");
  }
  return Status::ok();
}

std::vector<CacheEntryInfo> CompileCache::list(const std::string& dir) {
  std::vector<CacheEntryInfo> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string ext = it->path().extension().string();
    const bool program = ext == kProgramSuffix && it->path().parent_path().filename() == "programs";
    if (ext != kEntrySuffix && !program) continue;
    CacheEntryInfo e;
    e.path = it->path().string();
    e.backend = program ? "(program)" : it->path().parent_path().filename().string();
    e.bytes = it->file_size(ec);
    e.valid = program ? check_program_entry(e.path).is_ok() : read_cache_entry(e.path).is_ok();
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

Result<size_t> CompileCache::clear(const std::string& dir) {
  size_t n = 0;
  for (const CacheEntryInfo& e : list(dir)) {
    std::error_code ec;
    if (fs::remove(e.path, ec)) ++n;
    if (ec) return invalid_argument("cannot remove '", e.path, "': ", ec.message());
    if (e.backend == "(program)") fs::remove(e.path + ".sum", ec);
  }
  return n;
}

}  // namespace kiln::runtime
