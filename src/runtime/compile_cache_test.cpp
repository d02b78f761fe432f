// Compile cache entry files: a round trip, and every truncation or flipped
// byte is an error (the cache then ignores the entry and recompiles).
#include "runtime/compile_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace kiln::runtime {
namespace {

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void put_bytes(const std::string& path, const std::vector<uint8_t>& bytes, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
}

TEST(CompileCache, EntryRoundTripAndListing) {
  const std::string dir = ::testing::TempDir() + "/kiln_cache_rt";
  std::filesystem::remove_all(dir);
  const std::vector<uint8_t> blob = {9, 8, 7, 6, 5, 4, 3, 2, 1};
  const std::string path = dir + "/demo/entry.kcc";
  ASSERT_TRUE(write_cache_entry(path, "demo", blob).is_ok());
  auto back = read_cache_entry(path);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(*back, blob);
  auto entries = CompileCache::list(dir);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].backend, "demo");
  EXPECT_TRUE(entries[0].valid);
  EXPECT_EQ(*CompileCache::clear(dir), 1u);
  EXPECT_TRUE(CompileCache::list(dir).empty());
}

TEST(CompileCache, TruncatedOrFlippedEntriesAreErrors) {
  const std::string path = ::testing::TempDir() + "/kiln_cache_bad.kcc";
  ASSERT_TRUE(write_cache_entry(path, "demo", {1, 2, 3, 4}).is_ok());
  const std::vector<uint8_t> good = file_bytes(path);
  for (size_t n = 0; n < good.size(); ++n) {
    put_bytes(path, good, n);
    EXPECT_FALSE(read_cache_entry(path).is_ok()) << n;
  }
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x40;
    put_bytes(path, bad, bad.size());
    EXPECT_FALSE(read_cache_entry(path).is_ok()) << "flip at " << i;
  }
}

}  // namespace
}  // namespace kiln::runtime
