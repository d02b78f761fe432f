// Small models for the concurrency suite, built with the ONNX protobuf API.
#pragma once

#include <string>

namespace kiln::testing {

/// A small conv + matmul net with fixed pseudo-random weights:
///   x float32[2, 2, 8, 8] -> Conv 3x3 (4, pad 1) -> Relu -> Conv 3x3 (4, pad 1)
///   -> Add (residual) -> Flatten -> MatMul [256, 16] -> Add bias -> Relu
///   -> MatMul [16, 10] -> Mul scale -> y float32[2, 10]
/// Every op is one some plugin claims (template: MatMul/Add/Mul/Relu;
/// xnnpack and onednn: Conv and the rest).
std::string conv_matmul_model_bytes();

}  // namespace kiln::testing
