// Static calls: a kernel's compute bound at load to fixed dtypes and shapes,
// run on raw pointers.
//
// When a program has a static memory plan, every planned value has a fixed
// dtype, shape and arena offset, so most of what compute() does on each run
// (reading Values, checking dtypes, broadcasting shapes, asking the allocator
// for output memory, choosing a loop) has the same answer every time. A
// kernel that implements StaticCallable answers it once: bind_static() gets
// the dtypes and shapes and returns a plain function plus a small block of
// parameters, and the executor calls that function with the addresses of
// the inputs and outputs (runtime/static_steps.h), skipping the
// KernelContext. This is what keeps the framework's cost per node small for
// graphs of many tiny nodes (ONNX Runtime and TFLite do the same work at
// prepare time).
//
// A static call must compute exactly what compute() computes for those
// shapes, and must not fail: a kernel offers one only where compute() could
// not fail on inputs of these dtypes and shapes (whatever their values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "core/thread_pool.h"
#include "kiln/dtype.h"
#include "kiln/shape.h"

namespace kiln::kernels {

/// The dtype and shape of one input or output; dtype kUndefined when the
/// node omits it.
struct TensorSig {
  DType dtype = DType::kUndefined;
  Shape shape;
  bool present() const { return dtype != DType::kUndefined; }
};

/// What bind_static knows: every input and output of the node, in order.
struct StaticSignature {
  std::span<const TensorSig> inputs;
  std::span<const TensorSig> outputs;
};

/// Addresses of one static call's inputs and outputs (null where absent)
/// and the run's thread pool (may be null).
struct StaticArgs {
  const void* const* inputs;
  void* const* outputs;
  ThreadPool* pool;
};

/// A bound call: `fn(call, args)` runs the node. `params` holds what the
/// kernel bound (trivially copyable; read back with params_as).
struct StaticCall {
  static constexpr size_t kMaxParams = 64;
  void (*fn)(const StaticCall& call, const StaticArgs& args) = nullptr;
  alignas(16) unsigned char params[kMaxParams] = {};

  template <class P>
  void set_params(const P& p) {
    static_assert(std::is_trivially_copyable_v<P> && sizeof(P) <= kMaxParams && alignof(P) <= 16);
    std::memcpy(params, &p, sizeof(P));
  }
  template <class P>
  const P& params_as() const {
    static_assert(std::is_trivially_copyable_v<P> && sizeof(P) <= kMaxParams && alignof(P) <= 16);
    return *std::launder(reinterpret_cast<const P*>(params));
  }
};

/// Implemented (besides Kernel) by kernels that offer static calls.
class StaticCallable {
 public:
  virtual ~StaticCallable() = default;
  /// Binds this kernel to inputs and outputs of exactly `sig`'s dtypes and
  /// shapes. Returns false (and leaves `out` alone) when it has no static
  /// call for them, or when `sig`'s outputs are not what compute() would
  /// produce from `sig`'s inputs (the types came from shape inference; a
  /// mismatch means the node runs through compute()).
  virtual bool bind_static(const StaticSignature& sig, StaticCall* out) const = 0;
};

}  // namespace kiln::kernels
