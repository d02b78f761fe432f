// The plugin's large-buffer allocator (backends/xnnpack/xnn_memory.h):
// sizes around the huge-page threshold come back aligned (64 bytes below
// it or as asked, 2 MB from it on), writable over their whole size and
// freeable with std::free; large ones carry the huge-page advice where the
// kernel has transparent huge pages (the mapping's VmFlags say hg); a refused madvise (a seccomp filter
// makes it fail in a child process) still gives usable memory; the
// FloatBuffer on top of it.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "xnn_memory.h"

namespace kiln_xnnpack {
namespace {

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// Writes a pattern over all `bytes` and reads it back.
bool usable(void* p, size_t bytes) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t i = 0; i < bytes; ++i)
    if (b[i] != static_cast<unsigned char>(i * 131 + 7)) return false;
  return true;
}

std::vector<size_t> sizes_around_threshold() {
  return {1,          64,          4096,           kLargeBytes - 4096, kLargeBytes - 1, kLargeBytes, kLargeBytes + 1,
          kHugePageBytes - 1, kHugePageBytes, kHugePageBytes + 4, 5 * kHugePageBytes / 2};
}

TEST(XnnMemory, AlignedUsableFreeableAroundTheThreshold) {
  for (size_t bytes : sizes_around_threshold()) {
    SCOPED_TRACE(bytes);
    void* p = alloc_large(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned(p, 64));
    if (bytes >= kLargeBytes) {
      EXPECT_TRUE(aligned(p, kHugePageBytes));
    }
    EXPECT_TRUE(usable(p, bytes));
    std::free(p);
  }
}

TEST(XnnMemory, HonoursTheAlignmentAskedAndRejectsBadOnes) {
  for (size_t a : {size_t{1}, size_t{16}, size_t{128}, size_t{4096}, kHugePageBytes})
    for (size_t bytes : {size_t{100}, kLargeBytes + 100}) {
      void* p = alloc_large(bytes, a);
      ASSERT_NE(p, nullptr) << a << " " << bytes;
      EXPECT_TRUE(aligned(p, a));
      EXPECT_TRUE(usable(p, bytes));
      std::free(p);
    }
  EXPECT_EQ(alloc_large(100, 48), nullptr);                   // not a power of two
  EXPECT_EQ(alloc_large(100, 2 * kHugePageBytes), nullptr);  // beyond 2 MB
  EXPECT_EQ(alloc_large(SIZE_MAX - 10), nullptr);            // out of memory, not a wrap-around
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
// The VmFlags line of the mapping holding `p` in /proc/self/smaps.
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return {};
}

TEST(XnnMemory, LargeBuffersAreAdvisedAsHugePages) {
  if (std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").fail()) GTEST_SKIP() << "no transparent huge pages";
  // Whole pages, one rounded up (last page 7/8 used), one with a 4 KB-page tail.
  for (size_t bytes : {3 * kHugePageBytes, kHugePageBytes - kHugePageBytes / 16, 5 * kHugePageBytes / 2}) {
    void* p = alloc_large(bytes);
    ASSERT_NE(p, nullptr);
    const std::string flags = vm_flags_of(p);
    ASSERT_FALSE(flags.empty()) << bytes;
    EXPECT_NE(flags.find(" hg"), std::string::npos) << bytes << ": " << flags;
    std::free(p);
  }
}

// In a child whose madvise fails (EINVAL, a seccomp filter), large buffers
// are still allocated, aligned, usable and freed. Exits 0 when they are.
[[noreturn]] void allocate_with_advice_refused() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_madvise, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EINVAL & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    std::_Exit(2);
  void* probe = alloc_large(kLargeBytes / 2);
  if (!probe || madvise(probe, 4096, MADV_HUGEPAGE) == 0 || errno != EINVAL) std::_Exit(3);  // the filter works
  std::free(probe);
  for (size_t bytes : sizes_around_threshold()) {
    void* p = alloc_large(bytes);
    if (!p || !aligned(p, bytes >= kLargeBytes ? kHugePageBytes : 64) || !usable(p, bytes)) std::_Exit(4);
    std::free(p);
  }
  FloatBuffer f(3 * kHugePageBytes / sizeof(float), 1.5f);
  if (f[0] != 1.5f || f[f.size() - 1] != 1.5f) std::_Exit(5);
  std::_Exit(0);
}

TEST(XnnMemory, RefusedAdviceIsNoError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(allocate_with_advice_refused(), ::testing::ExitedWithCode(0), "");
}
#endif

TEST(XnnMemory, FloatBuffer) {
  FloatBuffer f;
  EXPECT_TRUE(f.empty());
  for (size_t n : {size_t{1}, size_t{1000}, kLargeBytes / sizeof(float), size_t{5} << 20 >> 2}) {
    f.assign(n, 2.0f);
    ASSERT_EQ(f.size(), n);
    EXPECT_TRUE(aligned(f.data(), n * sizeof(float) >= kLargeBytes ? kHugePageBytes : 64));
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(f[i], 2.0f) << i;
    f[n - 1] = 3.0f;
  }
  f.assign(f.size(), 0.0f);  // same size: refilled in place
  for (float v : f) ASSERT_EQ(v, 0.0f);
  FloatBuffer g(std::move(f));
  EXPECT_EQ(g.size(), size_t{5} << 20 >> 2);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(f.data(), nullptr);
}

}  // namespace
}  // namespace kiln_xnnpack
