// write_program: ir::Graph + compiled partitions -> .kiln bytes.
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "program/program_file.h"
#include "program/program_generated.h"

namespace kiln::program {
namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

// Builds the FlatBuffer; segment bytes are collected in order and laid out
// after it by finish().
class Writer {
 public:
  Offset<fb::Graph> graph(const ir::Graph& g);
  uint32_t add_segment(std::span<const uint8_t> bytes) {
    segments_.push_back(bytes);
    return static_cast<uint32_t>(segments_.size() - 1);
  }
  FlatBufferBuilder& fbb() { return fbb_; }
  const std::vector<std::span<const uint8_t>>& segments() const { return segments_; }

 private:
  Offset<fb::ValueType> type(const ir::ValueType& t);
  Offset<fb::TensorRef> tensor(const Tensor& t);
  Offset<fb::Attribute> attribute(const ir::Attribute& a);
  Offset<fb::Node> node(const ir::Node& n);
  Offset<flatbuffers::Vector<Offset<flatbuffers::String>>> strings(const std::vector<std::string>& v) {
    std::vector<Offset<flatbuffers::String>> offs;
    for (const std::string& s : v) offs.push_back(fbb_.CreateString(s));
    return fbb_.CreateVector(offs);
  }

  FlatBufferBuilder fbb_{1 << 16};
  std::vector<std::span<const uint8_t>> segments_;
};

Offset<fb::ValueType> Writer::type(const ir::ValueType& t) {
  Offset<fb::ValueType> elem = t.elem ? type(*t.elem) : 0;
  std::vector<Offset<fb::Dim>> dims;
  for (const ir::Dim& d : t.dims) dims.push_back(fb::CreateDim(fbb_, d.value, fbb_.CreateString(d.param)));
  return fb::CreateValueType(fbb_, static_cast<uint8_t>(t.kind), static_cast<uint8_t>(t.dtype), t.has_shape,
                             fbb_.CreateVector(dims), elem);
}

Offset<fb::TensorRef> Writer::tensor(const Tensor& t) {
  std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
  auto d = fbb_.CreateVector(dims);
  if (t.dtype() == DType::kString) {
    std::vector<std::string> v(t.data<std::string>(), t.data<std::string>() + t.numel());
    return fb::CreateTensorRef(fbb_, static_cast<uint8_t>(t.dtype()), d, -1, strings(v));
  }
  int32_t seg = -1;
  if (t.defined()) {
    seg = static_cast<int32_t>(add_segment({static_cast<const uint8_t*>(t.raw_data()), t.nbytes()}));
  }
  return fb::CreateTensorRef(fbb_, static_cast<uint8_t>(t.dtype()), d, seg);
}

Offset<fb::Attribute> Writer::attribute(const ir::Attribute& a) {
  Offset<fb::Graph> g = a.g ? graph(*a.g) : 0;
  std::vector<Offset<fb::TensorRef>> tensors;
  for (const Tensor& t : a.tensors) tensors.push_back(tensor(t));
  std::vector<Offset<fb::Graph>> graphs;
  for (const auto& sg : a.graphs) graphs.push_back(graph(*sg));
  std::vector<Offset<fb::ValueType>> tps;
  for (const ir::ValueType& t : a.tps) tps.push_back(type(t));
  Offset<fb::TensorRef> t = a.t.defined() ? tensor(a.t) : 0;
  Offset<fb::ValueType> tp = a.tp.kind != ir::ValueType::Kind::kUnknown ? type(a.tp) : 0;
  auto name = fbb_.CreateString(a.name);
  auto ref = fbb_.CreateString(a.ref_attr_name);
  auto s = fbb_.CreateString(a.s);
  auto floats = fbb_.CreateVector(a.floats);
  auto ints = fbb_.CreateVector(a.ints);
  auto strs = strings(a.strings);
  return fb::CreateAttribute(fbb_, name, static_cast<uint8_t>(a.type), ref, a.f, a.i, s, t, g, tp, floats, ints,
                             strs, fbb_.CreateVector(tensors), fbb_.CreateVector(graphs), fbb_.CreateVector(tps));
}

Offset<fb::Node> Writer::node(const ir::Node& n) {
  std::vector<Offset<fb::Attribute>> attrs;
  for (const ir::Attribute& a : n.attributes) attrs.push_back(attribute(a));
  auto name = fbb_.CreateString(n.name);
  auto op = fbb_.CreateString(n.op_type);
  auto domain = fbb_.CreateString(n.domain);
  auto in = fbb_.CreateVector(n.inputs);
  auto out = fbb_.CreateVector(n.outputs);
  return fb::CreateNode(fbb_, name, op, domain, n.opset, in, out, fbb_.CreateVector(attrs));
}

Offset<fb::Graph> Writer::graph(const ir::Graph& g) {
  std::vector<Offset<fb::Value>> values;
  for (const ir::ValueInfo& v : g.values) {
    auto t = type(v.type);
    values.push_back(fb::CreateValue(fbb_, fbb_.CreateString(v.name), t));
  }
  std::vector<Offset<fb::Node>> nodes;
  for (const ir::Node& n : g.nodes) nodes.push_back(node(n));
  // Initializers in id order, so equal graphs give equal files.
  std::vector<ir::ValueId> ids;
  for (const auto& [id, t] : g.initializers) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::vector<Offset<fb::Initializer>> inits;
  for (ir::ValueId id : ids) inits.push_back(fb::CreateInitializer(fbb_, id, tensor(g.initializers.at(id))));
  std::vector<Offset<fb::Opset>> opsets;
  for (const auto& [d, v] : g.opsets) opsets.push_back(fb::CreateOpset(fbb_, fbb_.CreateString(d), v));
  auto name = fbb_.CreateString(g.name);
  auto vals = fbb_.CreateVector(values);
  auto nds = fbb_.CreateVector(nodes);
  auto in = fbb_.CreateVector(g.inputs);
  auto out = fbb_.CreateVector(g.outputs);
  auto ini = fbb_.CreateVector(inits);
  auto outer = fbb_.CreateVector(g.outer_refs);
  return fb::CreateGraph(fbb_, name, vals, nds, in, out, ini, outer, fbb_.CreateVector(opsets));
}

size_t align_up(size_t n) { return (n + kSegmentAlign - 1) / kSegmentAlign * kSegmentAlign; }

Offset<fb::Program> finish_program(Writer& w, const ir::Graph& graph, const ProgramContents& c,
                                   std::vector<fb::Segment>& segs) {
  FlatBufferBuilder& fbb = w.fbb();
  auto g = w.graph(graph);
  std::vector<Offset<fb::Partition>> parts;
  for (const PartitionRecord& p : c.partitions) {
    const auto seg = static_cast<int32_t>(w.add_segment(p.blob));
    parts.push_back(fb::CreatePartition(fbb, fbb.CreateString(p.id), fbb.CreateString(p.key),
                                        fbb.CreateString(p.backend), fbb.CreateString(p.backend_version),
                                        fbb.CreateString(p.compat_key), seg));
  }
  std::vector<Offset<flatbuffers::String>> backends;
  for (const std::string& b : c.backends) backends.push_back(fbb.CreateString(b));
  std::vector<Offset<fb::Option>> opts;
  for (const auto& [k, v] : c.options) opts.push_back(fb::CreateOption(fbb, fbb.CreateString(k), fbb.CreateString(v)));
  Offset<fb::MemoryPlan> plan = 0;
  if (c.plan.present)
    plan = fb::CreateMemoryPlan(fbb, c.plan.arena_bytes, fbb.CreateVector(c.plan.offsets),
                                fbb.CreateVector(c.plan.sizes));
  std::vector<Offset<fb::PackedWeight>> packed;
  for (const PackedRecord& r : c.packed) {
    const auto seg = static_cast<int32_t>(w.add_segment(r.bytes));
    packed.push_back(fb::CreatePackedWeight(fbb, r.value, fbb.CreateString(r.key), seg));
  }
  auto packed_vec = fbb.CreateVector(packed);
  // Segment offsets are absolute; they depend on the FlatBuffer's size,
  // which the offsets' own size does not change (a vector of fixed structs),
  // so reserve them first as zeros and patch after Finish.
  segs.assign(w.segments().size(), fb::Segment(0, 0));
  auto seg_vec = fbb.CreateVectorOfStructs(segs);
  return fb::CreateProgram(fbb, kFormatVersion, fbb.CreateString(c.producer), g, fbb.CreateVector(backends),
                           fbb.CreateVector(opts), c.keep_fallback, fbb.CreateVector(parts), seg_vec, c.arena_bytes, plan,
                           packed_vec);
}

}  // namespace

Status write_program(const ir::Graph& graph, const ProgramContents& contents, const std::string& path) {
  Writer w;
  std::vector<fb::Segment> segs;
  auto root = finish_program(w, graph, contents, segs);
  w.fbb().Finish(root, fb::ProgramIdentifier());
  uint8_t* buf = w.fbb().GetBufferPointer();
  const size_t fb_size = w.fbb().GetSize();
  // Patch the segment table in place now that every offset is known.
  auto* prog = fb::GetMutableProgram(buf);
  size_t off = align_up(kHeaderSize + fb_size);
  for (size_t i = 0; i < w.segments().size(); ++i) {
    fb::Segment* seg = prog->mutable_segments()->GetMutableObject(static_cast<flatbuffers::uoffset_t>(i));
    seg->mutate_offset(off);
    seg->mutate_size(w.segments()[i].size());
    off = align_up(off + w.segments()[i].size());
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return invalid_argument("cannot write '", tmp, "'");
    uint8_t header[kHeaderSize] = {};
    std::memcpy(header, kMagic, 8);
    const uint32_t ver = kFormatVersion, size = static_cast<uint32_t>(fb_size);
    std::memcpy(header + 8, &ver, 4);
    std::memcpy(header + 12, &size, 4);
    f.write(reinterpret_cast<const char*>(header), kHeaderSize);
    f.write(reinterpret_cast<const char*>(buf), static_cast<std::streamsize>(fb_size));
    size_t pos = kHeaderSize + fb_size;
    static const char zeros[kSegmentAlign] = {};
    for (const auto& s : w.segments()) {
      f.write(zeros, static_cast<std::streamsize>(align_up(pos) - pos));
      pos = align_up(pos);
      f.write(reinterpret_cast<const char*>(s.data()), static_cast<std::streamsize>(s.size()));
      pos += s.size();
    }
    if (!f.flush()) return invalid_argument("cannot write '", tmp, "' (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return invalid_argument("cannot rename '", tmp, "' to '", path, "': ", ec.message());
  return Status::ok();
}

}  // namespace kiln::program
