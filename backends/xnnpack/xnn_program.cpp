#include "xnn_program.h"

#include <cstring>

#include "kiln/c/backend_blob.hpp"
#include "kiln/c/backend_sdk.hpp"

namespace kiln_xnnpack {

using kiln::sdk::fail;

const char* op_name(OpKind k) {
  static const char* const names[] = {
      "Conv",   "DepthwiseConv", "FullyConnected", "MaxPool", "AveragePool", "GlobalAveragePool", "Add",
      "Mul",    "Sub",           "Div",            "Max",     "Min",         "Clamp",             "Elu",
      "LeakyRelu", "HardSwish",  "Sigmoid",        "Softmax", "Abs",         "Neg",               "Sqrt",
      "Floor",  "Ceil",          "PRelu",          "Reshape", "Pad",         "Resize",            "DepthToSpace",
      "Concat", "SiLU"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(OpKind::kCount), "one name per op");
  const size_t i = static_cast<size_t>(k);
  return i < static_cast<size_t>(OpKind::kCount) ? names[i] : "?";
}

bool has_output_clamp(OpKind k) {
  switch (k) {
    case OpKind::kConv: case OpKind::kDepthwise: case OpKind::kFullyConnected: case OpKind::kMaxPool:
    case OpKind::kAveragePool: case OpKind::kGlobalAveragePool: case OpKind::kAdd: case OpKind::kMul:
    case OpKind::kSub: case OpKind::kDiv: case OpKind::kClamp:
      return true;
    default:
      return false;
  }
}

int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

uint32_t Program::add_value(std::vector<int64_t> dims) {
  values.push_back({std::move(dims), -1});
  return static_cast<uint32_t>(values.size() - 1);
}

uint32_t Program::add_constant(std::vector<int64_t> dims, std::vector<float> data) {
  if (static_cast<int64_t>(data.size()) != numel(dims)) fail(KILN_STATUS_INTERNAL, "constant size does not match its dims");
  constants.push_back(std::move(data));
  values.push_back({std::move(dims), static_cast<int32_t>(constants.size() - 1)});
  return static_cast<uint32_t>(values.size() - 1);
}

std::vector<int64_t> Program::host_dims(const Boundary& b) const {
  std::vector<int64_t> d = values.at(b.value).dims;
  if (b.nchw) return {d[0], d[3], d[1], d[2]};
  return d;
}

size_t Program::num_transposes() const {
  size_t n = 0;
  for (const Boundary& b : inputs) n += b.nchw;
  for (const Boundary& b : outputs) n += b.nchw;
  return n;
}

namespace {

constexpr size_t kMaxCount = size_t{1} << 28;

// Inputs each op reads (min, max); kNoValue allowed only for an optional bias.
void arity(OpKind k, size_t* lo, size_t* hi) {
  *lo = *hi = 1;
  switch (k) {
    case OpKind::kConv: case OpKind::kDepthwise: case OpKind::kFullyConnected: *lo = 2, *hi = 3; break;
    case OpKind::kAdd: case OpKind::kMul: case OpKind::kSub: case OpKind::kDiv: case OpKind::kMax:
    case OpKind::kMin: case OpKind::kPRelu: *lo = *hi = 2; break;
    case OpKind::kConcat: *lo = 1, *hi = 4096; break;
    default: break;
  }
}

// The blob's checksum is the SDK's (kiln/c/backend_blob.hpp).
using kiln::sdk::blob_checksum32;

class Writer {
 public:
  template <class T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }
  template <class T>
  void put_array(const std::vector<T>& v) {
    const auto* b = reinterpret_cast<const uint8_t*>(v.data());
    out.insert(out.end(), b, b + v.size() * sizeof(T));
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <class T>
  T get(const char* what) {
    if (n_ - pos_ < sizeof(T)) fail(KILN_STATUS_INVALID_ARGUMENT, std::string("compiled blob is truncated (reading ") + what + ")");
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  /// A count of items of `item_size` bytes each that must fit in what is left.
  size_t count(const char* what, size_t item_size, bool wide = false) {
    const uint64_t c = wide ? get<uint64_t>(what) : get<uint32_t>(what);
    if (c > kMaxCount || c * (item_size ? item_size : 1) > n_ - pos_)
      fail(KILN_STATUS_INVALID_ARGUMENT, std::string("compiled blob has an impossible ") + what + " count");
    return static_cast<size_t>(c);
  }
  template <class T>
  std::vector<T> array(size_t n) {
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), p_ + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

void write_boundaries(Writer& w, const std::vector<Boundary>& bs) {
  w.put<uint32_t>(static_cast<uint32_t>(bs.size()));
  for (const Boundary& b : bs) {
    w.put<uint32_t>(b.value);
    w.put<uint8_t>(b.nchw ? 1 : 0);
  }
}

std::vector<Boundary> read_boundaries(Reader& r, const char* what) {
  std::vector<Boundary> bs(r.count(what, 5));
  for (Boundary& b : bs) {
    b.value = r.get<uint32_t>(what);
    b.nchw = r.get<uint8_t>(what) != 0;
  }
  return bs;
}

}  // namespace

// Shape rules the plugin's own code relies on (XNNPACK checks its ops' shapes
// when they are defined): Concat parts, Reshape and Pad sizes.
void Program::check_shapes(const Op& op) const {
  const std::vector<int64_t>& out = values[op.out].dims;
  auto bad = [&](const char* what) { fail(KILN_STATUS_INVALID_ARGUMENT, std::string("op ") + op_name(op.kind) + ": " + what); };
  if (op.kind == OpKind::kConcat) {
    if (op.ints.size() != 1 || op.ints[0] < 0 || op.ints[0] >= static_cast<int64_t>(out.size())) bad("bad axis");
    const size_t axis = static_cast<size_t>(op.ints[0]);
    int64_t sum = 0;
    for (uint32_t v : op.in) {
      const std::vector<int64_t>& d = values[v].dims;
      if (d.size() != out.size()) bad("parts of another rank");
      for (size_t k = 0; k < d.size(); ++k)
        if (k != axis && d[k] != out[k]) bad("parts disagree with the output");
      sum += d[axis];
    }
    if (sum != out[axis]) bad("parts do not add up to the output");
  } else if (op.kind == OpKind::kReshape) {
    if (op.ints != out || numel(values[op.in[0]].dims) != numel(out)) bad("sizes disagree");
  } else if (op.kind == OpKind::kPad) {
    if (op.ints.size() != 2 * values[op.in[0]].dims.size()) bad("pads do not match the rank");
  }
}

void Program::validate() const {
  std::vector<uint8_t> defined(values.size(), 0);
  for (size_t v = 0; v < values.size(); ++v) {
    const ValueInfo& info = values[v];
    if (info.dims.size() > 6) fail(KILN_STATUS_INVALID_ARGUMENT, "value " + std::to_string(v) + " has rank > 6");
    int64_t n = 1;
    for (int64_t d : info.dims) {
      if (d <= 0 || d > (int64_t{1} << 31)) fail(KILN_STATUS_INVALID_ARGUMENT, "value " + std::to_string(v) + " has a dim out of range");
      n *= d;
      if (n > (int64_t{1} << 36)) fail(KILN_STATUS_INVALID_ARGUMENT, "value " + std::to_string(v) + " is too large");
    }
    if (info.constant >= 0) {
      if (static_cast<size_t>(info.constant) >= constants.size() ||
          static_cast<int64_t>(constants[static_cast<size_t>(info.constant)].size()) != numel(info.dims))
        fail(KILN_STATUS_INVALID_ARGUMENT, "value " + std::to_string(v) + " has a bad constant");
      defined[v] = 1;
    }
  }
  for (const Boundary& b : inputs) {
    if (b.value >= values.size() || values[b.value].constant >= 0 || (b.nchw && values[b.value].dims.size() != 4))
      fail(KILN_STATUS_INVALID_ARGUMENT, "bad partition input value");
    defined[b.value] = 1;
  }
  for (const Op& op : ops) {
    size_t lo, hi;
    if (static_cast<size_t>(op.kind) >= static_cast<size_t>(OpKind::kCount)) fail(KILN_STATUS_INVALID_ARGUMENT, "unknown op kind");
    arity(op.kind, &lo, &hi);
    if (op.in.size() < lo || op.in.size() > hi)
      fail(KILN_STATUS_INVALID_ARGUMENT, std::string("op ") + op_name(op.kind) + " has a wrong number of inputs");
    for (size_t i = 0; i < op.in.size(); ++i) {
      if (op.in[i] == kNoValue && i == 2 && hi == 3) continue;
      if (op.in[i] >= values.size() || !defined[op.in[i]])
        fail(KILN_STATUS_INVALID_ARGUMENT, std::string("op ") + op_name(op.kind) + " reads an undefined value");
    }
    if (op.out >= values.size() || defined[op.out])
      fail(KILN_STATUS_INVALID_ARGUMENT, std::string("op ") + op_name(op.kind) + " writes a bad value");
    if (has_output_clamp(op.kind) && op.floats.size() < 2)
      fail(KILN_STATUS_INVALID_ARGUMENT, std::string("op ") + op_name(op.kind) + " lacks its output clamp");
    if (op.out < values.size()) check_shapes(op);
    defined[op.out] = 1;
  }
  for (const Boundary& b : outputs) {
    if (b.value >= values.size() || !defined[b.value] || (b.nchw && values[b.value].dims.size() != 4))
      fail(KILN_STATUS_INVALID_ARGUMENT, "bad partition output value");
  }
}

std::vector<uint8_t> Program::serialize() const {
  Writer w;
  w.out = {'K', 'X', 'N', 'N'};
  w.put<uint32_t>(kFormatVersion);
  w.put<uint32_t>(static_cast<uint32_t>(values.size()));
  for (const ValueInfo& v : values) {
    w.put<uint32_t>(static_cast<uint32_t>(v.dims.size()));
    w.put_array(v.dims);
    w.put<int32_t>(v.constant);
  }
  w.put<uint32_t>(static_cast<uint32_t>(constants.size()));
  for (const std::vector<float>& c : constants) {
    w.put<uint64_t>(c.size());
    w.put_array(c);
  }
  write_boundaries(w, inputs);
  write_boundaries(w, outputs);
  w.put<uint32_t>(static_cast<uint32_t>(ops.size()));
  for (const Op& op : ops) {
    w.put<uint8_t>(static_cast<uint8_t>(op.kind));
    w.put<uint32_t>(static_cast<uint32_t>(op.in.size()));
    w.put_array(op.in);
    w.put<uint32_t>(op.out);
    w.put<uint32_t>(static_cast<uint32_t>(op.ints.size()));
    w.put_array(op.ints);
    w.put<uint32_t>(static_cast<uint32_t>(op.floats.size()));
    w.put_array(op.floats);
  }
  w.put<uint32_t>(blob_checksum32(w.out.data(), w.out.size()));
  return std::move(w.out);
}

Program Program::parse(const uint8_t* bytes, size_t size) {
  if (!bytes || size < 12) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob is too short to be an XNNPACK partition");
  if (std::memcmp(bytes, "KXNN", 4) != 0) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob is not an XNNPACK partition (bad magic)");
  uint32_t stored;
  std::memcpy(&stored, bytes + size - 4, 4);
  Reader r(bytes + 4, size - 8);
  const uint32_t version = r.get<uint32_t>("version");
  if (version != kFormatVersion) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has format version " + std::to_string(version) +
                                           "; this xnnpack plugin reads version " + std::to_string(kFormatVersion));
  }
  if (blob_checksum32(bytes, size - 4) != stored) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob checksum mismatch (corrupt)");
  Program p;
  p.values.resize(r.count("value", 12));
  for (ValueInfo& v : p.values) {
    v.dims = r.array<int64_t>(r.count("dim", 8));
    v.constant = r.get<int32_t>("constant");
  }
  p.constants.resize(r.count("constant", 8));
  for (std::vector<float>& c : p.constants) c = r.array<float>(r.count("constant data", 4, true));
  p.inputs = read_boundaries(r, "input");
  p.outputs = read_boundaries(r, "output");
  p.ops.resize(r.count("op", 17));
  for (Op& op : p.ops) {
    op.kind = static_cast<OpKind>(r.get<uint8_t>("op kind"));
    op.in = r.array<uint32_t>(r.count("op input", 4));
    op.out = r.get<uint32_t>("op output");
    op.ints = r.array<int64_t>(r.count("op int", 8));
    op.floats = r.array<float>(r.count("op float", 4));
  }
  if (r.pos() != size - 8) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has trailing bytes");
  p.validate();
  return p;
}

}  // namespace kiln_xnnpack
