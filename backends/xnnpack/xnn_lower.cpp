#include "xnn_lower.h"

#include <cmath>
#include <limits>

#include "xnn_lowerer.h"

namespace kiln_xnnpack {

using kiln::sdk::fail;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Unary {
  const char* op;
  OpKind kind;
  int64_t min_opset;
};
constexpr Unary kUnary[] = {
    {"Sigmoid", OpKind::kSigmoid, 6}, {"HardSwish", OpKind::kHardSwish, 14}, {"Abs", OpKind::kAbs, 6},
    {"Neg", OpKind::kNeg, 6},         {"Sqrt", OpKind::kSqrt, 6},             {"Floor", OpKind::kFloor, 6},
    {"Ceil", OpKind::kCeil, 6},       {"Elu", OpKind::kElu, 6},               {"LeakyRelu", OpKind::kLeakyRelu, 6},
};

struct Binary {
  const char* op;
  OpKind kind;
};
constexpr Binary kBinary[] = {{"Add", OpKind::kAdd}, {"Sub", OpKind::kSub}, {"Mul", OpKind::kMul},
                              {"Div", OpKind::kDiv}, {"Max", OpKind::kMax}, {"Min", OpKind::kMin}};

// A 4-D [N, C, H, W] tensor whose NCHW and NHWC element orders agree.
bool order_trivial(const std::vector<int64_t>& d) { return d.size() != 4 || d[1] == 1 || d[2] * d[3] == 1; }

}  // namespace

void decline(const std::string& why) { fail(KILN_STATUS_UNIMPLEMENTED, why); }

std::vector<int64_t> internal_dims(const std::vector<int64_t>& d) {
  if (d.size() == 4) return {d[0], d[2], d[3], d[1]};
  return d;
}

std::vector<float> to_nhwc(const std::vector<float>& data, const std::vector<int64_t>& d) {
  if (d.size() != 4) return data;
  std::vector<float> out(data.size());
  const size_t n = static_cast<size_t>(d[0]), c = static_cast<size_t>(d[1]), hw = static_cast<size_t>(d[2] * d[3]);
  for (size_t b = 0; b < n; ++b)
    for (size_t ch = 0; ch < c; ++ch)
      for (size_t p = 0; p < hw; ++p) out[(b * hw + p) * c + ch] = data[(b * c + ch) * hw + p];
  return out;
}

std::vector<int64_t> Lowerer::dims(const Value& v) const {
  if (!v.is_static()) decline("'" + v.name() + "' has a dynamic shape (XNNPACK partitions are compiled for static shapes)");
  return v.dims();
}

void Lowerer::add_input(const Value& v) {
  const std::vector<int64_t> d = dims(v);
  const uint32_t id = prog_.add_value(internal_dims(d));
  values_[v.raw()] = id;
  prog_.inputs.push_back({id, d.size() == 4});
}

uint32_t Lowerer::value_of(const Value& v) const {
  auto it = values_.find(v.raw());
  if (it == values_.end()) fail(KILN_STATUS_INVALID_ARGUMENT, "'" + v.name() + "' is not computed in the partition");
  return it->second;
}

uint32_t Lowerer::in(const Node& n, size_t i) {
  Value v = n.input(i);
  if (!v) decline(n.op_type() + " input " + std::to_string(i) + " is omitted");
  if (v.is_constant()) decline(n.op_type() + " input '" + v.name() + "' is a constant here (expected a tensor computed at run time)");
  auto it = values_.find(v.raw());
  if (it != values_.end()) return it->second;
  if (!standalone_) fail(KILN_STATUS_INVALID_ARGUMENT, "node " + n.label() + " reads '" + v.name() + "', which is neither a partition input, a constant nor computed in the group");
  add_input(v);
  return values_[v.raw()];
}

uint32_t Lowerer::out(const Node& n, size_t i) {
  Value v = n.output(i);
  const uint32_t id = prog_.add_value(internal_dims(dims(v)));
  values_[v.raw()] = id;
  return id;
}

void Lowerer::alias(const Node& n, uint32_t value) { values_[n.output(0).raw()] = value; }

std::vector<float> Lowerer::constant(const Node& n, size_t i, std::vector<int64_t>* d) {
  Value v = n.input(i);
  if (!v || !v.is_constant()) decline(n.op_type() + " input " + std::to_string(i) + " is not a constant");
  kiln::sdk::TensorView t = v.constant();
  if (t.dtype != KILN_DTYPE_FLOAT32) decline(n.op_type() + " constant '" + v.name() + "' is not float32");
  if (d) *d = t.shape();
  return std::vector<float>(t.as<const float>(), t.as<const float>() + t.numel());
}

std::vector<int64_t> Lowerer::int_constant(const Node& n, size_t i) {
  Value v = n.input(i);
  if (!v || !v.is_constant()) decline(n.op_type() + " input " + std::to_string(i) + " is not a constant");
  kiln::sdk::TensorView t = v.constant();
  std::vector<int64_t> out;
  if (t.dtype == KILN_DTYPE_INT64) out.assign(t.as<const int64_t>(), t.as<const int64_t>() + t.numel());
  else if (t.dtype == KILN_DTYPE_INT32) out.assign(t.as<const int32_t>(), t.as<const int32_t>() + t.numel());
  else decline(n.op_type() + " constant '" + v.name() + "' is not an integer tensor");
  return out;
}

Op& Lowerer::emit(OpKind kind, std::vector<uint32_t> inputs, uint32_t output) {
  Op op;
  op.kind = kind;
  op.in = std::move(inputs);
  op.out = output;
  if (has_output_clamp(kind)) op.floats = {-kInf, kInf};
  producer_[output] = prog_.ops.size();
  prog_.ops.push_back(std::move(op));
  return prog_.ops.back();
}

Op* Lowerer::fusible_producer(const Value& v) {
  if (standalone_ || part_outputs_.count(v.raw()) || v.consumers().size() != 1) return nullptr;
  auto it = values_.find(v.raw());
  if (it == values_.end()) return nullptr;
  auto p = producer_.find(it->second);
  return p == producer_.end() ? nullptr : &prog_.ops[p->second];
}

void Lowerer::check_node(const Node& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") decline("domain '" + n.domain() + "' is not ONNX");
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    Value v = n.input(i);
    if (!v || v.is_constant()) continue;
    if (v.kind() != KILN_VALUE_TENSOR) decline("input '" + v.name() + "' is not a tensor");
    if (v.dtype() != KILN_DTYPE_FLOAT32) decline("input '" + v.name() + "' is " + kiln::sdk::dtype_name(v.dtype()) + "; XNNPACK runs float32 here");
    const std::vector<int64_t> d = dims(v);
    if (d.empty() || d.size() > 6) decline("input '" + v.name() + "' has rank " + std::to_string(d.size()) + " (XNNPACK takes 1 to 6)");
    for (int64_t x : d)
      if (x <= 0) decline("input '" + v.name() + "' is empty");
  }
  for (size_t i = 0; i < n.num_outputs(); ++i) {
    Value v = n.output(i);
    if (!v) continue;
    if (v.dtype() != KILN_DTYPE_FLOAT32) decline("output '" + v.name() + "' is not float32");
    const std::vector<int64_t> d = dims(v);
    if (d.empty() || d.size() > 6) decline("output '" + v.name() + "' has rank " + std::to_string(d.size()));
  }
}

void Lowerer::lower(const Node& n) {
  check_node(n);
  const std::string op = n.op_type();
  if (n.num_outputs() != 1 && op != "Dropout" && op != "BatchNormalization")
    decline(op + " with " + std::to_string(n.num_outputs()) + " outputs");
  for (size_t i = 1; i < n.num_outputs(); ++i)
    if (n.output(i)) decline(op + " with its optional output " + std::to_string(i) + " used");
  if (op == "Conv") return lower_conv(n);
  if (op == "Gemm") return lower_gemm(n);
  if (op == "MatMul") return lower_matmul(n);
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") return lower_pool(n);
  if (op == "BatchNormalization") return lower_batchnorm(n);
  if (op == "Resize") return lower_resize(n);
  if (op == "Pad") return lower_pad(n);
  if (op == "Relu") return lower_clamp(n, 0.0f, kInf);
  if (op == "Clip") {
    float lo = -kInf, hi = kInf;
    if (n.opset() < 11) {
      lo = n.attr_float("min", -kInf);
      hi = n.attr_float("max", kInf);
    } else {
      std::vector<int64_t> d;
      if (n.num_inputs() > 1 && n.input(1)) lo = constant(n, 1, &d).at(0);
      if (n.num_inputs() > 2 && n.input(2)) hi = constant(n, 2, &d).at(0);
    }
    if (!(lo <= hi)) decline("Clip with min > max");
    return lower_clamp(n, lo, hi);
  }
  if (op == "Mul" && lower_self_gated_mul(n)) return;
  if (op == "Sigmoid" && defer_self_gate(n, OpKind::kSiLU)) return;
  for (const Binary& b : kBinary)
    if (op == b.op) return lower_binary(n, b.kind);
  for (const Unary& u : kUnary)
    if (op == u.op) return lower_elementwise(n);
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" || op == "Dropout")
    return lower_reshape(n);
  if (op == "Softmax") return lower_softmax(n);
  if (op == "PRelu") return lower_prelu(n);
  if (op == "HardSigmoid") return lower_hardsigmoid(n);
  if (op == "Concat") return lower_concat(n);
  if (op == "DepthToSpace") return lower_depth_to_space(n);
  if (op == "Transpose") decline("Transpose: this XNNPACK (git 2022-02-16) has no transpose in its subgraph API");
  if (op == "Gather" || op == "Slice" || op == "Split") decline(op + ": not in this XNNPACK's subgraph API");
  decline("op " + op + " is not one XNNPACK runs (see backends/xnnpack/README.md)");
}

void Lowerer::lower_clamp(const Node& n, float lo, float hi) {
  if (Op* p = fusible_producer(n.input(0)); p && has_output_clamp(p->kind)) {
    p->floats[0] = std::max(p->floats[0], lo);
    p->floats[1] = std::min(p->floats[1], hi);
    return alias(n, p->out);
  }
  const uint32_t x = in(n, 0);
  emit(OpKind::kClamp, {x}, out(n)).floats = {lo, hi};
}

void Lowerer::lower_elementwise(const Node& n) {
  const std::string op = n.op_type();
  for (const Unary& u : kUnary) {
    if (op != u.op) continue;
    if (n.opset() < u.min_opset) decline(op + " at opset " + std::to_string(n.opset()) + " (consumed_inputs) is not supported");
    const uint32_t x = in(n, 0);
    Op& o = emit(u.kind, {x}, out(n));
    if (u.kind == OpKind::kElu) o.floats = {n.attr_float("alpha", 1.0f)};
    if (u.kind == OpKind::kLeakyRelu) o.floats = {n.attr_float("alpha", 0.01f)};
    return;
  }
}

// Operand i of a broadcasting op of output rank `rank`: a run-time tensor of
// that rank, or a constant reshaped (and for rank 4 permuted) to it.
uint32_t Lowerer::broadcast_operand(const Node& n, size_t i, size_t rank) {
  Value v = n.input(i);
  if (!v) decline(n.op_type() + " input " + std::to_string(i) + " is omitted");
  if (!v.is_constant()) {
    if (rank == 4 && v.rank() != 4) {
      decline(n.op_type() + " broadcasts a rank-" + std::to_string(v.rank()) + " run-time tensor against a 4-D one (NHWC layout)");
    }
    return in(n, i);
  }
  std::vector<int64_t> d;
  std::vector<float> data = constant(n, i, &d);
  if (d.size() > rank) decline(n.op_type() + " constant has a higher rank than the output");
  d.insert(d.begin(), rank - d.size(), 1);
  if (data.empty()) decline(n.op_type() + " constant is empty");
  return prog_.add_constant(internal_dims(d), to_nhwc(data, d));
}

void Lowerer::lower_binary(const Node& n, OpKind kind) {
  if (n.num_inputs() != 2) decline(n.op_type() + " with " + std::to_string(n.num_inputs()) + " inputs (XNNPACK takes 2)");
  if (n.opset() < 7) decline(n.op_type() + " at opset " + std::to_string(n.opset()) + " (broadcast attribute) is not supported");
  const size_t rank = dims(n.output(0)).size();
  const uint32_t a = broadcast_operand(n, 0, rank);
  const uint32_t b = broadcast_operand(n, 1, rank);
  emit(kind, {a, b}, out(n));
}

void Lowerer::lower_reshape(const Node& n) {
  const std::vector<int64_t> din = dims(n.input(0)), dout = dims(n.output(0));
  if (!order_trivial(din) || !order_trivial(dout)) {
    if (din != dout) {
      decline(n.op_type() + " " + kiln::sdk::dims_string(din.data(), din.size()) + " -> " +
              kiln::sdk::dims_string(dout.data(), dout.size()) + " changes the layout of a 4-D NHWC tensor");
    }
  }
  if (numel(din) != numel(dout)) decline(n.op_type() + " changes the number of elements");
  const uint32_t x = in(n, 0);
  const std::vector<int64_t> internal = internal_dims(dout);
  emit(OpKind::kReshape, {x}, out(n)).ints = internal;
}

void Lowerer::lower_softmax(const Node& n) {
  const std::vector<int64_t> d = dims(n.input(0));
  const int64_t rank = static_cast<int64_t>(d.size());
  int64_t axis = n.attr_int("axis", n.opset() < 13 ? 1 : -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1) decline("Softmax over axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank) + " tensor (XNNPACK: last axis only)");
  if (rank == 4) decline("Softmax over a 4-D tensor (its last axis is not the NHWC channel axis)");
  const uint32_t x = in(n, 0);
  emit(OpKind::kSoftmax, {x}, out(n));
}

void Lowerer::lower_prelu(const Node& n) {
  const std::vector<int64_t> d = dims(n.input(0));
  std::vector<int64_t> sd;
  std::vector<float> slope = constant(n, 1, &sd);
  const int64_t c = d.size() >= 2 ? d[1] : 0;
  // Per-channel slopes: [C], [C, 1, 1] or [1, C, 1, 1] for NCHW input; [C] for [N, C].
  bool per_channel = (d.size() == 4 || d.size() == 2) && static_cast<int64_t>(slope.size()) == c;
  for (size_t k = 0; per_channel && k < sd.size(); ++k)
    per_channel = sd[k] == 1 || (sd[k] == c && (d.size() == 2 || sd.size() - k == 3));
  if (d.size() == 2 && sd.size() > 1) per_channel = false;
  if (!per_channel) decline("PRelu slope of shape " + kiln::sdk::dims_string(sd.data(), sd.size()) + " is not per channel");
  const uint32_t x = in(n, 0);
  const uint32_t s = prog_.add_constant({c}, std::move(slope));
  emit(OpKind::kPRelu, {x, s}, out(n));
}

// x * HardSigmoid(x) with alpha 1/6 and beta 1/2 is HardSwish (torch
// exports nn.Hardswish so before opset 14): one XNNPACK op and one pass over
// the tensor instead of three; x * Sigmoid(x) is SiLU, which this XNNPACK
// lacks: the plugin's one-pass kernel (xnn_silu.h). The gate is deferred
// when the Mul by its own input is its only reader (and so is in the
// partition: the gate is not a partition output).
bool Lowerer::defer_self_gate(const Node& n, OpKind fused) {
  if (standalone_ || n.opset() < 6) return false;
  if (fused == OpKind::kHardSwish &&
      (std::fabs(n.attr_float("alpha", 0.2f) - 1.0f / 6.0f) > 1e-6f || n.attr_float("beta", 0.5f) != 0.5f))
    return false;
  Value gate = n.output(0), x = n.input(0);
  if (!x || part_outputs_.count(gate.raw()) || gate.consumers().size() != 1) return false;
  Node mul = gate.consumers()[0];
  if (mul.op_type() != "Mul" || mul.num_inputs() != 2 || mul.num_outputs() != 1) return false;
  Value a = mul.input(0), b = mul.input(1);
  if (!a || !b || !((a.raw() == gate.raw() && b.raw() == x.raw()) || (b.raw() == gate.raw() && a.raw() == x.raw())))
    return false;
  if (dims(mul.output(0)) != dims(x)) return false;
  self_gate_[gate.raw()] = {x.raw(), fused};
  return true;
}

bool Lowerer::lower_self_gated_mul(const Node& n) {
  for (size_t g = 0; g < 2; ++g) {
    auto it = self_gate_.find(n.input(g).raw());
    if (it == self_gate_.end() || n.input(1 - g).raw() != it->second.first) continue;
    const uint32_t x = in(n, 1 - g);
    emit(it->second.second, {x}, out(n));
    return true;
  }
  return false;
}

void Lowerer::lower_hardsigmoid(const Node& n) {
  if (defer_self_gate(n, OpKind::kHardSwish)) return;
  const size_t rank = dims(n.output(0)).size();
  const uint32_t x = in(n, 0);
  const std::vector<int64_t> ones(rank, 1);
  const uint32_t alpha = prog_.add_constant(ones, {n.attr_float("alpha", 0.2f)});
  const uint32_t beta = prog_.add_constant(ones, {n.attr_float("beta", 0.5f)});
  const uint32_t t = prog_.add_value(internal_dims(dims(n.output(0))));
  emit(OpKind::kMul, {x, alpha}, t);
  emit(OpKind::kAdd, {t, beta}, out(n)).floats = {0.0f, 1.0f};
}

void Lowerer::lower_concat(const Node& n) {
  const std::vector<int64_t> d = dims(n.output(0));
  int64_t axis = n.attr_int("axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(d.size());
  if (axis < 0 || axis >= static_cast<int64_t>(d.size())) decline("Concat axis out of range");
  static const int64_t kNhwcAxis[] = {0, 3, 1, 2};
  std::vector<uint32_t> parts;
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    Value v = n.input(i);
    if (v && v.is_constant()) decline("Concat of a constant");
    parts.push_back(in(n, i));
  }
  emit(OpKind::kConcat, parts, out(n)).ints = {d.size() == 4 ? kNhwcAxis[axis] : axis};
}

void Lowerer::lower_depth_to_space(const Node& n) {
  if (n.attr_string("mode", "DCR") != "DCR") decline("DepthToSpace mode CRD (XNNPACK: DCR only)");
  const int64_t block = n.attr_int("blocksize", 0);
  if (block < 2) decline("DepthToSpace blocksize < 2");
  const uint32_t x = in(n, 0);
  emit(OpKind::kDepthToSpace, {x}, out(n)).ints = {block};
}

std::string decline_reason(const Node& node) {
  try {
    Lowerer l(/*standalone=*/true);
    l.lower(node);
    return "";
  } catch (const kiln::sdk::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("cannot lower: ") + e.what();
  }
}

Program lower_partition(const kiln::sdk::Graph& graph, const kiln::sdk::Partition& part) {
  Lowerer l(/*standalone=*/false);
  for (const Value& v : part.inputs) l.add_input(v);
  for (const Value& v : part.outputs) l.mark_partition_output(v);
  for (size_t idx : part.nodes) {
    Node node = graph.node(idx);
    if (!node) fail(KILN_STATUS_OUT_OF_RANGE, "partition node " + std::to_string(idx) + " is not in the graph");
    try {
      l.lower(node);
    } catch (const kiln::sdk::Error& e) {
      fail(KILN_STATUS_INVALID_ARGUMENT, "node " + node.label() + " is not one the xnnpack plugin runs: " + e.what());
    }
  }
  Program& p = l.program();
  for (const Value& v : part.outputs) {
    const uint32_t id = l.value_of(v);
    p.outputs.push_back({id, p.values[id].dims.size() == 4});
  }
  p.validate();
  return l.take();
}

}  // namespace kiln_xnnpack
