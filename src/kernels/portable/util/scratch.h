// A thread-local working buffer for kernels: 64-byte aligned, only grows.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/tensor.h"  // aligned_alloc_bytes, aligned_free_bytes

namespace kiln::kernels {

/// Use as `thread_local Scratch s; float* p = s.get(n);`: the buffer is kept
/// for the thread's life and reallocated only when a larger one is asked for
/// (its old contents are then lost).
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { aligned_free_bytes(data_); }
  float* get(int64_t n) {
    if (n > size_) {
      aligned_free_bytes(data_);
      data_ = static_cast<float*>(aligned_alloc_bytes(static_cast<size_t>(n) * sizeof(float)));
      size_ = n;
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace kiln::kernels
