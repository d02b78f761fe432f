// The compile cache: compiled partitions stored on disk and imported on the
// next load instead of compiled again (SessionOptions::cache_dir).
//
// An entry's name is a hash of the partition's content key
// (partition_content_key), the plugin's name and version, its compatibility
// key for the device (compat_key) and the options that affect compilation.
// Entries are written to a temporary file and renamed into place; a corrupt
// or truncated entry, or one the plugin's check rejects, is ignored with a
// warning, compiled again and replaced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/backends/partitioner.h"

namespace kiln::runtime {

/// What a compiled blob of `sb` is valid for: plugin name, version, ABI and
/// vendor SDK versions, and the device.
std::string compat_key(const SelectedBackend& sb);

/// One file of the cache, as `kiln cache ls` shows it.
struct CacheEntryInfo {
  std::string path;
  std::string backend;
  uint64_t bytes = 0;
  bool valid = false;  // header and checksum intact
};

class CompileCache : public CompileHook {
 public:
  /// `options_key`: the compile-affecting options, as one string.
  CompileCache(std::string dir, std::string options_key) : dir_(std::move(dir)), options_key_(std::move(options_key)) {}

  Result<std::shared_ptr<CompiledPartition>> compile(const SelectedBackend& sb, const std::string& id,
                                                     const std::string& key, const CompileFn& compile) override;

  /// Entry path for a partition (exposed for tests).
  std::string entry_path(const SelectedBackend& sb, const std::string& key) const;
  int hits() const { return hits_; }
  int misses() const { return misses_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  /// Every entry under `dir`.
  static std::vector<CacheEntryInfo> list(const std::string& dir);
  /// Removes every entry under `dir` (only files this cache writes); returns how many.
  static Result<size_t> clear(const std::string& dir);

 private:
  void warn(std::string message);
  std::string dir_;
  std::string options_key_;
  int hits_ = 0;
  int misses_ = 0;
  std::vector<std::string> warnings_;
};

// Whole-program entries (DIR/programs/<key>.kiln, written by Session::load
// of an ONNX file with a cache folder) carry a checksum file beside them,
// <key>.kiln.sum, that list() and the loader check.
/// Hash of a file's bytes and its size ("<32 hex>:<size>"), read through a mapping.
Result<std::string> hash_file(const std::string& path);
/// OK when `path`'s checksum file matches its bytes.
Status check_program_entry(const std::string& path);
/// Writes `path`'s checksum file (atomically).
Status write_program_entry_sum(const std::string& path);

/// Reads and checks one entry file: magic, version, size, checksum.
Result<std::vector<uint8_t>> read_cache_entry(const std::string& path);
/// Writes an entry atomically (temporary file in the same folder, rename).
Status write_cache_entry(const std::string& path, const std::string& backend, const std::vector<uint8_t>& blob);

}  // namespace kiln::runtime
