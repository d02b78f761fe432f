// Element-wise chains (phase B, optimizer.h): runs of two or more float32
// element-wise nodes, each reading the previous one's output (read by
// nothing else) and at most one constant, become one kiln.fused
// ElementwiseChain node (kernels/portable/elementwise_chain.cpp), which
// applies every step to a block of the data while it is in cache: one pass
// over memory and one node instead of one per op. Add->Mul->Relu style runs
// (scaling, bias, activation) are common after MatMul, normalization and
// pooling; ONNX Runtime leaves them as separate nodes on CPU.
//
// A step is Add, Sub, Mul or Div (opset 7 on) of the chain value and a
// float32 constant that does not grow it (one element, or the chain value's
// static shape under broadcasting), with the chain value on either side; or
// one of the one-input activations with a float32 loop (Relu, LeakyRelu,
// Sigmoid, Tanh, HardSigmoid, HardSwish, Exp, Sqrt, Erf). Constants of the
// chain value's size need its shape to be static.
#pragma once

#include <cstdint>
#include <vector>

#include "optimizer/graph_uses.h"
#include "optimizer/optimizer.h"

namespace kiln::optimizer {

/// The fused node's domain and op.
inline constexpr const char* kFusedDomain = "kiln.fused";
inline constexpr const char* kElementwiseChainOp = "ElementwiseChain";

/// Appends a Fusion per chain over nodes that are `eligible` and not yet
/// `used` (marking the ones it takes).
void find_elementwise_chains(const ir::Graph& g, const ConstantMap& constants, const std::vector<uint8_t>& eligible,
                             const GraphUses& uses, std::vector<uint8_t>* used, std::vector<Fusion>* out);

}  // namespace kiln::optimizer
