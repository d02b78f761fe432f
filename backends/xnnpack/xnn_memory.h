// Memory for the plugin's large buffers: packed weights, the runtime's
// arena, the fused blocks' scratch (not XNNPACK's own weights: xnn_api.cpp
// says why). A buffer of kLargeBytes or more is 2 MB-aligned and
// its whole 2 MB pages are advised as transparent huge pages
// (madvise(MADV_HUGEPAGE): THP in `madvise` mode backs them with 2 MB
// pages; in `always` mode the advice changes nothing, in `never` mode it is
// ignored and the buffer keeps 4 KB pages). Its size is rounded up to a
// whole page when the last page is at least 7/8 used, else its tail stays
// on 4 KB pages: a huge page is resident as a whole once touched, so
// rounding a 1.05 MB buffer up would cost 1 MB of memory. Weights and
// activations that do not stay in cache are read from memory on every run;
// with 4 KB pages each page's first line costs a page walk (in a VM, a
// two-level one): mobilenet_v2's 5 MB FC weights stream in 202 us on 4 KB
// pages, 117 on 2 MB. Smaller buffers are 64-byte aligned from malloc.
// Every pointer is freed with std::free.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace kiln_xnnpack {

constexpr size_t kHugePageBytes = size_t{2} << 20;
/// Buffers from this size on get huge pages: 7/8 of one.
constexpr size_t kLargeBytes = kHugePageBytes / 8 * 7;

/// `bytes` (at least 1) aligned to `alignment` (a power of two, at most
/// 2 MB), on huge pages from kLargeBytes on; nullptr when out of memory.
/// Free with std::free.
void* alloc_large(size_t bytes, size_t alignment = 64) noexcept;

/// A fixed-size array of floats from alloc_large (64-byte aligned, huge
/// pages when large). Move-only.
class FloatBuffer {
 public:
  FloatBuffer() = default;
  /// `n` floats set to `value`; throws std::bad_alloc when out of memory.
  explicit FloatBuffer(size_t n, float value = 0.0f) { assign(n, value); }
  FloatBuffer(FloatBuffer&& o) noexcept : p_(std::move(o.p_)), n_(std::exchange(o.n_, 0)) {}
  FloatBuffer& operator=(FloatBuffer&& o) noexcept {
    p_ = std::move(o.p_);
    n_ = std::exchange(o.n_, 0);
    return *this;
  }
  /// Replaces the contents by `n` floats set to `value`.
  void assign(size_t n, float value = 0.0f);

  float* data() { return p_.get(); }
  const float* data() const { return p_.get(); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  float* begin() { return data(); }
  float* end() { return data() + n_; }
  float& operator[](size_t i) { return p_.get()[i]; }
  const float& operator[](size_t i) const { return p_.get()[i]; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float, Free> p_;
  size_t n_ = 0;
};

}  // namespace kiln_xnnpack
