#include "sim_device.h"

#include <cstring>

namespace simdev {
namespace {

// FNV-1a over 64 bits, two lanes with different offsets (not cryptographic;
// a content key for deduplication inside one process).
struct Fnv {
  uint64_t h;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
};

}  // namespace

ContentHash hash_tensor(int32_t dtype, const int64_t* dims, size_t rank, const void* data, size_t nbytes) {
  Fnv a{0xcbf29ce484222325ull}, b{0x84222325cbf29ce4ull};
  for (Fnv* f : {&a, &b}) {
    f->add(&dtype, sizeof(dtype));
    f->add(&rank, sizeof(rank));
    if (rank) f->add(dims, rank * sizeof(int64_t));
    if (nbytes) f->add(data, nbytes);
  }
  return {a.h, b.h ^ (nbytes * 0x9e3779b97f4a7c15ull)};
}

void* Device::acquire_constant(const ContentHash& hash, const void* host, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = constants_.find(hash);
  if (it != constants_.end()) {
    ++it->second.refs;
    counters.constant_reuses.fetch_add(1);
    return it->second.ptr;
  }
  void* p = memory.allocate(bytes, 64);
  if (!p) return nullptr;
  if (bytes) {
    DeviceMemory::Access access(memory);
    std::memcpy(p, host, bytes);
  }
  constants_[hash] = Constant{p, bytes, 1};
  counters.constant_uploads.fetch_add(1);
  return p;
}

void Device::release_constant(const ContentHash& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = constants_.find(hash);
  if (it == constants_.end()) return;
  if (--it->second.refs > 0) return;
  memory.release(it->second.ptr);
  constants_.erase(it);
}

void Device::begin_trace(const kiln_host_api_t* api, kiln_exec_context_t* ctx) {
  std::lock_guard<std::mutex> lock(trace_mu_);
  traced_.emplace_back(api, ctx);
}

void Device::end_trace(kiln_exec_context_t* ctx) {
  std::lock_guard<std::mutex> lock(trace_mu_);
  for (auto it = traced_.begin(); it != traced_.end(); ++it) {
    if (it->second == ctx) {
      traced_.erase(it);
      return;
    }
  }
}

void Device::trace_copy(const char* name, uint64_t begin_ns, uint64_t end_ns) {
  std::lock_guard<std::mutex> lock(trace_mu_);
  if (!traced_.empty()) traced_.front().first->exec_trace_event(traced_.front().second, name, 1, begin_ns, end_ns);
}

size_t Device::num_constants() const {
  std::lock_guard<std::mutex> lock(mu_);
  return constants_.size();
}

}  // namespace simdev
