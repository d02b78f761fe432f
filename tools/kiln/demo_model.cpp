// kiln demo-model: writes a tiny image classifier (a 28x28 grayscale CNN with
// fixed pseudo-random weights, under 7 KB) so that `make demo` needs neither torch
// nor a download. The ONNX protobuf is written field by field (wire_format.h).
//
//   image float32[N, 1, 28, 28]
//     -> Conv 3x3 (8) -> Relu -> MaxPool 2 -> Conv 3x3 (16) -> Relu -> MaxPool 2
//     -> GlobalAveragePool -> Flatten -> Gemm (10) -> Softmax -> probabilities float32[N, 10]
//                                                 \-> ArgMax -> label int64[N]

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "demo_model.h"
#include "wire_format.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage = R"(usage: kiln demo-model OUT.onnx

Writes a small CNN classifier (input image float32[N, 1, 28, 28]; outputs
probabilities float32[N, 10] and label int64[N]) with fixed weights to OUT.onnx,
creating its folder. Run it with: kiln run OUT.onnx
)";

using wire::Writer;

// ONNX enums and field numbers (onnx/onnx.proto).
constexpr int64_t kFloat = 1, kInt64 = 7;
constexpr int64_t kAttrInt = 2, kAttrInts = 7;

// Deterministic weights: xorshift64* -> uniform [-1, 1).
class Rng {
 public:
  double uniform() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    const uint64_t x = s_ * 0x2545f4914f6cdd1dull;
    return static_cast<double>(x >> 11) / static_cast<double>(1ull << 52) - 1.0;
  }

 private:
  uint64_t s_ = 0x6b696c6e64656d6full;  // "kilndemo"
};

Writer tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& data) {
  Writer t;
  for (int64_t d : dims) t.varint_field(1, static_cast<uint64_t>(d));
  t.varint_field(2, kFloat);
  t.bytes_field(8, name);
  t.bytes_field(9, std::string_view(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
  return t;
}

// He-uniform weights for a layer with `fan_in` inputs, small biases.
Writer weights(Rng& rng, const std::string& name, const std::vector<int64_t>& dims, int64_t fan_in) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const double scale = fan_in > 0 ? std::sqrt(6.0 / static_cast<double>(fan_in)) : 0.1;
  std::vector<float> data(static_cast<size_t>(n));
  for (float& x : data) x = static_cast<float>(rng.uniform() * scale);
  return tensor(name, dims, data);
}

// A tensor type; dims < 0 are written as the symbol `param`.
Writer value_info(const std::string& name, int64_t elem_type, const std::vector<int64_t>& dims,
                  const std::string& param) {
  Writer shape;
  for (int64_t d : dims) {
    Writer dim;
    if (d >= 0) {
      dim.varint_field(1, static_cast<uint64_t>(d));
    } else {
      dim.bytes_field(2, param);
    }
    shape.message_field(1, dim);
  }
  Writer tensor_type;
  tensor_type.varint_field(1, static_cast<uint64_t>(elem_type));
  tensor_type.message_field(2, shape);
  Writer type;
  type.message_field(1, tensor_type);
  Writer vi;
  vi.bytes_field(1, name);
  vi.message_field(2, type);
  return vi;
}

Writer int_attr(const std::string& name, int64_t v) {
  Writer a;
  a.bytes_field(1, name);
  a.varint_field(3, static_cast<uint64_t>(v));
  a.varint_field(20, kAttrInt);
  return a;
}

Writer ints_attr(const std::string& name, const std::vector<int64_t>& v) {
  Writer a;
  a.bytes_field(1, name);
  for (int64_t x : v) a.varint_field(8, static_cast<uint64_t>(x));
  a.varint_field(20, kAttrInts);
  return a;
}

Writer node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
            const std::vector<Writer>& attrs = {}) {
  Writer n;
  for (const std::string& i : inputs) n.bytes_field(1, i);
  n.bytes_field(2, output);
  n.bytes_field(3, output);  // name nodes after their output
  n.bytes_field(4, op);
  for (const Writer& a : attrs) n.message_field(5, a);
  return n;
}

std::string build_model() {
  Rng rng;
  Writer graph;
  graph.bytes_field(2, "tiny_cnn");
  const std::vector<Writer> conv_attrs = {ints_attr("kernel_shape", {3, 3}), ints_attr("pads", {1, 1, 1, 1})};
  const std::vector<Writer> pool_attrs = {ints_attr("kernel_shape", {2, 2}), ints_attr("strides", {2, 2})};
  graph.message_field(1, node("Conv", {"image", "conv1.weight", "conv1.bias"}, "conv1", conv_attrs));
  graph.message_field(1, node("Relu", {"conv1"}, "relu1"));
  graph.message_field(1, node("MaxPool", {"relu1"}, "pool1", pool_attrs));
  graph.message_field(1, node("Conv", {"pool1", "conv2.weight", "conv2.bias"}, "conv2", conv_attrs));
  graph.message_field(1, node("Relu", {"conv2"}, "relu2"));
  graph.message_field(1, node("MaxPool", {"relu2"}, "pool2", pool_attrs));
  graph.message_field(1, node("GlobalAveragePool", {"pool2"}, "gap"));
  graph.message_field(1, node("Flatten", {"gap"}, "features", {int_attr("axis", 1)}));
  graph.message_field(1, node("Gemm", {"features", "fc.weight", "fc.bias"}, "logits", {int_attr("transB", 1)}));
  graph.message_field(1, node("Softmax", {"logits"}, "probabilities", {int_attr("axis", 1)}));
  graph.message_field(1, node("ArgMax", {"logits"}, "label", {int_attr("axis", 1), int_attr("keepdims", 0)}));

  graph.message_field(5, weights(rng, "conv1.weight", {8, 1, 3, 3}, 9));
  graph.message_field(5, weights(rng, "conv1.bias", {8}, 0));
  graph.message_field(5, weights(rng, "conv2.weight", {16, 8, 3, 3}, 72));
  graph.message_field(5, weights(rng, "conv2.bias", {16}, 0));
  graph.message_field(5, weights(rng, "fc.weight", {10, 16}, 16));
  graph.message_field(5, weights(rng, "fc.bias", {10}, 0));

  graph.message_field(11, value_info("image", kFloat, {-1, 1, 28, 28}, "N"));
  graph.message_field(12, value_info("probabilities", kFloat, {-1, 10}, "N"));
  graph.message_field(12, value_info("label", kInt64, {-1}, "N"));

  Writer opset;
  opset.bytes_field(1, "");
  opset.varint_field(2, 13);
  Writer model;
  model.varint_field(1, 8);  // IR version 8 (ONNX 1.10+)
  model.bytes_field(2, "kiln demo-model");
  model.bytes_field(3, "1");
  model.bytes_field(6, "A tiny CNN classifier for 28x28 grayscale images, fixed pseudo-random weights.");
  model.message_field(7, graph);
  model.message_field(8, opset);
  return model.bytes();
}

}  // namespace

std::string demo_model_bytes() { return build_model(); }

int demo_model_command(std::span<const std::string> argv) {
  static constexpr FlagSpec kFlags[] = {{"--help", false, false}};
  Result<Args> parsed = Args::parse(argv, kFlags, "demo-model");
  if (!parsed.is_ok()) return fail(parsed.status().message(), kExitUsage);
  if (parsed->has("--help")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (parsed->positionals().size() != 1) return fail("kiln demo-model needs one OUT.onnx path", kExitUsage);
  const fs::path out(parsed->positionals()[0]);
  std::error_code ec;
  if (out.has_parent_path()) {
    fs::create_directories(out.parent_path(), ec);
    if (ec) return fail("cannot create folder '" + out.parent_path().string() + "': " + ec.message());
  }
  const std::string bytes = demo_model_bytes();
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f) return fail("cannot create '" + out.string() + "'");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return fail("cannot write '" + out.string() + "'");
  std::cout << "wrote " << out.string() << " (" << bytes.size()
            << " bytes): image float32[N, 1, 28, 28] -> probabilities float32[N, 10], label int64[N]\n";
  return kExitOk;
}

}  // namespace kiln::cli
