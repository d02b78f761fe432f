// Output memory for running a compiled partition outside a Program (the
// conformance kit, `kiln verify`): each output is heap memory with guard
// bytes on both sides, so a plugin that writes outside its output buffer is
// caught after execute (guard_damage) instead of corrupting a neighbour.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kiln/tensor.h"
#include "runtime/backends/host.h"

namespace kiln::runtime {

class GuardedOutputs final : public ExecOutputs {
 public:
  /// Bytes of guard on each side of every output.
  static constexpr size_t kGuardBytes = 64;

  explicit GuardedOutputs(size_t n) : tensors_(n), blocks_(n) {}
  size_t num_outputs() const override { return tensors_.size(); }
  Result<Tensor*> allocate(size_t index, DType dtype, const Shape& shape) override;

  /// Output `i` (undefined when the plugin did not allocate it).
  const Tensor& tensor(size_t i) const { return tensors_[i]; }
  std::vector<Tensor> take() { return std::move(tensors_); }

  /// "" when every guard is intact, else what was overwritten for each
  /// damaged output ("output 0 'y': wrote 16 bytes past the end of its
  /// 256-byte buffer"), `names[i]` (when given) following "output i".
  std::string guard_damage(const std::vector<std::string>& names = {}) const;

 private:
  struct Block {
    std::shared_ptr<uint8_t[]> bytes;
    size_t payload = 0;
  };
  std::vector<Tensor> tensors_;
  std::vector<Block> blocks_;
};

}  // namespace kiln::runtime
