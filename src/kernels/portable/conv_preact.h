// kiln::PreActivationConv, the optimizer's fusion of a pre-activation block
// (src/optimizer/preact_conv_fusion.cpp): BatchNormalization with constant
// statistics, then Relu, then Conv, as DenseNet runs every layer on the
// Concat of the ones before it:
//
//   Y = conv(max(0, a * X + b), W) + B   a = scale / sqrt(var + eps),
//                                        b = bias - mean * a  (per input channel)
//
// The normalization cannot fold into W (the Relu sits between), so unfused it
// is two passes over the growing Concat. Fused, a pointwise conv applies it
// while packing its B operand (PreActSource), which the GEMM does anyway;
// other convs (and the transposed pointwise path) take one pass into a
// scratch first.
//
// Inputs: X, W, B (optional), then the BatchNormalization's scale, bias,
// mean, var (constants, one per input channel); attribute epsilon; the Conv
// attributes; FusedConv's activation and activation_params for after the
// conv.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels {

/// The per-channel a and b above from the node's constant inputs 3..6 and
/// epsilon; `channels` is X's channel count (W[1] * group). Errors name the
/// input that is missing, not constant or of the wrong size.
Status preact_params(const KernelInit& init, int64_t channels, std::vector<float>* a, std::vector<float>* b);

/// out[c][i] = max(0, a[c] * x[c][i] + b[c]) for `images` images of
/// `channels` planes of `plane` values.
void preact_relu(const float* x, int64_t images, int64_t channels, int64_t plane, const float* a, const float* b,
                 float* out, ThreadPool* pool);

/// B of a pointwise conv (rows: input channels, `plane` apart; columns:
/// positions) with the transform applied while packing.
class PreActSource final : public BPanelSource {
 public:
  PreActSource(const float* x, int64_t plane, const float* a, const float* b) : x_(x), plane_(plane), a_(a), b_(b) {}
  void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const override;

 private:
  const float* x_;
  int64_t plane_;
  const float* a_;
  const float* b_;
};

}  // namespace kiln::kernels
