#include "kiln/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>

namespace kiln {

static_assert(std::endian::native == std::endian::little,
              ".npy support assumes a little-endian host");

namespace {

constexpr uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// Header text quoted in messages: bytes outside printable ASCII as \xNN, at most 40 chars.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    }
  }
  if (s.size() > 40) out += "...";
  return out;
}

Status npy_error(const std::string& what, const std::string& problem) {
  return invalid_argument(what, ": ", problem);
}

// --- the header: a Python dict literal ------------------------------------

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  bool has_descr = false, has_order = false, has_shape = false;
};

class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  // Returns an empty string on success, else what is wrong.
  std::string parse(Header* out) {
    skip_ws();
    if (!eat('{')) return "header is not a Python dict";
    for (;;) {
      skip_ws();
      if (eat('}')) break;
      std::string key;
      if (!parse_string(&key)) return "header dict key is not a string";
      skip_ws();
      if (!eat(':')) return "header dict: expected ':' after '" + printable(key) + "'";
      skip_ws();
      if (key == "descr") {
        if (peek() == '[') return "structured arrays (a descr list) are not supported";
        if (!parse_string(&out->descr)) return "header 'descr' is not a string";
        out->has_descr = true;
      } else if (key == "fortran_order") {
        if (match("True")) {
          out->fortran_order = true;
        } else if (match("False")) {
          out->fortran_order = false;
        } else {
          return "header 'fortran_order' is not True or False";
        }
        out->has_order = true;
      } else if (key == "shape") {
        std::string err = parse_shape(&out->shape);
        if (!err.empty()) return err;
        out->has_shape = true;
      } else {
        return "unknown header key '" + printable(key) + "'";
      }
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat('}')) break;
      return "header dict: expected ',' or '}'";
    }
    if (!out->has_descr) return "header has no 'descr'";
    if (!out->has_order) return "header has no 'fortran_order'";
    if (!out->has_shape) return "header has no 'shape'";
    return "";
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  bool match(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool parse_string(std::string* out) {
    char q = peek();
    if (q != '\'' && q != '"') return false;
    ++i_;
    out->clear();
    while (i_ < s_.size() && s_[i_] != q) out->push_back(s_[i_++]);
    return eat(q);
  }
  std::string parse_shape(std::vector<int64_t>* shape) {
    if (!eat('(')) return "header 'shape' is not a tuple";
    for (;;) {
      skip_ws();
      if (eat(')')) return "";
      if (peek() < '0' || peek() > '9') return "header 'shape' holds something that is not a non-negative integer";
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (INT64_MAX - 9) / 10) return "header 'shape' has a dimension that overflows int64";
        v = v * 10 + (s_[i_++] - '0');
      }
      eat('L');  // Python 2 longs
      shape->push_back(v);
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat(')')) return "";
      return "header 'shape' tuple is malformed";
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

// --- dtype strings ------------------------------------------------------------

struct Descr {
  DType dtype = DType::kUndefined;
  size_t item_size = 0;  // bytes per element in the file
  char kind = 0;         // 'U' or 'S' for strings
};

// Returns an empty string on success, else what is wrong.
std::string parse_descr(const std::string& descr, Descr* out) {
  if (descr.size() < 2) return "unsupported dtype '" + printable(descr) + "'";
  char order = descr[0];
  size_t pos = 1;
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    order = '|';
    pos = 0;
  }
  char kind = descr[pos++];
  std::string size_str = descr.substr(pos);
  if (kind == 'O') return "object arrays are not supported (dtype '" + printable(descr) + "')";
  if (kind == 'V') return "void/structured arrays are not supported (dtype '" + printable(descr) + "')";
  if (kind == 'M' || kind == 'm') return "datetime arrays are not supported (dtype '" + printable(descr) + "')";
  if (size_str.empty() || size_str.size() > 9 ||
      size_str.find_first_not_of("0123456789") != std::string::npos) {
    return "unsupported dtype '" + printable(descr) + "'";
  }
  const size_t size = std::stoul(size_str);
  if (kind == 'U' || kind == 'S' || kind == 'a') {
    out->dtype = DType::kString;
    out->kind = kind == 'U' ? 'U' : 'S';
    out->item_size = kind == 'U' ? size * 4 : size;
    if (kind == 'U' && order == '>' && size > 0) return "big-endian data is not supported (dtype '" + printable(descr) + "')";
    return "";
  }
  DType d = DType::kUndefined;
  switch (kind) {
    case 'b': d = size == 1 ? DType::kBool : DType::kUndefined; break;
    case 'i':
      d = size == 1 ? DType::kInt8 : size == 2 ? DType::kInt16 : size == 4 ? DType::kInt32
        : size == 8 ? DType::kInt64 : DType::kUndefined;
      break;
    case 'u':
      d = size == 1 ? DType::kUInt8 : size == 2 ? DType::kUInt16 : size == 4 ? DType::kUInt32
        : size == 8 ? DType::kUInt64 : DType::kUndefined;
      break;
    case 'f':
      d = size == 2 ? DType::kFloat16 : size == 4 ? DType::kFloat32 : size == 8 ? DType::kFloat64
        : DType::kUndefined;
      break;
    case 'c': d = size == 8 ? DType::kComplex64 : size == 16 ? DType::kComplex128 : DType::kUndefined; break;
    default: break;
  }
  if (d == DType::kUndefined) return "unsupported dtype '" + printable(descr) + "'";
  if (order == '>' && size > 1) return "big-endian data is not supported (dtype '" + printable(descr) + "')";
  out->dtype = d;
  out->item_size = size;
  return "";
}

const char* descr_of(DType t) {
  switch (t) {
    case DType::kBool: return "|b1";
    case DType::kInt8: return "|i1";
    case DType::kUInt8: return "|u1";
    case DType::kInt16: return "<i2";
    case DType::kUInt16: return "<u2";
    case DType::kInt32: return "<i4";
    case DType::kUInt32: return "<u4";
    case DType::kInt64: return "<i8";
    case DType::kUInt64: return "<u8";
    case DType::kFloat16: return "<f2";
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kComplex64: return "<c8";
    case DType::kComplex128: return "<c16";
    default: return nullptr;
  }
}

// --- UTF-8 <-> UTF-32 -------------------------------------------------------

bool append_utf8(uint32_t cp, std::string* out) {
  if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
  return true;
}

// Decodes UTF-8; false on malformed input.
bool decode_utf8(const std::string& s, std::vector<uint32_t>* out) {
  out->clear();
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (n < 0 || i + static_cast<size_t>(n) >= s.size()) return false;
    uint32_t cp = n == 0 ? c : n == 1 ? (c & 0x1fu) : n == 2 ? (c & 0x0fu) : (c & 0x07u);
    for (int k = 1; k <= n; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3fu);
    }
    static constexpr uint32_t kMinOfLength[] = {0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
    if (cp < kMinOfLength[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    out->push_back(cp);
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

}  // namespace

bool has_npy_magic(std::span<const uint8_t> bytes) {
  return bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0;
}

Result<Tensor> parse_npy(std::span<const uint8_t> bytes, const std::string& what) {
  if (!has_npy_magic(bytes)) return npy_error(what, "not a .npy file (no \\x93NUMPY magic)");
  if (bytes.size() < 10) return npy_error(what, "truncated .npy header");
  const int major = bytes[6];
  size_t header_len = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_len = static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return npy_error(what, "truncated .npy header");
    header_len = static_cast<size_t>(bytes[8]) | static_cast<size_t>(bytes[9]) << 8 |
                 static_cast<size_t>(bytes[10]) << 16 | static_cast<size_t>(bytes[11]) << 24;
    header_start = 12;
  } else {
    return npy_error(what, "unsupported .npy format version " + std::to_string(major) + "." +
                               std::to_string(bytes[7]) + " (supported: 1.0, 2.0, 3.0)");
  }
  if (header_len > bytes.size() - header_start) return npy_error(what, "truncated .npy header");
  std::string_view header_text(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);

  Header header;
  std::string err = HeaderParser(header_text).parse(&header);
  if (!err.empty()) return npy_error(what, err);
  if (header.fortran_order) {
    return npy_error(what, "Fortran-order arrays are not supported; save a C-order array "
                           "(numpy.ascontiguousarray)");
  }
  Descr descr;
  err = parse_descr(header.descr, &descr);
  if (!err.empty()) return npy_error(what, err);

  int64_t numel = 1;
  for (int64_t d : header.shape) {
    if (__builtin_mul_overflow(numel, d, &numel)) return npy_error(what, "shape is too large");
  }
  uint64_t data_bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(descr.item_size), &data_bytes)) {
    return npy_error(what, "shape is too large");
  }
  if (descr.dtype == DType::kString && descr.item_size == 0 && numel > 0) {
    // Zero bytes per element: the file's size would bound nothing.
    return npy_error(what, "zero-width string dtype '" + printable(header.descr) + "' is not supported");
  }
  const size_t data_start = header_start + header_len;
  const size_t available = bytes.size() - data_start;
  if (data_bytes > available) {
    return npy_error(what, "truncated data: shape " + Shape(header.shape).to_string() + " of '" +
                               printable(header.descr) + "' needs " + std::to_string(data_bytes) + " bytes, file has " +
                               std::to_string(available));
  }
  const uint8_t* src = bytes.data() + data_start;

  Tensor t = Tensor::allocate(descr.dtype, Shape(header.shape));
  if (descr.dtype == DType::kString) {
    auto* out = t.data<std::string>();
    for (int64_t i = 0; i < numel; ++i) {
      const uint8_t* item = src + static_cast<size_t>(i) * descr.item_size;
      std::string s;
      if (descr.kind == 'S') {
        size_t n = descr.item_size;
        while (n > 0 && item[n - 1] == 0) --n;
        s.assign(reinterpret_cast<const char*>(item), n);
        std::vector<uint32_t> cps;  // string tensors hold UTF-8, as ONNX requires
        if (!decode_utf8(s, &cps)) {
          return npy_error(what, "element " + std::to_string(i) + " of '" + printable(header.descr) +
                                     "' is not valid UTF-8 (byte strings are read as UTF-8 text)");
        }
      } else {
        size_t n = descr.item_size / 4;
        std::vector<uint32_t> cps(n);
        std::memcpy(cps.data(), item, n * 4);
        while (n > 0 && cps[n - 1] == 0) --n;
        for (size_t k = 0; k < n; ++k) {
          if (!append_utf8(cps[k], &s)) {
            return npy_error(what, "element " + std::to_string(i) + " holds an invalid code point");
          }
        }
      }
      out[i] = std::move(s);
    }
    return t;
  }
  if (data_bytes > 0) std::memcpy(t.raw_data(), src, data_bytes);
  if (descr.dtype == DType::kBool) {  // a C++ bool must be 0 or 1
    auto* b = static_cast<uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < numel; ++i) b[i] = b[i] != 0;
  }
  return t;
}

Result<Tensor> read_npy_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return make_status(StatusCode::kIo, "cannot open '", path, "': ", std::strerror(errno));
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return make_status(StatusCode::kIo, "cannot read '", path, "'");
  return parse_npy(bytes, path);
}

Result<std::vector<uint8_t>> serialize_npy(const Tensor& tensor) {
  std::string descr;
  size_t item_size = 0;
  std::vector<std::vector<uint32_t>> utf32;
  const int64_t numel = tensor.numel();
  if (tensor.dtype() == DType::kString) {
    const auto* s = tensor.data<std::string>();
    utf32.resize(static_cast<size_t>(numel));
    size_t max_len = 1;
    for (int64_t i = 0; i < numel; ++i) {
      if (!decode_utf8(s[i], &utf32[static_cast<size_t>(i)])) {
        return invalid_argument("cannot write a string tensor as .npy: element ", i, " is not valid UTF-8");
      }
      max_len = std::max(max_len, utf32[static_cast<size_t>(i)].size());
    }
    descr = "<U" + std::to_string(max_len);
    item_size = max_len * 4;
  } else {
    const char* d = descr_of(tensor.dtype());
    if (!d) return invalid_argument("dtype ", dtype_name(tensor.dtype()), " has no .npy equivalent");
    descr = d;
    item_size = dtype_size(tensor.dtype());
  }

  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < tensor.rank(); ++i) {
    header += std::to_string(tensor.dim(i));
    header += tensor.rank() == 1 ? "," : (i + 1 < tensor.rank() ? ", " : "");
  }
  header += "), }";
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned, as numpy does.
  size_t prefix = 10;
  size_t total = prefix + header.size() + 1;
  if ((total + 63) / 64 * 64 - prefix > 0xffff) prefix = 12;
  total = prefix + header.size() + 1;
  header.append((total + 63) / 64 * 64 - total, ' ');
  header.push_back('\n');

  std::vector<uint8_t> out;
  out.reserve(prefix + header.size() + static_cast<size_t>(numel) * item_size);
  out.insert(out.end(), std::begin(kMagic), std::end(kMagic));
  out.push_back(prefix == 10 ? 1 : 2);
  out.push_back(0);
  const size_t hl = header.size();
  out.push_back(static_cast<uint8_t>(hl & 0xff));
  out.push_back(static_cast<uint8_t>((hl >> 8) & 0xff));
  if (prefix == 12) {
    out.push_back(static_cast<uint8_t>((hl >> 16) & 0xff));
    out.push_back(static_cast<uint8_t>((hl >> 24) & 0xff));
  }
  out.insert(out.end(), header.begin(), header.end());

  if (tensor.dtype() == DType::kString) {
    const size_t width = item_size / 4;
    for (const auto& cps : utf32) {
      std::vector<uint32_t> padded(cps);
      padded.resize(width, 0);
      const auto* p = reinterpret_cast<const uint8_t*>(padded.data());
      out.insert(out.end(), p, p + item_size);
    }
  } else {
    const auto* p = static_cast<const uint8_t*>(tensor.raw_data());
    out.insert(out.end(), p, p + tensor.nbytes());
  }
  return out;
}

Status write_npy_file(const std::string& path, const Tensor& tensor) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize_npy(tensor));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return make_status(StatusCode::kIo, "cannot create '", path, "': ", std::strerror(errno));
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !closed) {
    return make_status(StatusCode::kIo, "cannot write '", path, "': ", std::strerror(errno));
  }
  return Status::ok();
}

}  // namespace kiln
