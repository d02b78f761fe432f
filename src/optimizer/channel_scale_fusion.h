// Phase B (optimizer.h): the channel scale that ends a squeeze-and-excitation
// block, fused into the 1x1 convolution that reads it.
//
// An SE block (MobileNetV3, EfficientNet, RegNetY, MnasNet-A) ends in
// Mul(x, s) with s = gate(conv(act(conv(GlobalAveragePool(x))))) of shape
// [N, C, 1, 1], one factor per image and channel, and its only reader is the
// block's 1x1 projection Conv: Conv(x * s, W, B) = (W diag(s)) x + B. The
// pair becomes one kiln ChannelScaledConv(x, W, B, s), whose kernel scales
// each channel of x while packing it for the GEMM: no pass over x * s and no
// tensor for it (kernels/portable/conv_channel_scaled.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "optimizer/graph_uses.h"
#include "optimizer/optimizer.h"

namespace kiln::optimizer {

/// The domain and op of the fused node; its inputs are X, W, B (optional:
/// kNoValue) and S; its output is the Conv's.
inline constexpr const char* kChannelScaledConvDomain = "kiln";
inline constexpr const char* kChannelScaledConvOp = "ChannelScaledConv";

/// When node `ni` is such a Mul (float32, s per channel and image without
/// growing x, read only by a float32 1x1 stride-1 unpadded group-1 Conv with
/// a constant W, both free and eligible), writes the proposal to `out`.
bool match_channel_scaled_conv(const ir::Graph& g, const ConstantMap& constants, const GraphUses& uses,
                               const std::vector<uint8_t>& eligible, const std::vector<uint8_t>& used, size_t ni,
                               Fusion* out);

}  // namespace kiln::optimizer
