// Helpers of the pointwise (1x1) convolution paths, shared by Conv and the
// fused ChannelScaledConv: when a small map runs better as Y^T = X^T W^T,
// and the blocked transpose that brings Y^T back.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels {

/// Whether a pointwise conv with m output channels over n positions runs
/// faster as Y^T = X^T W^T: when n wastes a fair share of the vector lanes
/// (the microkernel's columns are 16-lane vectors) and m wastes fewer.
bool prefer_transposed_pointwise(int64_t m, int64_t n);

/// dst[j * rows + i] = src[i * cols + j]: a rows x cols matrix transposed,
/// in 16 x 16 blocks, split over `pool`.
void transpose_f32(const float* src, int64_t rows, int64_t cols, float* dst, ThreadPool* pool);

/// The store of a transposed pointwise conv, Y^T = X^T W^T computed into a
/// scratch C (positions x channels, rows `ldc` = channels apart): as a GEMM
/// epilogue it writes each block of C into Y (channels x `positions`) as
/// soon as the block is final, while it is still in cache, so Y^T is never
/// read back by a separate pass (nor waited for by another barrier).
struct TransposedStore {
  const float* c = nullptr;  // C's first element
  int64_t ldc = 0;           // C's row stride: the channels
  float* y = nullptr;        // channel ch's positions start at y + ch * positions
  int64_t positions = 0;
  /// Optional, on each block of C before it is stored (an activation); the
  /// GemmEpilogue::apply contract.
  void (*before)(const void* ctx, float* c, int64_t ldc, int64_t rows, int64_t cols) = nullptr;
  const void* before_ctx = nullptr;
  /// Optional, on each channel's stored run of Y: `run` holds positions
  /// [pos0, pos0 + len) of channel `channel` (a sum input, then an activation).
  void (*after)(const void* ctx, float* run, int64_t channel, int64_t pos0, int64_t len) = nullptr;
  const void* after_ctx = nullptr;

  /// An epilogue that runs this store (apply and apply_ctx; the caller adds
  /// biases and clamps). `this` must outlive the GEMM.
  GemmEpilogue epilogue() const;
};

}  // namespace kiln::kernels
