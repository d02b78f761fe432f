// What the portable Conv paths that do not run through one GEMM epilogue
// (Winograd, sparse taps) apply after the convolution: y = clamp(conv + bias
// + z, lo, hi), then an activation over finished output planes.
#pragma once

#include <cstdint>
#include <limits>

namespace kiln::kernels {

/// The epilogue of a convolution: y = clamp(conv + bias + z, lo, hi), then
/// `act` over each finished output plane. Pointers are borrowed for the call.
struct ConvEpilogue {
  const float* bias = nullptr;  // Cout values; null: none
  const float* z = nullptr;     // Y-shaped sum input (FusedConv); null: none
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  /// Applied in place to `n` contiguous outputs (one plane); null: none.
  void (*act)(float* y, int64_t n, const void* ctx) = nullptr;
  const void* act_ctx = nullptr;

  bool clamps() const {
    return lo > -std::numeric_limits<float>::infinity() || hi < std::numeric_limits<float>::infinity();
  }
};

}  // namespace kiln::kernels
