// kiln cache ls|clear [DIR]: the compile cache's entries.
#include <cstdlib>
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "kiln/compile_cache.h"

namespace kiln::cli {
namespace {

constexpr const char* kUsage = R"(usage: kiln cache ls|clear [DIR]

The compile cache (--cache-dir, SessionOptions::cache_dir) keeps compiled
partitions between loads. DIR defaults to KILN_CACHE_DIR.
  ls      list entries: backend, bytes, whether each is intact, path
  clear   remove every entry
)";

}  // namespace

int cache_command(std::span<const std::string> argv) {
  if (argv.empty() || argv[0] == "--help" || argv.size() > 2) {
    std::cout << kUsage;
    return argv.empty() || argv.size() > 2 ? kExitUsage : kExitOk;
  }
  std::string dir = argv.size() == 2 ? argv[1] : "";
  if (dir.empty()) {
    const char* env = std::getenv("KILN_CACHE_DIR");
    if (!env || !*env) return fail("kiln cache needs DIR or KILN_CACHE_DIR", kExitUsage);
    dir = env;
  }
  if (argv[0] == "ls") {
    std::vector<std::vector<std::string>> rows = {{"backend", "bytes", "state", "path"}};
    for (const CacheEntry& e : list_cache(dir))
      rows.push_back({e.backend, std::to_string(e.bytes), e.valid ? "ok" : "corrupt", e.path});
    print_table(rows);
    std::cout << rows.size() - 1 << " entries in " << dir << "\n";
    return kExitOk;
  }
  if (argv[0] == "clear") {
    Result<size_t> n = clear_cache(dir);
    if (!n.is_ok()) return fail(n.status().message());
    std::cout << "removed " << *n << " entries from " << dir << "\n";
    return kExitOk;
  }
  return fail("unknown cache command '" + argv[0] + "' (ls, clear)", kExitUsage);
}

}  // namespace kiln::cli
