#include "model_scan.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "wire_format.h"

namespace kiln::cli {

namespace {

// ONNX field numbers (onnx/onnx.proto).
constexpr uint32_t kModelOpsetImport = 8, kModelGraph = 7, kModelFunctions = 25;
constexpr uint32_t kOpsetDomain = 1, kOpsetVersion = 2;
constexpr uint32_t kGraphNode = 1;
constexpr uint32_t kNodeInput = 1, kNodeOpType = 4, kNodeAttribute = 5, kNodeDomain = 7;
constexpr uint32_t kAttrName = 1, kAttrF = 2, kAttrI = 3, kAttrG = 6, kAttrGraphs = 11;
constexpr uint32_t kFunctionNode = 7;
constexpr int kMaxDepth = 64;

std::string normalize_domain(std::string_view d) {
  return d == "ai.onnx" ? std::string() : std::string(d);
}

class Scanner {
 public:
  explicit Scanner(ModelScan* out) : out_(out) {}

  bool model(std::span<const uint8_t> bytes) {
    wire::Reader r(bytes);
    wire::Field f;
    while (r.next(&f)) {
      if (f.number == kModelOpsetImport && f.type == wire::kLengthDelimited) {
        if (!opset(f.bytes)) return false;
      } else if (f.number == kModelGraph && f.type == wire::kLengthDelimited) {
        if (!nodes_of(f.bytes, kGraphNode, 0)) return false;
      } else if (f.number == kModelFunctions && f.type == wire::kLengthDelimited) {
        if (!nodes_of(f.bytes, kFunctionNode, 0)) return false;
      }
    }
    return !r.error();
  }

 private:
  bool opset(std::span<const uint8_t> bytes) {
    wire::Reader r(bytes);
    wire::Field f;
    std::string domain;
    int64_t version = 0;
    while (r.next(&f)) {
      if (f.number == kOpsetDomain && f.type == wire::kLengthDelimited) domain = normalize_domain(f.str());
      if (f.number == kOpsetVersion && f.type == wire::kVarint) version = static_cast<int64_t>(f.varint);
    }
    out_->opsets[domain] = version;
    return !r.error();
  }

  // The nodes (field `node_field`) of a GraphProto or FunctionProto.
  bool nodes_of(std::span<const uint8_t> bytes, uint32_t node_field, int depth) {
    if (depth > kMaxDepth) return false;
    wire::Reader r(bytes);
    wire::Field f;
    while (r.next(&f)) {
      if (f.number == node_field && f.type == wire::kLengthDelimited && !node(f.bytes, depth)) return false;
    }
    return !r.error();
  }

  bool node(std::span<const uint8_t> bytes, int depth) {
    ScannedNode n;
    std::vector<std::span<const uint8_t>> subgraphs;
    wire::Reader r(bytes);
    wire::Field f;
    while (r.next(&f)) {
      if (f.type != wire::kLengthDelimited) continue;
      if (f.number == kNodeInput) n.inputs.emplace_back(f.str());
      if (f.number == kNodeOpType) n.op_type = f.str();
      if (f.number == kNodeDomain) n.domain = normalize_domain(f.str());
      if (f.number == kNodeAttribute && !attribute(f.bytes, &n, &subgraphs)) return false;
    }
    if (r.error()) return false;
    out_->nodes.push_back(std::move(n));
    for (auto g : subgraphs) {
      if (!nodes_of(g, kGraphNode, depth + 1)) return false;
    }
    return true;
  }

  bool attribute(std::span<const uint8_t> bytes, ScannedNode* n, std::vector<std::span<const uint8_t>>* subgraphs) {
    wire::Reader r(bytes);
    wire::Field f;
    std::string name;
    bool has_i = false, has_f = false;
    int64_t i = 0;
    float fl = 0;
    while (r.next(&f)) {
      if (f.number == kAttrName && f.type == wire::kLengthDelimited) name = f.str();
      if (f.number == kAttrI && f.type == wire::kVarint) {
        i = static_cast<int64_t>(f.varint);
        has_i = true;
      }
      if (f.number == kAttrF && f.type == wire::kFixed32) {
        const auto bits = static_cast<uint32_t>(f.varint);
        std::memcpy(&fl, &bits, 4);
        has_f = true;
      }
      if ((f.number == kAttrG || f.number == kAttrGraphs) && f.type == wire::kLengthDelimited) {
        subgraphs->push_back(f.bytes);
      }
    }
    if (has_i) n->ints[name] = i;
    if (has_f) n->floats[name] = fl;
    return !r.error();
  }

  ModelScan* out_;
};

}  // namespace

int64_t ModelScan::onnx_opset() const {
  auto it = opsets.find("");
  return it == opsets.end() ? 0 : it->second;
}

Result<ModelScan> scan_model_bytes(std::span<const uint8_t> bytes, const std::string& what) {
  ModelScan scan;
  if (!Scanner(&scan).model(bytes)) return invalid_argument("'", what, "' is not a valid ONNX model file");
  return scan;
}

Result<ModelScan> scan_model_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_status(StatusCode::kIo, "cannot open '", path, "': ", std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return scan_model_bytes(bytes, path);
}

}  // namespace kiln::cli
