// Which groups of claimable nodes the plugin takes (get_capability): the
// cost side of the claim policy. Every 4-D value that enters or leaves a
// partition is transposed (NCHW <-> NHWC) at its boundary, and those copies
// are paid on every run; what a partition wins back is the speed of its
// heavy ops (dense and grouped convolutions with a window, 1x1s in an
// inverted-residual block) over portable kernels'. Element-wise ops,
// pooling, lone 1x1 convolutions, fully connected layers and depthwise
// convolutions win nothing measurable on their own (portable kernels fuse
// activations into the convolution and run those GEMMs and depthwise as
// fast), so a group pays when its heavy MACs per transposed byte reach a
// threshold.
//
// The host splits a group that is not convex (a path leaves it and comes
// back) into parts; the plugin makes the same split first, so each part is
// judged with the boundary it will really have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/c/backend_sdk.hpp"

namespace kiln_xnnpack {

/// Measured on a 2-vCPU Zen 4 (1 thread, CPU time per run, one-partition
/// models, plugin vs portable kernels): 3x3 128->128 on 8x8 (147 MACs per
/// transposed byte) 0.66x; 3x3 stride 2 64->128 on 16x16 (49) 0.69x; 3x3
/// 32->32 on 32x32 (36) 1.16x; 3x3 16->16 on 64x64 (18) 1.23x; 1x1 64->256
/// on 28x28 (12.8) 1.71x; 4x4 stride 4 3->96 on 224x224 (8) 1.57x.
constexpr const char kDefaultMinMacsPerByte[] = "40";  // the option's default (min_macs_per_byte)

/// What one part would cost and win.
struct PartCost {
  double heavy_macs = 0;        // MACs of KxK dense/grouped Convs and of 1x1s next to a depthwise
  double transposed_bytes = 0;  // bytes of the 4-D values crossing the part's boundary
};

/// The convex parts of `group` (view node indices), as the host will split
/// it: part k holds the nodes reached after leaving the group and coming
/// back k times. Each part sorted.
std::vector<std::vector<size_t>> convex_parts(const kiln::sdk::Graph& graph, const std::vector<size_t>& group);

/// The cost of running `part` (sorted view indices) as one partition.
PartCost part_cost(const kiln::sdk::Graph& graph, const std::vector<size_t>& part);

/// XNNPACK multiplies every tap, padding included; portable kernels skip
/// taps that read only padding. A Conv whose taps read padding more often
/// than not (deeplabv3's ASPP: 3x3 with dilation 12-36 on 16x16 maps, 1/9 to
/// 1/4 of its taps live; the model ran 2.2x slower than on portable kernels
/// with them claimed, 1.16x without) is left to them.
constexpr double kMinTapDensity = 0.5;

/// "" unless `node` is a Conv with fewer than kMinTapDensity of its taps
/// reading the input; then the reason.
std::string padding_reason(const kiln::sdk::Node& node);

/// "" when `cost` pays for its partition at `min_macs_per_byte`, else the
/// reason (kiln inspect shows it for each node of the part).
std::string unpaid_reason(const PartCost& cost, double min_macs_per_byte);

}  // namespace kiln_xnnpack
