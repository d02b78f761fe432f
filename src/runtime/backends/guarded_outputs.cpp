#include "runtime/backends/guarded_outputs.h"

#include <cstring>

namespace kiln::runtime {
namespace {

constexpr uint8_t kGuardByte = 0xA5;

// How far into the guard after a payload the plugin wrote: one past the
// last byte that is not the guard value (0: intact).
size_t damage_after(const uint8_t* guard, size_t n) {
  for (size_t k = n; k > 0; --k)
    if (guard[k - 1] != kGuardByte) return k;
  return 0;
}

}  // namespace

Result<Tensor*> GuardedOutputs::allocate(size_t index, DType dtype, const Shape& shape) {
  if (index >= tensors_.size()) {
    return invalid_argument("output index ", index, " is out of range (the partition has ", tensors_.size(),
                            " outputs)");
  }
  const int64_t numel = shape.numel();
  if (numel < 0) return invalid_argument("output ", index, " has a negative dimension");
  const size_t payload = static_cast<size_t>(numel) * dtype_size(dtype);
  Block b;
  b.payload = payload;
  b.bytes = std::shared_ptr<uint8_t[]>(new (std::nothrow) uint8_t[payload + 2 * kGuardBytes]);
  if (!b.bytes) return make_status(StatusCode::kOutOfRange, "cannot allocate ", payload, " bytes for output ", index);
  std::memset(b.bytes.get(), kGuardByte, payload + 2 * kGuardBytes);
  tensors_[index] = Tensor::wrap(dtype, shape, b.bytes.get() + kGuardBytes, b.bytes);
  blocks_[index] = std::move(b);
  return &tensors_[index];
}

std::string GuardedOutputs::guard_damage(const std::vector<std::string>& names) const {
  std::string out;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (!b.bytes) continue;
    // Before: the damage reaches from the first changed byte to the payload.
    size_t before = 0;
    for (size_t k = 0; k < kGuardBytes; ++k) {
      if (b.bytes[k] != kGuardByte) {
        before = kGuardBytes - k;
        break;
      }
    }
    const size_t after = damage_after(b.bytes.get() + kGuardBytes + b.payload, kGuardBytes);
    if (before == 0 && after == 0) continue;
    std::string what = "output " + std::to_string(i);
    if (i < names.size() && !names[i].empty()) what += " " + names[i];
    what += ": ";
    if (after) what += "wrote " + std::to_string(after) + (after == kGuardBytes ? "+" : "") + " bytes past the end";
    if (before && after) what += " and ";
    if (before) what += "wrote " + std::to_string(before) + (before == kGuardBytes ? "+" : "") + " bytes before the start";
    what += " of its " + std::to_string(b.payload) + "-byte buffer";
    out += (out.empty() ? "" : "; ") + what;
  }
  return out;
}

}  // namespace kiln::runtime
