#include "template_program.h"

#include <cstring>

#include "template_ops.h"

namespace kiln_template {

using kiln::sdk::fail;

const char* op_name(OpKind k) {
  switch (k) {
    case OpKind::kAdd: return "Add";
    case OpKind::kMul: return "Mul";
    case OpKind::kRelu: return "Relu";
    case OpKind::kMatMul: return "MatMul";
    case OpKind::kMulAdd: return "MulAdd";
  }
  return "?";
}

namespace {

constexpr uint32_t kVersion = 1;
constexpr size_t kMaxCount = size_t{1} << 28;

size_t arity(OpKind k) { return k == OpKind::kRelu ? 1 : k == OpKind::kMulAdd ? 3 : 2; }

uint32_t fnv1a32(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 16777619u;
  }
  return h;
}

class Writer {
 public:
  template <class T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
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
  size_t pos() const { return pos_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// Scratch for values computed inside the partition, from the host allocator.
class Scratch {
 public:
  explicit Scratch(const kiln::sdk::Host& host) : host_(host) {}
  ~Scratch() {
    for (void* p : blocks_) host_.free(p);
  }
  float* get(int64_t numel) {
    void* p = host_.alloc(static_cast<size_t>(numel > 0 ? numel : 1) * sizeof(float));
    blocks_.push_back(p);
    return static_cast<float*>(p);
  }

 private:
  const kiln::sdk::Host& host_;
  std::vector<void*> blocks_;
};

}  // namespace

void Program::validate() const {
  auto slot_ok = [&](int32_t s) { return s >= 0 && static_cast<uint32_t>(s) < num_slots; };
  std::vector<int8_t> defined(num_slots, 0);
  for (const Input& in : inputs) {
    if (!slot_ok(in.slot)) fail(KILN_STATUS_INVALID_ARGUMENT, "input slot out of range");
    if (in.rank >= 0 && in.dims.size() != static_cast<size_t>(in.rank)) fail(KILN_STATUS_INVALID_ARGUMENT, "input rank mismatch");
    defined[static_cast<size_t>(in.slot)] = 1;
  }
  for (const Constant& c : constants) {
    if (!slot_ok(c.slot)) fail(KILN_STATUS_INVALID_ARGUMENT, "constant slot out of range");
    int64_t n = 1;
    for (int64_t d : c.dims) {
      if (d < 0) fail(KILN_STATUS_INVALID_ARGUMENT, "constant has a negative dim");
      n *= d;
    }
    if (static_cast<size_t>(n) != c.data.size()) fail(KILN_STATUS_INVALID_ARGUMENT, "constant data size mismatch");
    defined[static_cast<size_t>(c.slot)] = 1;
  }
  for (const Op& op : ops) {
    if (static_cast<uint8_t>(op.kind) > static_cast<uint8_t>(OpKind::kMulAdd)) fail(KILN_STATUS_INVALID_ARGUMENT, "unknown op kind");
    if (op.in.size() != arity(op.kind)) fail(KILN_STATUS_INVALID_ARGUMENT, std::string(op_name(op.kind)) + " has the wrong number of inputs");
    for (int32_t s : op.in)
      if (!slot_ok(s) || !defined[static_cast<size_t>(s)]) fail(KILN_STATUS_INVALID_ARGUMENT, "op reads an undefined slot");
    if (!slot_ok(op.out) || defined[static_cast<size_t>(op.out)]) fail(KILN_STATUS_INVALID_ARGUMENT, "op writes an invalid slot");
    defined[static_cast<size_t>(op.out)] = 1;
  }
  for (int32_t s : outputs)
    if (!slot_ok(s) || !defined[static_cast<size_t>(s)]) fail(KILN_STATUS_INVALID_ARGUMENT, "an output is never computed");
}

std::vector<uint8_t> Program::serialize() const {
  Writer w;
  w.out = {'K', 'T', 'P', 'L'};
  w.put<uint32_t>(kVersion);
  w.put<uint32_t>(num_slots);
  w.put<uint32_t>(static_cast<uint32_t>(inputs.size()));
  for (const Input& in : inputs) {
    w.put<int32_t>(in.slot);
    w.put<int32_t>(in.rank);
    for (int64_t d : in.dims) w.put<int64_t>(d);
  }
  w.put<uint32_t>(static_cast<uint32_t>(outputs.size()));
  for (int32_t s : outputs) w.put<int32_t>(s);
  w.put<uint32_t>(static_cast<uint32_t>(constants.size()));
  for (const Constant& c : constants) {
    w.put<int32_t>(c.slot);
    w.put<uint32_t>(static_cast<uint32_t>(c.dims.size()));
    for (int64_t d : c.dims) w.put<int64_t>(d);
    for (float f : c.data) w.put<float>(f);
  }
  w.put<uint32_t>(static_cast<uint32_t>(ops.size()));
  for (const Op& op : ops) {
    w.put<uint8_t>(static_cast<uint8_t>(op.kind));
    w.put<uint32_t>(static_cast<uint32_t>(op.in.size()));
    for (int32_t s : op.in) w.put<int32_t>(s);
    w.put<int32_t>(op.out);
  }
  w.put<uint32_t>(fnv1a32(w.out.data(), w.out.size()));
  return w.out;
}

Program Program::parse(const uint8_t* bytes, size_t size) {
  if (!bytes || size < 16) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob is too short to be a template partition");
  if (std::memcmp(bytes, "KTPL", 4) != 0) fail(KILN_STATUS_INVALID_ARGUMENT, "not a template partition (bad magic)");
  uint32_t stored;
  std::memcpy(&stored, bytes + size - 4, 4);
  if (stored != fnv1a32(bytes, size - 4)) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob is corrupt (checksum mismatch)");
  Reader r(bytes + 4, size - 8);
  uint32_t version = r.get<uint32_t>("version");
  if (version != kVersion) {
    fail(KILN_STATUS_FAILED_PRECONDITION, "compiled blob has format version " + std::to_string(version) +
                                              "; this template build reads version " + std::to_string(kVersion));
  }
  Program p;
  p.num_slots = r.get<uint32_t>("slot count");
  if (p.num_slots > kMaxCount) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has an impossible slot count");
  p.inputs.resize(r.count("input"));
  for (Input& in : p.inputs) {
    in.slot = r.get<int32_t>("input slot");
    in.rank = r.get<int32_t>("input rank");
    if (in.rank > 64) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has an input of rank > 64");
    for (int32_t i = 0; i < in.rank; ++i) in.dims.push_back(r.get<int64_t>("input dim"));
  }
  p.outputs.resize(r.count("output"));
  for (int32_t& s : p.outputs) s = r.get<int32_t>("output slot");
  p.constants.resize(r.count("constant"));
  for (Constant& c : p.constants) {
    c.slot = r.get<int32_t>("constant slot");
    size_t rank = r.count("constant rank");
    if (rank > 64) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has a constant of rank > 64");
    int64_t n = 1;
    for (size_t i = 0; i < rank; ++i) {
      int64_t d = r.get<int64_t>("constant dim");
      if (d < 0 || (d > 0 && n > static_cast<int64_t>(kMaxCount) / d)) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has an impossible constant shape");
      n *= d;
      c.dims.push_back(d);
    }
    if (static_cast<size_t>(n) * sizeof(float) > size) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob is truncated (constant data)");
    c.data.resize(static_cast<size_t>(n));
    for (float& f : c.data) f = r.get<float>("constant data");
  }
  p.ops.resize(r.count("op"));
  for (Op& op : p.ops) {
    op.kind = static_cast<OpKind>(r.get<uint8_t>("op kind"));
    op.in.resize(r.count("op input"));
    for (int32_t& s : op.in) s = r.get<int32_t>("op input slot");
    op.out = r.get<int32_t>("op output slot");
  }
  if (r.pos() != size - 8) fail(KILN_STATUS_INVALID_ARGUMENT, "compiled blob has trailing bytes");
  p.validate();
  return p;
}

void Program::run(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& in) const {
  if (in.size() != inputs.size()) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "execute got " + std::to_string(in.size()) + " inputs; the partition takes " +
                                           std::to_string(inputs.size()));
  }
  std::vector<F32> slots(num_slots);
  for (size_t i = 0; i < inputs.size(); ++i) {
    kiln::sdk::TensorView t = in[i];
    if (t.dtype != KILN_DTYPE_FLOAT32)
      fail(KILN_STATUS_INVALID_ARGUMENT, "input " + std::to_string(i) + " is " + kiln::sdk::dtype_name(t.dtype) + ", expected float32");
    const Input& spec = inputs[i];
    bool ok = spec.rank < 0 || t.rank == static_cast<size_t>(spec.rank);
    for (size_t d = 0; ok && spec.rank >= 0 && d < t.rank; ++d) ok = spec.dims[d] < 0 || spec.dims[d] == t.dims[d];
    if (!ok) {
      std::string want = "[";
      for (size_t d = 0; d < spec.dims.size(); ++d) want += (d ? ", " : "") + (spec.dims[d] < 0 ? std::string("?") : std::to_string(spec.dims[d]));
      fail(KILN_STATUS_INVALID_ARGUMENT, "input " + std::to_string(i) + " has shape " + kiln::sdk::dims_string(t.dims, t.rank) +
                                             "; the partition was compiled for " + want + "]");
    }
    if (t.nbytes < static_cast<size_t>(t.numel()) * sizeof(float) || (t.numel() > 0 && !t.data))
      fail(KILN_STATUS_INVALID_ARGUMENT, "input " + std::to_string(i) + " holds fewer bytes than its shape needs");
    slots[static_cast<size_t>(spec.slot)] = F32{t.shape(), t.as<float>()};
  }
  for (const Constant& c : constants) slots[static_cast<size_t>(c.slot)] = F32{c.dims, const_cast<float*>(c.data.data())};

  Scratch scratch(ctx.host());
  // Where each slot goes: a partition output (host memory) or scratch.
  auto output_index = [&](int32_t slot) -> int64_t {
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i] == slot) return static_cast<int64_t>(i);
    return -1;
  };
  auto alloc = [&](int32_t slot, std::vector<int64_t> dims) -> F32& {
    F32& s = slots[static_cast<size_t>(slot)];
    s.dims = std::move(dims);
    int64_t oi = output_index(slot);
    if (oi >= 0) s.data = ctx.allocate_output(static_cast<size_t>(oi), KILN_DTYPE_FLOAT32, s.dims).as<float>();
    else s.data = scratch.get(s.numel());
    return s;
  };
  for (const Op& op : ops) {
    const F32& a = slots[static_cast<size_t>(op.in[0])];
    switch (op.kind) {
      case OpKind::kAdd:
      case OpKind::kMul: {
        const F32& b = slots[static_cast<size_t>(op.in[1])];
        F32& out = alloc(op.out, broadcast_dims(a.dims, b.dims));
        binary(ctx, op.kind == OpKind::kAdd ? Binary::kAdd : Binary::kMul, a, b, out);
        break;
      }
      case OpKind::kRelu: {
        F32& out = alloc(op.out, a.dims);
        relu(ctx, a, out);
        break;
      }
      case OpKind::kMatMul: {
        const F32& b = slots[static_cast<size_t>(op.in[1])];
        F32& out = alloc(op.out, matmul_dims(a.dims, b.dims));
        matmul(ctx, a, b, out);
        break;
      }
      case OpKind::kMulAdd: {
        const F32& b = slots[static_cast<size_t>(op.in[1])];
        const F32& c = slots[static_cast<size_t>(op.in[2])];
        F32 prod{broadcast_dims(a.dims, b.dims), nullptr};
        prod.data = scratch.get(prod.numel());
        binary(ctx, Binary::kMul, a, b, prod);
        F32& out = alloc(op.out, broadcast_dims(prod.dims, c.dims));
        binary(ctx, Binary::kAdd, prod, c, out);
        break;
      }
    }
  }
}

}  // namespace kiln_template
