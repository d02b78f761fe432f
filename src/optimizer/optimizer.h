// Load-time graph rewrites, in two phases (docs/architecture.md, "Optimizer").
//
// Phase A (rewrite_graph) runs after constant folding and before backends
// partition the graph. Its results are plain ONNX that any backend can claim:
// Identity/Dropout removed, constant BatchNormalization folded into the Conv
// (or ConvTranspose) before it, Transpose pairs merged, Reshape/Squeeze/
// Unsqueeze/Flatten chains merged into one Reshape or removed. It edits the
// graph in place and marks the nodes it removed.
//
// Phase B (find_portable_fusions) runs after partitioning, over the nodes no
// backend claimed. It proposes single nodes that replace patterns: Conv +
// activation as com.microsoft FusedConv (the portable conv kernel applies the
// activation in its epilogue), 2-D MatMul + constant bias Add as Gemm (here,
// not in phase A: a backend that claims MatMul and Add may not claim Gemm),
// the Erf and Tanh forms of Gelu as Gelu, the
// ReduceMean/Sub/Pow/Sqrt/Div form of LayerNormalization as
// LayerNormalization, MatMul + constant [N] bias on a 3-D input (and a
// Gelu after any MatMul + bias) as kiln MatMulBias (sequence_fusions.h), a
// squeeze-and-excitation block's per-channel Mul with the 1x1 Conv reading
// it as kiln ChannelScaledConv (channel_scale_fusion.h), and then runs of
// element-wise nodes as one ElementwiseChain (elementwise_chains.h). It does
// not edit the graph: the program runs the fused
// node in place of the pattern, and keeps the pattern where no kernel fits.
//
// Neither phase rewrites through a value that is a graph output, is read by a
// subgraph, or (inside a pattern) is read by a node outside the pattern.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "kiln/result.h"

namespace kiln::optimizer {

using ConstantMap = std::unordered_map<ir::ValueId, Tensor>;

/// How often each rewrite applied, in the order rewrites first applied.
class RewriteStats {
 public:
  void add(const std::string& name, int count = 1);
  int count(const std::string& name) const;
  const std::vector<std::pair<std::string, int>>& entries() const { return entries_; }
  /// "conv+batchnorm 20, identity 3" (empty when nothing applied).
  std::string to_string() const;

 private:
  std::vector<std::pair<std::string, int>> entries_;
};

/// What phase A may touch and what it did.
struct GraphRewrite {
  ir::Graph& g;
  /// Values known at load (initializers and folded nodes); phase A adds the
  /// constants it makes (folded weights, reshape targets).
  ConstantMap& constants;
  /// Per node of g: 1 when a rewrite may change or remove it.
  std::vector<uint8_t> eligible;
  /// Per node of g: set to 1 for each node a rewrite removed.
  std::vector<uint8_t> removed;
  RewriteStats* stats = nullptr;
};

/// Phase A. Fails only on an internal inconsistency (never on a pattern that
/// does not match: that node is left as it is).
Status rewrite_graph(GraphRewrite& rw);

/// One phase-B proposal: `node` computes what the nodes `replaces` (indices
/// into g.nodes, in graph order) compute, with the same outputs.
struct Fusion {
  std::string name;  ///< the rewrite, as counted: "conv+relu", "matmul+add", "gelu", "layernorm", "channel scale+conv"
  ir::Node node;
  std::vector<size_t> replaces;
};

/// Phase B over the nodes whose `eligible` entry is 1. Proposals never share
/// a node.
std::vector<Fusion> find_portable_fusions(const ir::Graph& g, const ConstantMap& constants,
                                          const std::vector<uint8_t>& eligible);

}  // namespace kiln::optimizer
