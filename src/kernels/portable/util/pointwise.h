// Helpers of the pointwise (1x1) convolution paths, shared by Conv and the
// fused ChannelScaledConv: when a small map runs better as Y^T = X^T W^T,
// and the blocked transpose that brings Y^T back.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace kiln::kernels {

/// Whether a pointwise conv with m output channels over n positions runs
/// faster as Y^T = X^T W^T: when n wastes a fair share of the vector lanes
/// (the microkernel's columns are 16-lane vectors) and m wastes fewer.
bool prefer_transposed_pointwise(int64_t m, int64_t n);

/// dst[j * rows + i] = src[i * cols + j]: a rows x cols matrix transposed,
/// in 16 x 16 blocks, split over `pool`.
void transpose_f32(const float* src, int64_t rows, int64_t cols, float* dst, ThreadPool* pool);

}  // namespace kiln::kernels
