#include "onnx/model_parser.h"

#include <google/protobuf/io/coded_stream.h>

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "onnx/external_data.h"

namespace kiln::importer {

namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct FieldSpec {
  uint32_t number;
  const char* name;
  uint32_t wire;
};

// The top-level fields of ModelProto (onnx.proto, IR version 10).
constexpr FieldSpec kModelFields[] = {
    {1, "ir_version", kVarint},        {2, "producer_name", kLengthDelimited},
    {3, "producer_version", kLengthDelimited}, {4, "domain", kLengthDelimited},
    {5, "model_version", kVarint},     {6, "doc_string", kLengthDelimited},
    {7, "graph", kLengthDelimited},    {8, "opset_import", kLengthDelimited},
    {14, "metadata_props", kLengthDelimited}, {20, "training_info", kLengthDelimited},
    {25, "functions", kLengthDelimited},
};
// Unknown fields up to this number are tolerated as additions of newer
// ONNX versions; beyond it the bytes are taken for something else.
constexpr uint32_t kMaxPlausibleField = 32;

const FieldSpec* find_field(uint32_t number) {
  for (const FieldSpec& f : kModelFields)
    if (f.number == number) return &f;
  return nullptr;
}

// Reads a varint at p; returns bytes consumed, 0 when the input ends inside
// it, -1 when it is longer than 10 bytes.
int read_varint(const uint8_t* p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  for (int i = 0; i < 10; ++i) {
    if (p + i >= end) return 0;
    v |= static_cast<uint64_t>(p[i] & 0x7f) << (7 * i);
    if ((p[i] & 0x80) == 0) {
      *out = v;
      return i + 1;
    }
  }
  return -1;
}

std::string field_label(uint32_t number) {
  const FieldSpec* f = find_field(number);
  return f ? "field '" + std::string(f->name) + "' (" + std::to_string(number) + ")"
           : "field " + std::to_string(number);
}

// Walks the top-level fields of a ModelProto encoding without parsing the
// nested messages, to tell a truncated file from one that is not a model.
Status scan_model_fields(std::span<const uint8_t> bytes, const std::string& what) {
  const uint8_t* const begin = bytes.data();
  const uint8_t* const end = begin + bytes.size();
  const uint8_t* p = begin;
  const std::string not_model = what + " is not an ONNX model: ";
  while (p < end) {
    const size_t at = static_cast<size_t>(p - begin);
    uint64_t tag = 0;
    int n = read_varint(p, end, &tag);
    if (n == 0) return invalid_argument(what, " is truncated: it ends inside a field tag at byte ", at);
    if (n < 0) return invalid_argument(not_model, "invalid protobuf field tag at byte ", at);
    p += n;
    const uint64_t number = tag >> 3;
    const auto wire = static_cast<uint32_t>(tag & 7);
    if (number == 0 || number > (uint64_t{1} << 29))
      return invalid_argument(not_model, "invalid protobuf field number ", number, " at byte ", at);
    const FieldSpec* spec = find_field(static_cast<uint32_t>(number));
    if (!spec && number > kMaxPlausibleField)
      return invalid_argument(not_model, "unexpected field ", number, " at byte ", at);
    if (spec && spec->wire != wire)
      return invalid_argument(not_model, field_label(static_cast<uint32_t>(number)), " at byte ", at,
                              " has protobuf wire type ", wire, " instead of ", spec->wire);
    const size_t left = static_cast<size_t>(end - p);
    switch (wire) {
      case kVarint: {
        uint64_t v = 0;
        n = read_varint(p, end, &v);
        if (n == 0)
          return invalid_argument(what, " is truncated: it ends inside ", field_label(static_cast<uint32_t>(number)),
                                  " at byte ", at);
        if (n < 0) return invalid_argument(not_model, "invalid varint at byte ", at);
        p += n;
        break;
      }
      case kFixed64:
      case kFixed32: {
        const size_t size = wire == kFixed64 ? 8 : 4;
        if (left < size)
          return invalid_argument(what, " is truncated: it ends inside ", field_label(static_cast<uint32_t>(number)),
                                  " at byte ", at);
        p += size;
        break;
      }
      case kLengthDelimited: {
        uint64_t len = 0;
        n = read_varint(p, end, &len);
        if (n == 0)
          return invalid_argument(what, " is truncated: it ends inside ", field_label(static_cast<uint32_t>(number)),
                                  " at byte ", at);
        if (n < 0) return invalid_argument(not_model, "invalid length at byte ", at);
        p += n;
        if (len > static_cast<uint64_t>(end - p))
          return invalid_argument(what, " is truncated: ", field_label(static_cast<uint32_t>(number)), " at byte ",
                                  at, " needs ", len, " bytes but only ", end - p, " remain");
        p += len;
        break;
      }
      default:
        return invalid_argument(not_model, "invalid protobuf wire type ", wire, " at byte ", at);
    }
  }
  return Status::ok();
}

// How deep subgraphs (If/Loop/Scan bodies) nest, walking the wire format
// without recursion: Model.graph / Model.functions -> Graph.node /
// Function.node -> Node.attribute -> Attribute.g / Attribute.graphs -> Graph.
// Stops as soon as `limit` is passed. Malformed bytes end the walk quietly:
// the parse that follows reports them.
int subgraph_depth(std::span<const uint8_t> bytes, int limit) {
  enum Kind { kModel, kGraph, kFunction, kNode, kAttribute };
  struct Item {
    const uint8_t* p;
    const uint8_t* end;
    Kind kind;
    int depth;
  };
  std::vector<Item> todo = {{bytes.data(), bytes.data() + bytes.size(), kModel, 0}};
  int deepest = 0;
  while (!todo.empty()) {
    Item it = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, it.depth);
    if (deepest > limit) return deepest;
    while (it.p < it.end) {
      uint64_t tag = 0, v = 0;
      int n = read_varint(it.p, it.end, &tag);
      if (n <= 0) break;
      it.p += n;
      const uint64_t field = tag >> 3;
      const auto wire = static_cast<uint32_t>(tag & 7);
      if (wire == kVarint) {
        n = read_varint(it.p, it.end, &v);
        if (n <= 0) break;
        it.p += n;
      } else if (wire == kFixed64 || wire == kFixed32) {
        const ptrdiff_t size = wire == kFixed64 ? 8 : 4;
        if (it.end - it.p < size) break;
        it.p += size;
      } else if (wire == kLengthDelimited) {
        n = read_varint(it.p, it.end, &v);
        if (n <= 0 || v > static_cast<uint64_t>(it.end - it.p - n)) break;
        const uint8_t* sub = it.p + n;
        it.p = sub + v;
        Kind next = kModel;  // kModel: not a message this walk follows
        int depth = it.depth;
        if (it.kind == kModel && field == 7) next = kGraph;
        else if (it.kind == kModel && field == 25) next = kFunction;
        else if ((it.kind == kGraph && field == 1) || (it.kind == kFunction && field == 7)) next = kNode;
        else if (it.kind == kNode && field == 5) next = kAttribute;
        else if (it.kind == kAttribute && (field == 6 || field == 11)) next = kGraph, ++depth;
        if (next != kModel) todo.push_back({sub, it.p, next, depth});
      } else {
        break;  // groups and invalid wire types: not ONNX
      }
    }
  }
  return deepest;
}

}  // namespace

bool parse_message(std::span<const uint8_t> bytes, google::protobuf::MessageLite* out) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  // The default limit is 64 MB in older protobuf releases; models need 2 GiB.
  in.SetTotalBytesLimit(INT_MAX);
  return out->ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

Status parse_model_proto(std::span<const uint8_t> bytes, const std::string& what, onnx::ModelProto* out) {
  if (bytes.empty()) return invalid_argument(what, " is empty (0 bytes)");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return invalid_argument(what, " is ", bytes.size(),
                            " bytes; protobuf cannot parse more than 2 GiB, so models this large must keep "
                            "their weights in external data files");
  KILN_RETURN_IF_ERROR(scan_model_fields(bytes, what));
  // Before protobuf's recursive parse: its limit (100 nested messages) would
  // fail with no reason given, and the converter recurses per subgraph too.
  if (const int depth = subgraph_depth(bytes, kMaxSubgraphDepth); depth > kMaxSubgraphDepth)
    return invalid_argument(what, " has subgraphs (If/Loop/Scan bodies) nested more than ", kMaxSubgraphDepth,
                            " deep; Kiln accepts at most ", kMaxSubgraphDepth);
  if (!parse_message(bytes, out))
    return invalid_argument(what,
                            " is not a valid ONNX model: its top-level fields are intact but a nested message "
                            "(graph, node, tensor or function) is corrupt or truncated");
  return Status::ok();
}

Status parse_model_file(const std::string& path, onnx::ModelProto* out) {
  // Refuse a file too large for protobuf by its size, before mapping it.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > INT_MAX)
    return invalid_argument("model file '", path, "' is ", static_cast<uint64_t>(st.st_size),
                            " bytes; protobuf cannot parse more than 2 GiB, so models this large must keep "
                            "their weights in external data files");
  auto file = MappedFile::open(path);
  if (!file.ok()) return make_status(file.status().code(), "model file ", file.status().message());
  const std::string what = "model file '" + path + "'";
  return parse_model_proto(std::span<const uint8_t>((*file)->data(), (*file)->size()), what, out);
}

}  // namespace kiln::importer
