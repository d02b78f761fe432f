// simdev's memories: the simulated device's own memory (one mapping per
// instance, PROT_NONE whenever no plugin call is using it, so a host read of
// a device pointer faults) and the host-pinned blocks the plugin hands out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace simdev {

/// The device's memory: a private mapping of `capacity` bytes with a
/// first-fit allocator inside it. Thread-safe.
class DeviceMemory {
 public:
  /// Maps the region (throws kiln::sdk::Error UNAVAILABLE when mmap fails).
  /// With `guard`, the region is PROT_NONE outside Access scopes.
  DeviceMemory(size_t capacity, bool guard);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  /// A block of `bytes` aligned to `alignment` (a power of two, <= 4096), or
  /// nullptr when no free range is large enough (the simulated OOM).
  void* allocate(size_t bytes, size_t alignment);
  /// Frees a block from allocate; false when `p` is not a live block.
  bool release(void* p);
  /// True when [p, p + bytes) lies inside one live block.
  bool in_block(const void* p, size_t bytes) const;
  /// True when `p` points into the mapping at all.
  bool in_region(const void* p) const;

  size_t capacity() const { return capacity_; }
  size_t used() const;

  /// Makes the region readable and writable for the scope (nests across
  /// threads: the last scope to end protects it again).
  class Access {
   public:
    explicit Access(DeviceMemory& m) : m_(m) { m_.enter(); }
    ~Access() { m_.leave(); }
    Access(const Access&) = delete;
    Access& operator=(const Access&) = delete;

   private:
    DeviceMemory& m_;
  };

 private:
  void enter();
  void leave();

  uint8_t* base_ = nullptr;
  size_t capacity_ = 0;
  bool guard_ = true;
  mutable std::mutex mu_;                 // the maps below
  std::map<size_t, size_t> free_;         // offset -> bytes, coalesced
  std::map<size_t, size_t> live_;         // offset -> bytes of each block
  std::mutex guard_mu_;                   // depth_ and the protection
  int depth_ = 0;
};

/// Host-pinned memory: ordinary aligned host memory the plugin tracks, so
/// copies can tell it from device memory and frees can be checked.
class PinnedMemory {
 public:
  PinnedMemory() = default;
  ~PinnedMemory();
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;

  void* allocate(size_t bytes, size_t alignment);  // nullptr when the host has none
  bool release(void* p);
  bool in_block(const void* p, size_t bytes) const;
  size_t used() const;

 private:
  mutable std::mutex mu_;
  std::map<uintptr_t, size_t> blocks_;
};

}  // namespace simdev
