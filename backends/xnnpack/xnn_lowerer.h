// Internal to the lowering (xnn_lower.cpp, xnn_lower_nn.cpp): the state of
// lowering one partition, or one node on its own for get_capability.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "kiln/c/backend_sdk.hpp"
#include "xnn_program.h"

namespace kiln_xnnpack {

using kiln::sdk::Node;
using kiln::sdk::Value;

/// Throws the decline reason (KILN_STATUS_UNIMPLEMENTED).
[[noreturn]] void decline(const std::string& why);

/// ONNX dims -> the dims XNNPACK sees (4-D: NCHW -> NHWC).
std::vector<int64_t> internal_dims(const std::vector<int64_t>& onnx);
/// Copies `data` of ONNX `dims` (rank 4: NCHW) into NHWC order.
std::vector<float> to_nhwc(const std::vector<float>& data, const std::vector<int64_t>& dims);

class Lowerer {
 public:
  /// standalone: lowering one node for get_capability (every non-constant
  /// input becomes a fresh partition input; no fusion).
  explicit Lowerer(bool standalone) : standalone_(standalone) {}

  void mark_partition_output(const Value& v) { part_outputs_.insert(v.raw()); }
  void add_input(const Value& v);
  void lower(const Node& node);
  uint32_t value_of(const Value& v) const;
  Program take() { return std::move(prog_); }
  Program& program() { return prog_; }

  // Used by the per-op lowerings.
  uint32_t in(const Node& n, size_t i);            // a non-constant input
  uint32_t out(const Node& n, size_t i = 0);       // defines output i
  void alias(const Node& n, uint32_t value);       // output 0 is `value` (a fused node)
  std::vector<float> constant(const Node& n, size_t i, std::vector<int64_t>* dims);  // a float constant input
  std::vector<int64_t> int_constant(const Node& n, size_t i);
  std::vector<int64_t> dims(const Value& v) const;  // static ONNX dims (declines dynamic ones)
  Op& emit(OpKind kind, std::vector<uint32_t> inputs, uint32_t output);
  /// The op producing `v` when v may absorb a fusion: it is read only by
  /// `reader` and is not a partition output. nullptr otherwise.
  Op* fusible_producer(const Value& v);
  bool standalone() const { return standalone_; }

  // Per-op lowerings (xnn_lower_nn.cpp).
  void lower_conv(const Node& n);
  void lower_gemm(const Node& n);
  void lower_matmul(const Node& n);
  void lower_pool(const Node& n);
  void lower_batchnorm(const Node& n);
  void lower_resize(const Node& n);
  void lower_pad(const Node& n);

 private:
  void check_node(const Node& n);
  void lower_elementwise(const Node& n);
  void lower_binary(const Node& n, OpKind kind);
  void lower_clamp(const Node& n, float lo, float hi);
  void lower_reshape(const Node& n);
  void lower_softmax(const Node& n);
  void lower_prelu(const Node& n);
  void lower_hardsigmoid(const Node& n);
  void lower_concat(const Node& n);
  void lower_depth_to_space(const Node& n);
  uint32_t broadcast_operand(const Node& n, size_t i, size_t rank);
  bool defer_self_gate(const Node& n, OpKind fused);
  bool lower_self_gated_mul(const Node& n);

  bool standalone_;
  Program prog_;
  std::map<const kiln_value_t*, uint32_t> values_;
  std::map<uint32_t, size_t> producer_;  // program value -> op index
  std::set<const kiln_value_t*> part_outputs_;
  // Gates (HardSigmoid(alpha 1/6, beta 1/2), Sigmoid) whose only reader is
  // a Mul by the gate's own input: the Mul becomes one HardSwish or SiLU op
  // (gate value -> its input and the fused op).
  std::map<const kiln_value_t*, std::pair<const kiln_value_t*, OpKind>> self_gate_;
};

}  // namespace kiln_xnnpack
