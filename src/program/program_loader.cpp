// load_program_*: .kiln bytes -> checked ir::Graph + partition records.
// Every offset, size, index and enum from the file is checked before use.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "program/program_file.h"
#include "program/program_generated.h"

namespace kiln::program {
namespace {

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

Status bad(const std::string& what) { return invalid_argument("corrupt program: ", what); }

// The FlatBuffers 2.0 verifier checks a vector's alignment for its length
// field (4 bytes) only; vectors of 8-byte elements are checked here (an
// empty one may sit anywhere: nothing is read from it).
template <class V>
bool aligned8(const V* v) {
  return !v || v->size() == 0 || reinterpret_cast<uintptr_t>(v->data()) % 8 == 0;
}

// Reads a checked FlatBuffer into ir structures.
class Reader {
 public:
  Reader(std::span<const uint8_t> file, std::shared_ptr<void> holder, const fb::Program& prog)
      : file_(file), holder_(std::move(holder)), prog_(prog) {}
  Status check_segments(size_t fb_end);
  Status graph(const fb::Graph* in, ir::Graph& out, int depth);
  Result<std::span<const uint8_t>> segment(int32_t index) const {
    const auto* segs = prog_.segments();
    if (index < 0 || !segs || static_cast<size_t>(index) >= segs->size())
      return bad("segment index " + std::to_string(index) + " out of range");
    const fb::Segment* s = segs->Get(static_cast<flatbuffers::uoffset_t>(index));
    return file_.subspan(static_cast<size_t>(s->offset()), static_cast<size_t>(s->size()));
  }
  size_t constant_bytes = 0;

 private:
  Result<ir::ValueType> type(const fb::ValueType* in, int depth) const;
  Result<Tensor> tensor(const fb::TensorRef* in);
  Status attribute(const fb::Attribute* in, ir::Attribute& a, int depth);
  Status node(const fb::Node* in, ir::Node& n, size_t num_values, int depth);

  std::span<const uint8_t> file_;
  std::shared_ptr<void> holder_;
  const fb::Program& prog_;
};

Status Reader::check_segments(size_t fb_end) {
  if (!prog_.segments()) return Status::ok();
  if (!aligned8(prog_.segments())) return bad("misaligned segment table");
  for (const fb::Segment* s : *prog_.segments()) {
    const uint64_t off = s->offset(), size = s->size();
    if (off % kSegmentAlign != 0 || off < fb_end || off > file_.size() || size > file_.size() - off)
      return bad("segment at " + std::to_string(off) + " (" + std::to_string(size) +
                 " bytes) is misaligned or outside the file of " + std::to_string(file_.size()) + " bytes");
  }
  return Status::ok();
}

Result<ir::ValueType> Reader::type(const fb::ValueType* in, int depth) const {
  ir::ValueType t;
  if (!in) return t;
  if (depth > 16) return bad("value type nested too deep");
  if (in->kind() > static_cast<uint8_t>(ir::ValueType::Kind::kMap)) return bad("unknown value kind");
  if (in->dtype() >= kNumDTypes) return bad("unknown dtype " + std::to_string(in->dtype()));
  t.kind = static_cast<ir::ValueType::Kind>(in->kind());
  t.dtype = static_cast<DType>(in->dtype());
  t.has_shape = in->has_shape();
  if (in->dims()) {
    for (const fb::Dim* d : *in->dims()) t.dims.push_back(ir::Dim{d->value() < 0 ? -1 : d->value(), str(d->param())});
  }
  if (in->elem()) {
    KILN_ASSIGN_OR_RETURN(ir::ValueType e, type(in->elem(), depth + 1));
    t.elem = std::make_shared<ir::ValueType>(std::move(e));
  }
  return t;
}

Result<Tensor> Reader::tensor(const fb::TensorRef* in) {
  if (!in) return Tensor();
  if (in->dtype() >= kNumDTypes) return bad("tensor dtype " + std::to_string(in->dtype()));
  const auto dtype = static_cast<DType>(in->dtype());
  if (!aligned8(in->dims())) return bad("misaligned tensor dims");
  Shape shape;
  if (in->dims()) for (int64_t d : *in->dims()) shape.push_back(d);
  KILN_ASSIGN_OR_RETURN(const size_t nbytes, checked_tensor_bytes(dtype, shape));
  if (dtype == DType::kUndefined) return Tensor();
  if (dtype == DType::kString) {
    const size_t n = in->strings() ? in->strings()->size() : 0;
    if (in->segment() != -1 || static_cast<int64_t>(n) != shape.numel()) return bad("string tensor size");
    Tensor t = Tensor::allocate(dtype, shape);
    for (size_t i = 0; i < n; ++i) t.data<std::string>()[i] = str(in->strings()->Get(static_cast<flatbuffers::uoffset_t>(i)));
    return t;
  }
  KILN_ASSIGN_OR_RETURN(std::span<const uint8_t> seg, segment(in->segment()));
  if (seg.size() != nbytes)
    return bad("tensor of " + std::to_string(nbytes) + " bytes in a segment of " + std::to_string(seg.size()));
  constant_bytes += nbytes;
  if (nbytes == 0) return Tensor::allocate(dtype, shape);
  // The mapping is private and writable (copy on write), so kernels get the
  // same non-const pointer they get from any tensor.
  return Tensor::wrap(dtype, std::move(shape), const_cast<uint8_t*>(seg.data()), holder_);
}

Status Reader::attribute(const fb::Attribute* in, ir::Attribute& a, int depth) {
  a.name = str(in->name());
  static constexpr uint8_t kKnown[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14};
  if (std::find(std::begin(kKnown), std::end(kKnown), in->type()) == std::end(kKnown))
    return bad("attribute '" + a.name + "' has unknown type " + std::to_string(in->type()));
  a.type = static_cast<ir::AttrType>(in->type());
  a.ref_attr_name = str(in->ref_attr_name());
  a.f = in->f();
  a.i = in->i();
  a.s = str(in->s());
  KILN_ASSIGN_OR_RETURN(a.t, tensor(in->t()));
  if (in->g()) {
    a.g = std::make_shared<ir::Graph>();
    KILN_RETURN_IF_ERROR(graph(in->g(), *a.g, depth + 1));
  }
  KILN_ASSIGN_OR_RETURN(a.tp, type(in->tp(), 0));
  if (in->floats()) a.floats.assign(in->floats()->begin(), in->floats()->end());
  if (!aligned8(in->ints())) return bad("misaligned ints of attribute '" + a.name + "'");
  if (in->ints()) a.ints.assign(in->ints()->begin(), in->ints()->end());
  if (in->strings()) for (const auto* s : *in->strings()) a.strings.push_back(str(s));
  if (in->tensors()) {
    for (const fb::TensorRef* t : *in->tensors()) {
      KILN_ASSIGN_OR_RETURN(Tensor x, tensor(t));
      a.tensors.push_back(std::move(x));
    }
  }
  if (in->graphs()) {
    for (const fb::Graph* g : *in->graphs()) {
      a.graphs.push_back(std::make_shared<ir::Graph>());
      KILN_RETURN_IF_ERROR(graph(g, *a.graphs.back(), depth + 1));
    }
  }
  if (in->tps()) {
    for (const fb::ValueType* t : *in->tps()) {
      KILN_ASSIGN_OR_RETURN(ir::ValueType x, type(t, 0));
      a.tps.push_back(std::move(x));
    }
  }
  return Status::ok();
}

Status check_ids(const flatbuffers::Vector<int32_t>* ids, size_t num_values, bool allow_none, const char* what) {
  if (!ids) return Status::ok();
  for (int32_t v : *ids) {
    if ((v == ir::kNoValue && allow_none) || (v >= 0 && static_cast<size_t>(v) < num_values)) continue;
    return bad(std::string(what) + " names value " + std::to_string(v) + " of " + std::to_string(num_values));
  }
  return Status::ok();
}

Status Reader::node(const fb::Node* in, ir::Node& n, size_t num_values, int depth) {
  n.name = str(in->name());
  n.op_type = str(in->op_type());
  n.domain = str(in->domain());
  n.opset = in->opset();
  KILN_RETURN_IF_ERROR(check_ids(in->inputs(), num_values, true, "a node input"));
  KILN_RETURN_IF_ERROR(check_ids(in->outputs(), num_values, true, "a node output"));
  if (in->inputs()) n.inputs.assign(in->inputs()->begin(), in->inputs()->end());
  if (in->outputs()) n.outputs.assign(in->outputs()->begin(), in->outputs()->end());
  if (in->attributes()) {
    for (const fb::Attribute* a : *in->attributes()) {
      n.attributes.emplace_back();
      KILN_RETURN_IF_ERROR(attribute(a, n.attributes.back(), depth));
    }
  }
  return Status::ok();
}

Status Reader::graph(const fb::Graph* in, ir::Graph& g, int depth) {
  if (!in) return bad("missing graph");
  if (depth > 32) return bad("subgraphs nested too deep");
  g.name = str(in->name());
  if (in->values()) {
    for (const fb::Value* v : *in->values()) {
      KILN_ASSIGN_OR_RETURN(ir::ValueType t, type(v->type(), 0));
      g.add_value(str(v->name()), std::move(t));
    }
  }
  const size_t nv = g.values.size();
  KILN_RETURN_IF_ERROR(check_ids(in->inputs(), nv, false, "a graph input"));
  KILN_RETURN_IF_ERROR(check_ids(in->outputs(), nv, false, "a graph output"));
  KILN_RETURN_IF_ERROR(check_ids(in->outer_refs(), nv, false, "an outer reference"));
  if (in->inputs()) g.inputs.assign(in->inputs()->begin(), in->inputs()->end());
  if (in->outputs()) g.outputs.assign(in->outputs()->begin(), in->outputs()->end());
  if (in->outer_refs()) g.outer_refs.assign(in->outer_refs()->begin(), in->outer_refs()->end());
  if (in->opsets()) for (const fb::Opset* o : *in->opsets()) g.opsets[str(o->domain())] = o->version();
  if (in->initializers()) {
    for (const fb::Initializer* i : *in->initializers()) {
      if (i->value() < 0 || static_cast<size_t>(i->value()) >= nv || g.initializers.count(i->value()))
        return bad("initializer names value " + std::to_string(i->value()));
      KILN_ASSIGN_OR_RETURN(Tensor t, tensor(i->tensor()));
      g.initializers.emplace(i->value(), std::move(t));
    }
  }
  if (in->nodes()) {
    g.nodes.resize(in->nodes()->size());
    for (size_t i = 0; i < g.nodes.size(); ++i)
      KILN_RETURN_IF_ERROR(node(in->nodes()->Get(static_cast<flatbuffers::uoffset_t>(i)), g.nodes[i], nv, depth));
  }
  Status st = g.validate();
  if (!st.is_ok()) return bad("graph '" + g.name + "': " + st.message());
  return Status::ok();
}

// The memory plan: one offset and size per main-graph value, each inside
// the arena without overflow; the arena within the tensor size limit.
Status read_plan(const fb::MemoryPlan* in, size_t num_values, StoredPlan& out) {
  if (!in) return Status::ok();
  const auto* offs = in->offsets();
  const auto* sizes = in->sizes();
  if (!aligned8(offs) || !aligned8(sizes)) return bad("misaligned memory plan");
  const size_t n_off = offs ? offs->size() : 0, n_size = sizes ? sizes->size() : 0;
  if (n_off != num_values || n_size != num_values)
    return bad("memory plan has " + std::to_string(n_off) + " offsets and " + std::to_string(n_size) +
               " sizes for " + std::to_string(num_values) + " values");
  const uint64_t arena = in->arena_bytes();
  if (arena > tensor_byte_limit())
    return bad("memory plan arena of " + std::to_string(arena) + " bytes is over the tensor size limit");
  out.arena_bytes = arena;
  out.offsets.resize(num_values);
  out.sizes.resize(num_values);
  for (size_t v = 0; v < num_values; ++v) {
    const auto i = static_cast<flatbuffers::uoffset_t>(v);
    const int64_t off = offs->Get(i);
    const uint64_t size = sizes->Get(i);
    const bool none = off == -1 && size == 0;
    if (!none && (off < 0 || static_cast<uint64_t>(off) % kSegmentAlign != 0 || size > arena ||
                  static_cast<uint64_t>(off) > arena - size))
      return bad("memory plan puts value " + std::to_string(v) + " at offset " + std::to_string(off) + " (" +
                 std::to_string(size) + " bytes): misaligned or outside the arena of " + std::to_string(arena) +
                 " bytes");
    out.offsets[v] = off;
    out.sizes[v] = size;
  }
  out.present = true;
  return Status::ok();
}

// Packed weights: a main-graph value, a key and a segment each.
Status read_packed(Reader& r, const fb::Program& p, size_t num_values, ProgramContents& c) {
  if (!p.packed()) return Status::ok();
  for (const fb::PackedWeight* x : *p.packed()) {
    if (x->value() < 0 || static_cast<size_t>(x->value()) >= num_values)
      return bad("packed weight names value " + std::to_string(x->value()) + " of " + std::to_string(num_values));
    if (!x->key() || x->key()->size() == 0) return bad("packed weight without a key");
    PackedRecord rec{x->value(), x->key()->str(), {}};
    KILN_ASSIGN_OR_RETURN(rec.bytes, r.segment(x->segment()));
    c.packed.push_back(std::move(rec));
  }
  return Status::ok();
}

Status read_contents(Reader& r, const fb::Program& p, size_t num_values, ProgramContents& c) {
  KILN_RETURN_IF_ERROR(read_plan(p.memory_plan(), num_values, c.plan));
  KILN_RETURN_IF_ERROR(read_packed(r, p, num_values, c));
  c.producer = str(p.producer());
  if (p.backends()) for (const auto* b : *p.backends()) c.backends.push_back(str(b));
  if (p.options()) for (const fb::Option* o : *p.options()) c.options.emplace_back(str(o->key()), str(o->value()));
  c.keep_fallback = p.keep_fallback();
  c.arena_bytes = p.arena_bytes();
  if (!p.partitions()) return Status::ok();
  for (const fb::Partition* x : *p.partitions()) {
    PartitionRecord rec{str(x->id()), str(x->key()), str(x->backend()), str(x->backend_version()),
                        str(x->compat_key()), {}};
    KILN_ASSIGN_OR_RETURN(rec.blob, r.segment(x->blob_segment()));
    c.partitions.push_back(std::move(rec));
  }
  return Status::ok();
}

Result<LoadedProgram> load_checked(std::span<const uint8_t> bytes, std::shared_ptr<void> holder) {
  if (bytes.size() < kHeaderSize || !has_program_magic(bytes)) return bad("no Kiln program header");
  uint32_t version, fb_size;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&fb_size, bytes.data() + 12, 4);
  if (version != kFormatVersion)
    return invalid_argument("program format version ", version, " is not supported (this build reads ",
                            kFormatVersion, ")");
  if (fb_size > bytes.size() - kHeaderSize)
    return bad("FlatBuffer of " + std::to_string(fb_size) + " bytes in a file of " + std::to_string(bytes.size()) +
               " (truncated?)");
  const uint8_t* fbp = bytes.data() + kHeaderSize;
  flatbuffers::Verifier v(fbp, fb_size, /*max_depth=*/128, /*max_tables=*/10000000);
  if (!fb::VerifyProgramBuffer(v)) return bad("the FlatBuffer does not verify");
  const fb::Program* p = fb::GetProgram(fbp);
  LoadedProgram out;
  out.file_size = bytes.size();
  out.format_version = version;
  Reader r(bytes, holder, *p);
  KILN_RETURN_IF_ERROR(r.check_segments(kHeaderSize + fb_size));
  KILN_RETURN_IF_ERROR(r.graph(p->graph(), out.graph, 0));
  if (!out.graph.outer_refs.empty()) return bad("the main graph has outer references");
  KILN_RETURN_IF_ERROR(read_contents(r, *p, out.graph.values.size(), out.contents));
  out.constant_bytes = r.constant_bytes;
  out.mapping = std::move(holder);
  return out;
}

}  // namespace

bool has_program_magic(std::span<const uint8_t> head) {
  return head.size() >= sizeof kMagic && std::memcmp(head.data(), kMagic, sizeof kMagic) == 0;
}

bool is_program_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t head[sizeof kMagic] = {};
  const ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  return n == static_cast<ssize_t>(sizeof head) && has_program_magic(head);
}

Result<LoadedProgram> load_program_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("cannot open program '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    return invalid_argument("program '", path, "' is empty or unreadable");
  }
  const auto size = static_cast<size_t>(st.st_size);
  // Private and writable: pages are shared with the page cache until written.
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) return invalid_argument("cannot map program '", path, "': ", std::strerror(errno));
  std::shared_ptr<void> holder(base, [size](void* b) { ::munmap(b, size); });
  auto r = load_checked({static_cast<const uint8_t*>(base), size}, std::move(holder));
  if (!r.is_ok()) return invalid_argument(path, ": ", r.status().message());
  return r;
}

Result<LoadedProgram> load_program_bytes(std::span<const uint8_t> bytes) {
  const size_t n = (bytes.size() + kSegmentAlign - 1) / kSegmentAlign * kSegmentAlign;
  void* buf = std::aligned_alloc(kSegmentAlign, n == 0 ? kSegmentAlign : n);
  if (!buf) return invalid_argument("out of memory copying a program of ", bytes.size(), " bytes");
  if (!bytes.empty()) std::memcpy(buf, bytes.data(), bytes.size());
  std::shared_ptr<void> holder(buf, [](void* b) { std::free(b); });
  return load_checked({static_cast<const uint8_t*>(buf), bytes.size()}, std::move(holder));
}

}  // namespace kiln::program
