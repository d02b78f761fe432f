// Packed constant weights that outlive one load. A kernel factory that packs
// a constant (Conv's W, MatMul's B) for its GEMM engine first asks the
// store, by a key naming the packing layout and the microkernel it is for;
// on a miss it packs as usual and offers the result. A .kiln program stores
// what was offered at compile time and, when loaded, answers from the file's
// mapping, so the bytes are used in place (docs/program-format.md). A
// layout or ISA that differs on the loading machine is simply a miss.
//
// The runtime makes a store active for the kernel factories it runs on its
// thread (PrepackScope) rather than passing it in KernelInit, so kernels
// that pack nothing never see it.
//
// The store's bytes are untrusted: the kernel checks their size against the
// layout before using them (a wrong size is a miss, never a read past them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "ir/graph.h"

namespace kiln::kernels {

/// Bytes and whatever keeps them alive.
struct PackedBytes {
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> holder;
};

class PrepackStore {
 public:
  virtual ~PrepackStore() = default;
  /// The bytes stored for `node` under `key`; empty when there are none.
  virtual PackedBytes find(const ir::Node& node, std::string_view key) const = 0;
  /// What a kernel packed for `node` under `key` (a recording store keeps it).
  virtual void offer(const ir::Node& node, std::string_view key, PackedBytes bytes) = 0;
};

/// The store for kernel factories running on this thread; null: none.
PrepackStore* active_prepack_store();

/// Makes `store` (may be null) the active one on this thread for its lifetime.
class PrepackScope {
 public:
  explicit PrepackScope(PrepackStore* store);
  ~PrepackScope();
  PrepackScope(const PrepackScope&) = delete;
  PrepackScope& operator=(const PrepackScope&) = delete;

 private:
  PrepackStore* prev_;
};

}  // namespace kiln::kernels
