// Content hashes of partitions and constants (content_key.h).
#include "runtime/backends/content_key.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace kiln::runtime {
namespace {

// An empty value has no data: its pointer may be null (an empty constant, an
// empty option string). UBSan found a memcpy from that null pointer through
// the XNNPACK plugin's export/import test.
TEST(ContentKeyTest, EmptyDataMayBeNull) {
  const char nothing[1] = {0};
  EXPECT_EQ(hash_hex(nullptr, 0), hash_hex(nothing, 0));
  EXPECT_EQ(wide_hash_hex(nullptr, 0), wide_hash_hex(nothing, 0));
  EXPECT_NE(hash_hex(nullptr, 0), hash_hex(nothing, 1));
}

// Every byte counts, the tail after the last whole 8-byte word included.
TEST(ContentKeyTest, EveryByteCounts) {
  std::vector<unsigned char> a(13, 7);
  const std::string base = wide_hash_hex(a.data(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::vector<unsigned char> b = a;
    b[i] ^= 1;
    EXPECT_NE(wide_hash_hex(b.data(), b.size()), base) << "byte " << i;
  }
  EXPECT_NE(wide_hash_hex(a.data(), a.size() - 1), base);  // the length counts too
}

}  // namespace
}  // namespace kiln::runtime
