// The fully connected layer of a classifier fused into its head
// (xnn_block.h): 1x1 convolution + clamp -> GlobalAveragePool ->
// [Reshape/Flatten] -> FullyConnected (+ clamp) run as one op. The head
// computes its pooled channels in panels of 32 (xnn_gemm.h); as soon as a
// panel is pooled, HeadFc multiplies it into a partial output
// y[n, N] += pooled[n, k0:k1] . W[k0:k1, :], one partial per thread, summed
// with the bias and clamped once every panel is in (finish). The weights
// are packed by panels of 32 rows, each panel by blocks of 128 columns (a
// block's 32 rows one after the other), so a panel's weights are one
// contiguous range, read front to back; the panel's GEMM prefetches them
// (PackedGemm::Prefetch) while it computes:
// mobilenet_v2's 1280 x 1000 weights (5 MB, read from memory every run:
// they do not stay in a 1 MB L2, and a shared L3 does not keep them from
// one run to the next) stream in during the head's 20 MMACs instead of
// after them.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "xnn_gemm.h"
#include "xnn_isa.h"
#include "xnn_memory.h"

namespace kiln_xnnpack {

class HeadFc {
 public:
  HeadFc() = default;
  /// `w` is [outputs, k] row-major (the Program's FullyConnected filter),
  /// `bias` [outputs] or null; lo/hi clamp the output.
  HeadFc(const float* w, const float* bias, size_t outputs, size_t k, float lo, float hi);
  HeadFc(HeadFc&&) noexcept = default;
  HeadFc& operator=(HeadFc&&) noexcept = default;

  size_t outputs() const { return outputs_; }
  size_t k() const { return k_; }
  /// Floats an image's row of a partial output takes (outputs rounded up to 16).
  size_t ld() const { return ld_; }
  /// The variant accumulate() runs: kernel_isa() when the weights were packed.
  Isa isa() const { return isa_; }

  /// Rows of a panel: accumulate() takes rows [32 p, min(k, 32 p + 32)).
  static constexpr size_t kPanelRows = 32;

  /// The packed rows of a panel [k0, k1) (contiguous), for the GEMM before to prefetch.
  PackedGemm::Prefetch rows(size_t k0, size_t k1) const;
  /// y[i, 0:ld) += x[i, 0:k1-k0) . W[k0:k1, 0:ld) for the images i < n and
  /// the panel [k0, k1) (k0 a multiple of kPanelRows, k1 = min(k,
  /// k0 + kPanelRows)): x's rows are `ldx` floats apart, y's ld() (padding
  /// columns stay 0).
  void accumulate(size_t n, const float* x, size_t ldx, size_t k0, size_t k1, float* y) const;
  /// out[i, o] = clamp(bias[o] + sum of parts[p][i, o] over the `count`
  /// partial outputs) for the images i < n and outputs o in [o0, o1);
  /// partial p starts p * stride floats after `parts`, out's rows are
  /// outputs() apart.
  void finish(size_t n, const float* parts, size_t count, size_t stride, float* out, size_t o0, size_t o1) const;

 private:
  size_t outputs_ = 0, k_ = 0, ld_ = 0;
  Isa isa_ = Isa::kNone;
  float lo_ = 0, hi_ = 0;
  // k x ld floats by panels and column blocks (above), zero-padded columns,
  // on huge pages (xnn_memory.h): they stream from memory every run.
  FloatBuffer w_;
  std::vector<float> bias_;     // [outputs]
};

}  // namespace kiln_xnnpack
