// ONNX nodes -> Program (xnn_program.h). One set of rules serves both
// questions the host asks: get_capability lowers each node on its own
// (decline_reason: the error message of a failed lowering is the reason
// `kiln inspect` shows), and compile lowers a whole partition, fusing
// Relu/Clip into the producer's output clamp and folding
// BatchNormalization into the preceding convolution.
//
// Layout: every 4-D value inside a partition is NHWC. Partition inputs and
// outputs of rank 4 are transposed at the boundary (Boundary::nchw);
// nothing is transposed between two claimed nodes, so nodes whose meaning
// depends on the layout (Reshape of a 4-D tensor with pixels and channels,
// Softmax over a 4-D tensor, MatMul on a 4-D tensor) are declined.
#pragma once

#include <string>

#include "kiln/c/backend_sdk.hpp"
#include "xnn_program.h"

namespace kiln_xnnpack {

/// Why the plugin would not run `node`; "" when it would.
std::string decline_reason(const kiln::sdk::Node& node);

/// The share of a Conv's (output, tap) pairs that read the input, not
/// padding (1 for other nodes and windows the plugin declines).
double conv_tap_density(const kiln::sdk::Node& node);

/// Lowers a partition; throws kiln::sdk::Error for a node it would not claim.
Program lower_partition(const kiln::sdk::Graph& graph, const kiln::sdk::Partition& part);

}  // namespace kiln_xnnpack
