// IEEE half (Float16) and bfloat16 (BFloat16) storage types. Arithmetic goes
// through float: both convert implicitly to and from float, so generic kernel
// code (`out[i] = a[i] + b[i]`) works for them as for float.
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

namespace detail {
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace detail

/// IEEE 754 binary16, round-to-nearest-even on conversion from float.
struct Float16 {
  uint16_t bits = 0;

  Float16() = default;
  Float16(float f) : bits(from_float(f)) {}  // NOLINT: implicit by design
  operator float() const { return to_float(bits); }

  static Float16 from_bits(uint16_t b) {
    Float16 h;
    h.bits = b;
    return h;
  }

  static uint16_t from_float(float f) {
    uint32_t x = detail::float_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // inf or nan
      return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (abs < 0x38800000u) {  // subnormal or zero in half
      if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
      uint32_t e = abs >> 23;
      uint32_t m = (abs & 0x7fffffu) | 0x800000u;
      uint32_t shift = 126 - e;  // 14 - (e - 127) + 13 - 1 ... see below
      // value = m * 2^(e-150); half subnormal unit = 2^-24 -> q = m >> (126 - e)
      uint32_t q = m >> shift;
      uint32_t rem = m & ((1u << shift) - 1);
      uint32_t half = 1u << (shift - 1);
      if (rem > half || (rem == half && (q & 1u))) ++q;
      return static_cast<uint16_t>(sign | q);
    }
    // normal: rebias exponent 127 -> 15, round mantissa 23 -> 10 bits
    uint32_t r = abs - 0x38000000u;
    uint32_t q = r >> 13;
    uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }

  static float to_float(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t out;
    if (exp == 0) {
      if (man == 0) {
        out = sign;
      } else {  // subnormal: normalize
        int e = -1;
        do {
          ++e;
          man <<= 1;
        } while ((man & 0x400u) == 0);
        out = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
      }
    } else if (exp == 0x1f) {
      out = sign | 0x7f800000u | man << 13;
    } else {
      out = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    return detail::bits_float(out);
  }
};

/// bfloat16: the top 16 bits of a float32, round-to-nearest-even.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT: implicit by design
  operator float() const { return detail::bits_float(static_cast<uint32_t>(bits) << 16); }

  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  static uint16_t from_float(float f) {
    uint32_t x = detail::float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
    uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>((x + rounding) >> 16);
  }
};

}  // namespace kiln
