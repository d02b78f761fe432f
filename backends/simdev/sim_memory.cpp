#include "sim_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <iterator>
#include <string>

#include "kiln/c/backend_sdk.hpp"

namespace simdev {
namespace {

constexpr size_t kGranule = 64;  // every block is a multiple of this

size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

size_t page_size() {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<size_t>(p) : 4096;
}

}  // namespace

DeviceMemory::DeviceMemory(size_t capacity, bool guard) : guard_(guard) {
  capacity_ = align_up(capacity < kGranule ? kGranule : capacity, page_size());
  void* p = mmap(nullptr, capacity_, guard_ ? PROT_NONE : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    kiln::sdk::fail(KILN_STATUS_UNAVAILABLE,
                    "simdev: cannot map " + std::to_string(capacity_) + " bytes of simulated device memory");
  }
  base_ = static_cast<uint8_t*>(p);
  free_[0] = capacity_;
}

DeviceMemory::~DeviceMemory() {
  if (base_) munmap(base_, capacity_);
}

void* DeviceMemory::allocate(size_t bytes, size_t alignment) {
  if (alignment < kGranule) alignment = kGranule;
  bytes = align_up(bytes == 0 ? 1 : bytes, kGranule);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const size_t off = it->first, size = it->second;
    const size_t start = align_up(off, alignment);
    if (start < off || start - off > size || size - (start - off) < bytes) continue;
    free_.erase(it);
    if (start > off) free_[off] = start - off;
    if (start + bytes < off + size) free_[start + bytes] = off + size - (start + bytes);
    live_[start] = bytes;
    return base_ + start;
  }
  return nullptr;
}

bool DeviceMemory::release(void* p) {
  if (!in_region(p)) return false;
  const size_t off = static_cast<size_t>(static_cast<uint8_t*>(p) - base_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(off);
  if (it == live_.end()) return false;
  size_t start = off, size = it->second;
  live_.erase(it);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
  return true;
}

bool DeviceMemory::in_region(const void* p) const {
  auto* b = static_cast<const uint8_t*>(p);
  return b >= base_ && b < base_ + capacity_;
}

bool DeviceMemory::in_block(const void* p, size_t bytes) const {
  if (!in_region(p)) return false;
  const size_t off = static_cast<size_t>(static_cast<const uint8_t*>(p) - base_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.upper_bound(off);
  if (it == live_.begin()) return false;
  --it;
  return off >= it->first && bytes <= it->second - (off - it->first);
}

size_t DeviceMemory::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [off, size] : live_) n += size;
  return n;
}

void DeviceMemory::enter() {
  std::lock_guard<std::mutex> lock(guard_mu_);
  if (depth_++ == 0 && guard_) mprotect(base_, capacity_, PROT_READ | PROT_WRITE);
}

void DeviceMemory::leave() {
  std::lock_guard<std::mutex> lock(guard_mu_);
  if (--depth_ == 0 && guard_) mprotect(base_, capacity_, PROT_NONE);
}

PinnedMemory::~PinnedMemory() {
  for (const auto& [p, size] : blocks_) std::free(reinterpret_cast<void*>(p));
}

void* PinnedMemory::allocate(size_t bytes, size_t alignment) {
  if (alignment < kGranule) alignment = kGranule;
  const size_t size = align_up(bytes == 0 ? 1 : bytes, alignment);
  void* p = std::aligned_alloc(alignment, size);
  if (!p) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  blocks_[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

bool PinnedMemory::release(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
  if (it == blocks_.end()) return false;
  blocks_.erase(it);
  std::free(p);
  return true;
}

bool PinnedMemory::in_block(const void* p, size_t bytes) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.upper_bound(a);
  if (it == blocks_.begin()) return false;
  --it;
  return a >= it->first && bytes <= it->second - (a - it->first);
}

size_t PinnedMemory::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [p, size] : blocks_) n += size;
  return n;
}

}  // namespace simdev
