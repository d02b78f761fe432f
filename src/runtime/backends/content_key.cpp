// partition_content_key: what a compiled partition depends on, hashed.
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/backends/content_key.h"

namespace kiln::runtime {
namespace {

// Two independent 64-bit multiply-xor streams, fed 8 bytes at a time so
// hashing tens of megabytes of weights stays in the milliseconds.
class Hasher {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    u64(n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    uint64_t tail = 0;
    if (n > i) std::memcpy(&tail, p + i, n - i);  // an empty value's data may be null
    mix(tail);
  }
  void u64(uint64_t v) { mix(v); }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  std::string hex() const {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(fin(a_)),
                  static_cast<unsigned long long>(fin(b_)));
    return buf;
  }
  std::array<uint64_t, 2> words() const { return {fin(a_), fin(b_)}; }

 private:
  void mix(uint64_t w) {
    a_ = (a_ ^ w) * 0x100000001b3ull;
    a_ ^= a_ >> 29;
    b_ = (b_ + w) * 0x9e3779b97f4a7c15ull;
    b_ ^= b_ >> 31;
  }
  static uint64_t fin(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  }
  uint64_t a_ = 0xcbf29ce484222325ull;
  uint64_t b_ = 0x84222325cbf29ce4ull;
};

void hash_type(Hasher& h, const ir::ValueType& t) {
  h.u64(static_cast<uint64_t>(t.kind));
  h.u64(static_cast<uint64_t>(t.dtype));
  h.u64(t.has_shape ? t.dims.size() + 1 : 0);
  for (const ir::Dim& d : t.dims) {
    h.u64(static_cast<uint64_t>(d.value));
    h.str(d.param);
  }
  if (t.elem) hash_type(h, *t.elem);
}

void hash_tensor(Hasher& h, const Tensor& t) {
  h.u64(static_cast<uint64_t>(t.dtype()));
  h.u64(t.rank());
  for (size_t i = 0; i < t.rank(); ++i) h.u64(static_cast<uint64_t>(t.dim(i)));
  if (t.dtype() == DType::kString) {
    const auto* s = t.data<std::string>();
    for (int64_t i = 0; i < t.numel(); ++i) h.str(s[i]);
  } else if (t.defined()) {
    h.bytes(t.raw_data(), t.nbytes());
  }
}

void hash_graph(Hasher& h, const ir::Graph& g);

void hash_attr(Hasher& h, const ir::Attribute& a) {
  h.str(a.name);
  h.u64(static_cast<uint64_t>(a.type));
  h.str(a.ref_attr_name);
  uint32_t fbits;
  std::memcpy(&fbits, &a.f, 4);
  h.u64(fbits);
  h.u64(static_cast<uint64_t>(a.i));
  h.str(a.s);
  hash_tensor(h, a.t);
  h.u64(a.g ? 1 : 0);
  if (a.g) hash_graph(h, *a.g);
  hash_type(h, a.tp);
  h.bytes(a.floats.data(), a.floats.size() * sizeof(float));
  h.bytes(a.ints.data(), a.ints.size() * sizeof(int64_t));
  for (const std::string& s : a.strings) h.str(s);
  for (const Tensor& t : a.tensors) hash_tensor(h, t);
  for (const auto& sg : a.graphs) hash_graph(h, *sg);
  for (const ir::ValueType& t : a.tps) hash_type(h, t);
}

void hash_node(Hasher& h, const ir::Node& n) {
  h.str(n.op_type);
  h.str(n.domain);
  h.u64(static_cast<uint64_t>(n.opset));
  h.u64(n.inputs.size());
  for (ir::ValueId v : n.inputs) h.u64(static_cast<uint64_t>(v));
  h.u64(n.outputs.size());
  for (ir::ValueId v : n.outputs) h.u64(static_cast<uint64_t>(v));
  h.u64(n.attributes.size());
  for (const ir::Attribute& a : n.attributes) hash_attr(h, a);
}

void hash_graph(Hasher& h, const ir::Graph& g) {
  h.u64(g.nodes.size());
  for (const ir::Node& n : g.nodes) hash_node(h, n);
  for (const ir::ValueInfo& v : g.values) hash_type(h, v.type);
  for (const auto& [id, t] : g.initializers) {
    h.u64(static_cast<uint64_t>(id));
    hash_tensor(h, t);
  }
}

}  // namespace

std::array<uint64_t, 2> tensor_content_hash(const Tensor& t) {
  Hasher h;
  hash_tensor(h, t);
  return h.words();
}

std::string hash_hex(const void* data, size_t size) {
  Hasher h;
  h.bytes(data, size);
  return h.hex();
}

std::string wide_hash_hex(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full};
  size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      h[k] = (h[k] ^ w) * 0x100000001b3ull;
      h[k] ^= h[k] >> 29;
    }
  }
  Hasher tail;  // the lanes, the trailing bytes and the size, mixed
  for (uint64_t x : h) tail.u64(x);
  tail.bytes(p + i, size - i);
  tail.u64(size);
  return tail.hex();
}

std::string partition_content_key(const ir::Graph& g, const std::unordered_map<ir::ValueId, Tensor>& constants,
                                  std::span<const int32_t> nodes, std::span<const ir::ValueId> inputs,
                                  std::span<const ir::ValueId> outputs) {
  Hasher h;
  h.u64(nodes.size());
  for (int32_t n : nodes) {
    const ir::Node& node = g.nodes[static_cast<size_t>(n)];
    hash_node(h, node);
    for (ir::ValueId v : node.inputs) {
      auto it = v == ir::kNoValue ? constants.end() : constants.find(v);
      h.u64(it == constants.end() ? 0 : 1);
      if (it != constants.end()) hash_tensor(h, it->second);
    }
  }
  for (auto list : {inputs, outputs}) {
    h.u64(list.size());
    for (ir::ValueId v : list) {
      h.u64(static_cast<uint64_t>(v));
      hash_type(h, g.value(v).type);
    }
  }
  return h.hex();
}

}  // namespace kiln::runtime
