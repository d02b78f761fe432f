#include "onednn_program.h"

#include <cstring>

#include <oneapi/dnnl/dnnl_types.h>

#include "kiln/c/backend_blob.hpp"
#include "kiln/c/backend_sdk.hpp"

namespace kiln_onednn {

using kiln::sdk::fail;

namespace {

constexpr uint32_t kVersion = 2;  // 2: checksum32 instead of byte-wise FNV-1a
constexpr size_t kMaxCount = size_t{1} << 28;

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
  void put_vec(const std::vector<T>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) put<T>(x);
  }
  void put_str(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
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
  size_t count(const char* what) {
    uint32_t c = get<uint32_t>(what);
    if (c > kMaxCount || c > n_ - pos_) fail(KILN_STATUS_INVALID_ARGUMENT, std::string("compiled blob has an impossible ") + what + " count");
    return c;
  }
  template <class T>
  std::vector<T> get_vec(const char* what) {
    std::vector<T> v(count(what));
    for (T& x : v) x = get<T>(what);
    return v;
  }
  std::string get_str(const char* what) {
    size_t n = count(what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// Inputs each op kind needs (min, max).
std::pair<size_t, size_t> arity(OpKind k) {
  switch (k) {
    case OpKind::kConv: case OpKind::kDeconv: case OpKind::kMatMul: return {2, 3};
    case OpKind::kBatchNorm: return {5, 5};
    case OpKind::kBinary: return {2, 2};
    case OpKind::kLayerNorm: return {1, 3};
    case OpKind::kConcat: return {1, 1u << 16};
    default: return {1, 1};
  }
}

// ints and floats each op kind carries (-1: any number).
std::pair<int, int> attr_counts(OpKind k) {
  switch (k) {
    case OpKind::kConv: case OpKind::kDeconv: return {9, 0};
    case OpKind::kMatMul: return {2, 0};
    case OpKind::kPool: return {10, 0};
    case OpKind::kBatchNorm: case OpKind::kLayerNorm: return {0, 1};
    case OpKind::kEltwise: return {0, 2};
    case OpKind::kSoftmax: case OpKind::kConcat: return {1, 0};
    case OpKind::kTranspose: case OpKind::kReduce: return {-1, 0};
    default: return {0, 0};
  }
}

}  // namespace

const char* op_name(OpKind k) {
  static const char* const names[] = {"Conv",   "ConvTranspose", "MatMul",    "Pool",      "BatchNormalization",
                                      "Eltwise", "Binary",       "Softmax",   "Transpose", "Reshape",
                                      "Concat",  "LayerNormalization", "Reduce", "Erf"};
  auto i = static_cast<size_t>(k);
  return i < sizeof(names) / sizeof(names[0]) ? names[i] : "unknown";
}

std::string target_mismatch(const Program& p, const std::string& version, const std::string& isa) {
  if (p.onednn_version == version && p.isa == isa) return "";
  return "compiled partition was built for oneDNN " + p.onednn_version + " on " + p.isa + "; this machine has oneDNN " +
         version + " on " + isa;
}

// Ranks and axes each op kind relies on (so a crafted blob cannot index out of range).
void Program::check_shapes(const Op& op, const std::string& what) const {
  auto rank = [&](int32_t v) { return static_cast<int64_t>(dims[static_cast<size_t>(v)].size()); };
  const int64_t r = rank(op.in[0]);
  bool ok = true;
  switch (op.kind) {
    case OpKind::kConv: case OpKind::kDeconv:
      ok = r == 4 && rank(op.in[1]) == 4 && rank(op.out) == 4 && op.ints[0] >= 1;
      break;
    case OpKind::kPool: ok = r == 4 && rank(op.out) == 4; break;
    case OpKind::kMatMul: ok = r >= 2 && rank(op.in[1]) >= 2 && rank(op.out) >= 2; break;
    case OpKind::kSoftmax: case OpKind::kConcat: ok = op.ints[0] >= 0 && op.ints[0] < r; break;
    case OpKind::kTranspose: {
      std::vector<int> seen(static_cast<size_t>(r), 0);
      ok = static_cast<int64_t>(op.ints.size()) == r;
      for (int64_t a : op.ints) ok = ok && a >= 0 && a < r && !seen[static_cast<size_t>(a)]++;
      break;
    }
    case OpKind::kReduce:
      for (size_t i = 1; i < op.ints.size(); ++i) ok = ok && op.ints[i] >= 0 && op.ints[i] < r;
      break;
    default: break;
  }
  if (!ok) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: " + what + " has inconsistent ranks or axes");
}

void Program::validate() const {
  std::vector<uint8_t> defined(num_values, 0);
  auto check = [&](int32_t v, bool optional, const std::string& what) {
    if (v == -1 && optional) return;
    if (v < 0 || static_cast<uint32_t>(v) >= num_values)
      fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: " + what + " refers to value " + std::to_string(v) +
                                             " of " + std::to_string(num_values));
    if (!defined[static_cast<size_t>(v)]) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: " + what + " reads value " + std::to_string(v) + " before it is defined");
  };
  auto define = [&](int32_t v, const std::string& what) {
    if (v < 0 || static_cast<uint32_t>(v) >= num_values || defined[static_cast<size_t>(v)])
      fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: " + what + " defines value " + std::to_string(v) + " twice or out of range");
    defined[static_cast<size_t>(v)] = 1;
  };
  if (dims.size() != num_values) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: dims of " + std::to_string(dims.size()) + " values, expected " + std::to_string(num_values));
  for (int32_t in : inputs) define(in, "an input");
  for (const Constant& c : constants) {
    define(c.value, "a constant");
    if (c.dims != dims[static_cast<size_t>(c.value)]) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: a constant's dims differ from its value's");
    int64_t n = 1;
    for (int64_t d : c.dims) n *= d >= 0 ? d : -1;
    if (n < 0 || static_cast<size_t>(n) != c.data.size()) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: a constant's data does not match its dims");
  }
  for (const Op& op : ops) {
    const std::string what = std::string("op ") + op_name(op.kind);
    auto [lo, hi] = arity(op.kind);
    if (op.in.size() < lo || op.in.size() > hi) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: " + what + " has " + std::to_string(op.in.size()) + " inputs");
    for (size_t i = 0; i < op.in.size(); ++i) check(op.in[i], i >= lo, what);
    auto [ni, nf] = attr_counts(op.kind);
    if ((ni >= 0 && op.ints.size() != static_cast<size_t>(ni)) || (nf >= 0 && op.floats.size() != static_cast<size_t>(nf)))
      fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: " + what + " has " + std::to_string(op.ints.size()) + " ints and " +
                                             std::to_string(op.floats.size()) + " floats");
    if (op.kind == OpKind::kReduce && op.ints.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled program: a reduction without keepdims");
    check_shapes(op, what);
    for (const PostOp& p : op.post)
      if (p.kind != PostKind::kEltwise) check(p.value, false, what + " post-op");
    define(op.out, what);
  }
  for (int32_t v : outputs) check(v, false, "an output");
}

std::vector<uint8_t> Program::serialize() const {
  Writer w;
  w.out = {'K', 'D', 'N', 'L'};
  w.put<uint32_t>(kVersion);
  w.put_str(onednn_version);
  w.put_str(isa);
  w.put<uint8_t>(winograd);
  w.put<uint32_t>(num_values);
  for (const std::vector<int64_t>& d : dims) w.put_vec(d);
  w.put_vec(inputs);
  w.put_vec(outputs);
  w.put<uint32_t>(static_cast<uint32_t>(constants.size()));
  for (const Constant& c : constants) {
    w.put<int32_t>(c.value);
    w.put_vec(c.dims);
    for (float f : c.data) w.put<float>(f);
  }
  w.put<uint32_t>(static_cast<uint32_t>(ops.size()));
  for (const Op& op : ops) {
    w.put<uint8_t>(static_cast<uint8_t>(op.kind));
    w.put<int32_t>(op.alg);
    w.put_vec(op.in);
    w.put<int32_t>(op.out);
    w.put_vec(op.ints);
    w.put_vec(op.floats);
    w.put<uint32_t>(static_cast<uint32_t>(op.post.size()));
    for (const PostOp& p : op.post) {
      w.put<uint8_t>(static_cast<uint8_t>(p.kind));
      w.put<int32_t>(p.alg);
      w.put<float>(p.alpha);
      w.put<float>(p.beta);
      w.put<int32_t>(p.value);
    }
  }
  w.put<uint32_t>(blob_checksum32(w.out.data(), w.out.size()));
  return w.out;
}

Program Program::parse(const uint8_t* bytes, size_t size) {
  if (!bytes || size < 12 || std::memcmp(bytes, "KDNL", 4) != 0)
    fail(KILN_STATUS_INVALID_ARGUMENT, "not a oneDNN backend compiled partition (bad magic or too short)");
  uint32_t stored;
  std::memcpy(&stored, bytes + size - 4, 4);
  if (stored != blob_checksum32(bytes, size - 4)) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob is corrupt (checksum mismatch)");
  Reader r(bytes + 4, size - 8);
  const uint32_t version = r.get<uint32_t>("version");
  if (version != kVersion)
    fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob format version " + std::to_string(version) + ", this build reads " + std::to_string(kVersion));
  Program p;
  p.onednn_version = r.get_str("oneDNN version");
  p.isa = r.get_str("ISA");
  p.winograd = r.get<uint8_t>("winograd");
  p.num_values = static_cast<uint32_t>(r.count("value"));
  p.dims.resize(p.num_values);
  for (std::vector<int64_t>& d : p.dims) {
    d = r.get_vec<int64_t>("value dims");
    if (d.size() > DNNL_MAX_NDIMS) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has a value of rank " + std::to_string(d.size()));
    for (int64_t x : d)
      if (x < 0) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has a value with a negative dim");
  }
  p.inputs = r.get_vec<int32_t>("input");
  p.outputs = r.get_vec<int32_t>("output");
  p.constants.resize(r.count("constant"));
  for (Constant& c : p.constants) {
    c.value = r.get<int32_t>("constant value");
    c.dims = r.get_vec<int64_t>("constant dims");
    int64_t n = 1;
    for (int64_t d : c.dims) {
      if (d < 0 || (d > 0 && n > static_cast<int64_t>(kMaxCount) / d)) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has a constant with impossible dims");
      n *= d;
    }
    if (static_cast<size_t>(n) > size / 4) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob is truncated (constant data)");
    c.data.resize(static_cast<size_t>(n));
    for (float& f : c.data) f = r.get<float>("constant data");
  }
  p.ops.resize(r.count("op"));
  for (Op& op : p.ops) {
    uint8_t kind = r.get<uint8_t>("op kind");
    if (kind > static_cast<uint8_t>(OpKind::kErf)) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has an unknown op kind " + std::to_string(kind));
    op.kind = static_cast<OpKind>(kind);
    op.alg = r.get<int32_t>("op alg");
    op.in = r.get_vec<int32_t>("op inputs");
    op.out = r.get<int32_t>("op output");
    op.ints = r.get_vec<int64_t>("op ints");
    op.floats = r.get_vec<float>("op floats");
    op.post.resize(r.count("post-op"));
    for (PostOp& po : op.post) {
      uint8_t k = r.get<uint8_t>("post-op kind");
      if (k > 2) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has an unknown post-op kind");
      po.kind = static_cast<PostKind>(k);
      po.alg = r.get<int32_t>("post-op alg");
      po.alpha = r.get<float>("post-op alpha");
      po.beta = r.get<float>("post-op beta");
      po.value = r.get<int32_t>("post-op value");
    }
  }
  p.validate();
  return p;
}

}  // namespace kiln_onednn
