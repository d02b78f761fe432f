// Just enough of the protobuf wire format for the CLI to look inside a model
// file (op types, for conformance skips) and to write the demo model, without
// linking protobuf: the importer (src/onnx) stays the only code that does.
// Reference: https://protobuf.dev/programming-guides/encoding/
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace kiln::cli::wire {

enum WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  WireType type = kVarint;
  uint64_t varint = 0;                // kVarint, kFixed64, kFixed32
  std::span<const uint8_t> bytes;     // kLengthDelimited
  std::string_view str() const { return {reinterpret_cast<const char*>(bytes.data()), bytes.size()}; }
};

/// Iterates the fields of one message. next() returns false at the end or on
/// malformed input; error() tells which.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool next(Field* f) {
    if (p_ == end_ || error_) return false;
    uint64_t key = 0;
    if (!read_varint(&key)) return false;
    f->number = static_cast<uint32_t>(key >> 3);
    f->type = static_cast<WireType>(key & 7);
    switch (key & 7) {
      case kVarint: return read_varint(&f->varint);
      case kFixed64: return read_fixed(8, &f->varint);
      case kFixed32: return read_fixed(4, &f->varint);
      case kLengthDelimited: {
        uint64_t n = 0;
        if (!read_varint(&n)) return false;
        if (n > static_cast<uint64_t>(end_ - p_)) return fail();
        f->bytes = {p_, static_cast<size_t>(n)};
        p_ += n;
        return true;
      }
      default: return fail();  // groups (3, 4) are not used by ONNX
    }
  }
  bool error() const { return error_; }

 private:
  bool fail() {
    error_ = true;
    return false;
  }
  bool read_varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return fail();
      const uint8_t b = *p_++;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return fail();
  }
  bool read_fixed(int n, uint64_t* v) {
    if (end_ - p_ < n) return fail();
    *v = 0;
    std::memcpy(v, p_, static_cast<size_t>(n));  // little-endian host
    p_ += n;
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  bool error_ = false;
};

/// Appends fields of one message to a byte string.
class Writer {
 public:
  void varint_field(uint32_t number, uint64_t v) {
    key(number, kVarint);
    varint(v);
  }
  void bytes_field(uint32_t number, std::string_view bytes) {
    key(number, kLengthDelimited);
    varint(bytes.size());
    out_.append(bytes);
  }
  void message_field(uint32_t number, const Writer& msg) { bytes_field(number, msg.out_); }
  void float_field(uint32_t number, float v) {
    key(number, kFixed32);
    char b[4];
    std::memcpy(b, &v, 4);
    out_.append(b, 4);
  }
  const std::string& bytes() const { return out_; }

 private:
  void key(uint32_t number, WireType t) { varint(static_cast<uint64_t>(number) << 3 | t); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
};

}  // namespace kiln::cli::wire
