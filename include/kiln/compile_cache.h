// The compile cache's folder, for tools (`kiln cache ls|clear`). Sessions
// use it through SessionOptions::cache_dir.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/result.h"

namespace kiln {

struct CacheEntry {
  std::string path;
  std::string backend;
  uint64_t bytes = 0;
  bool valid = false;  ///< header and checksum intact
};

/// Every entry under `dir`, sorted by path.
std::vector<CacheEntry> list_cache(const std::string& dir);
/// Removes every entry under `dir`; returns how many.
Result<size_t> clear_cache(const std::string& dir);

}  // namespace kiln
