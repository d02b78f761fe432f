// In-memory benchmark models built with the ONNX protobuf API.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::bench {

/// The op_chain model of bench/models/export.py, built in memory: `pairs`
/// Add nodes and `pairs` Mul nodes alternating on a float32[1, width] tensor,
/// each with its own constant second operand (so nothing folds). Input
/// "input", output "output", opset 13. Returns the serialized ModelProto.
std::string op_chain_model(int pairs, int width = 64);

}  // namespace kiln::bench
