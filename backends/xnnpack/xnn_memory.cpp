#include "xnn_memory.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace kiln_xnnpack {

void* alloc_large(size_t bytes, size_t alignment) noexcept {
  alignment = std::max(alignment, sizeof(void*));
  if (alignment > kHugePageBytes || (alignment & (alignment - 1)) != 0) return nullptr;
  bytes = std::max<size_t>(bytes, 1);
  if (bytes < kLargeBytes) {
    void* p = nullptr;
    return posix_memalign(&p, alignment, bytes) == 0 ? p : nullptr;
  }
  // Whole 2 MB pages: the size rounded up when the last page is at least
  // 7/8 used, else down (the tail stays on 4 KB pages).
  if (bytes > SIZE_MAX - kHugePageBytes) return nullptr;
  const size_t up = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const size_t huge = up - bytes <= up / 8 ? up : bytes / kHugePageBytes * kHugePageBytes;
  void* p = nullptr;
  if (posix_memalign(&p, kHugePageBytes, std::max(bytes, huge)) != 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (huge) (void)madvise(p, huge, MADV_HUGEPAGE);  // advice: when refused (THP `never`, no THP), 4 KB pages
#endif
  return p;
}

void FloatBuffer::Free::operator()(float* p) const { std::free(p); }

void FloatBuffer::assign(size_t n, float value) {
  if (n != n_ || !p_) {
    p_.reset();
    n_ = 0;
    if (n > SIZE_MAX / sizeof(float)) throw std::bad_alloc();
    p_.reset(static_cast<float*>(alloc_large(n * sizeof(float))));
    if (!p_) throw std::bad_alloc();
    n_ = n;
  }
  std::fill(p_.get(), p_.get() + n_, value);
}

}  // namespace kiln_xnnpack
