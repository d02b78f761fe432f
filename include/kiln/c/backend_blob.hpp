// Helpers for a plugin's exported blobs (compiled_export / instance_import),
// header-only so that plugins built against include/kiln/c need nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kiln::sdk {

/// A blob checksum: four 64-bit multiply-xor lanes over 8-byte words
/// (independent, so the CPU overlaps them: tens of megabytes of weights
/// check in milliseconds, where a byte-at-a-time FNV-1a took most of an
/// import), folded and finished to 32 bits; trailing bytes one at a time.
/// Detects corruption, not tampering: it is not a cryptographic hash.
inline uint32_t blob_checksum32(const uint8_t* p, size_t n) {
  constexpr uint64_t kMul = 0x100000001b3ull;
  uint64_t h[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      h[k] = (h[k] ^ w) * kMul;
      h[k] ^= h[k] >> 29;
    }
  }
  uint64_t x = h[0] ^ (h[1] << 17 | h[1] >> 47) ^ (h[2] << 31 | h[2] >> 33) ^ (h[3] << 47 | h[3] >> 17);
  for (; i < n; ++i) x = (x ^ p[i]) * kMul;
  x ^= n;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x ^ (x >> 32));
}

}  // namespace kiln::sdk
