// Tensor: a dtype, a shape and a pointer to row-major (C order) elements.
//
// Ownership: a Tensor either owns its bytes (allocate, clone) through a shared
// holder, or borrows them (borrow): a borrowed Tensor is valid only while the
// memory it points to lives. shared_ptr is used for the holder because
// constants mapped from a model file and tensors handed to the user share one
// buffer with the session that made them, with no copy and no fixed owner.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/result.h"
#include "kiln/shape.h"

namespace kiln {

namespace core {
struct TensorAccess;  // the runtime's way in (src/core/tensor_access.h)
}  // namespace core

/// Alignment of every buffer Kiln allocates (one cache line, wide enough for AVX-512).
inline constexpr size_t kTensorAlignment = 64;

class Tensor {
 public:
  /// An undefined tensor (dtype kUndefined).
  Tensor() = default;

  /// Allocates an owned tensor. Numeric contents are uninitialized; strings
  /// are empty. Aborts only if the allocator itself throws bad_alloc.
  static Tensor allocate(DType dtype, Shape shape);
  /// Like allocate, with every byte zero (numeric zero, false).
  static Tensor zeros(DType dtype, Shape shape);
  /// A non-owning view over `data` (must hold shape.numel() elements).
  static Tensor borrow(DType dtype, Shape shape, void* data);
  /// A view over `data` that keeps `holder` alive.
  static Tensor wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> holder);
  /// An owned 1-element (or given-shape) tensor from a C++ vector.
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{static_cast<int64_t>(values.size())});
  }
  template <class T>
  static Tensor scalar(T value) {
    return from_vector(std::vector<T>{value}, Shape{});
  }

  bool defined() const { return dtype_ != DType::kUndefined; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t rank() const { return shape_.rank(); }
  int64_t dim(size_t i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  template <class T>
  T* data() { return static_cast<T*>(data_); }
  template <class T>
  const T* data() const { return static_cast<const T*>(data_); }

  /// True if this tensor keeps its memory alive (not a borrowed view).
  bool owns_memory() const { return holder_ != nullptr; }
  /// True when this tensor owns its memory and nothing else shares it (no
  /// other tensor, constant or foreign array): the memory may then be handed
  /// to a foreign array (numpy) without a copy.
  bool owns_memory_exclusively() const { return holder_ != nullptr && holder_.use_count() == 1; }
  /// The object that keeps this tensor's memory alive (null for a borrowed
  /// view). Bindings keep a copy of it in the foreign array that shares the
  /// memory, so the memory outlives the Tensor.
  std::shared_ptr<void> memory_owner() const { return holder_; }

  /// A deep copy that owns its memory.
  Tensor clone() const;
  /// The same memory with another shape of equal numel.
  Tensor reshaped(Shape shape) const;
 private:
  friend struct core::TensorAccess;
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> holder_;
};

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
  Tensor t = allocate(dtype_of<T>, std::move(shape));
  T* d = t.data<T>();
  const size_t n = static_cast<size_t>(t.numel());
  for (size_t i = 0; i < n && i < values.size(); ++i) d[i] = values[i];
  return t;
}
// std::vector<bool> has no contiguous storage; bool tensors are one byte each.
template <>
inline Tensor Tensor::from_vector<bool>(const std::vector<bool>& values, Shape shape) {
  Tensor t = allocate(DType::kBool, std::move(shape));
  bool* d = t.data<bool>();
  for (size_t i = 0; i < static_cast<size_t>(t.numel()) && i < values.size(); ++i) d[i] = values[i];
  return t;
}

/// Bytes of a tensor of `dtype` and `shape`, or an error when a dim is
/// negative, the size overflows, or it exceeds tensor_byte_limit(). Every
/// kernel output goes through this check, so a model asking for an absurd
/// tensor gets an error, not an allocation failure.
Result<size_t> checked_tensor_bytes(DType dtype, const Shape& shape);
/// The largest single tensor Kiln allocates for a kernel output (default 1 TiB;
/// the runtime's core/tensor_access.h can lower it for fuzzing).
size_t tensor_byte_limit();

/// Allocates `bytes` aligned to kTensorAlignment; never returns null for bytes > 0.
void* aligned_alloc_bytes(size_t bytes);
void aligned_free_bytes(void* p);

}  // namespace kiln
