#include "kiln/tensor.h"

#include "core/tensor_access.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln {

void* aligned_alloc_bytes(size_t bytes) {
  if (bytes == 0) bytes = kTensorAlignment;
  size_t rounded = (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  void* p = std::aligned_alloc(kTensorAlignment, rounded);
  if (!p) throw std::bad_alloc();
  return p;
}

void aligned_free_bytes(void* p) { std::free(p); }

namespace {
std::atomic<size_t> g_tensor_byte_limit{size_t{1} << 40};
}

size_t tensor_byte_limit() { return g_tensor_byte_limit.load(std::memory_order_relaxed); }

namespace core {
void set_tensor_byte_limit(size_t bytes) { g_tensor_byte_limit.store(bytes, std::memory_order_relaxed); }
}  // namespace core

Result<size_t> checked_tensor_bytes(DType dtype, const Shape& shape) {
  const size_t es = dtype_size(dtype);
  const size_t limit = tensor_byte_limit();
  size_t bytes = es;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument("tensor shape ", shape.to_string(), " has a negative dimension");
    if (d == 0) zero = true;
  }
  if (zero) return size_t{0};
  for (int64_t d : shape) {
    if (bytes > limit / static_cast<size_t>(d)) {
      return make_status(StatusCode::kOutOfRange, "a ", dtype_name(dtype), " tensor of shape ", shape.to_string(),
                         " exceeds the ", limit, "-byte tensor limit");
    }
    bytes *= static_cast<size_t>(d);
  }
  return bytes;
}

namespace {

struct StringArray {
  std::string* items;
  size_t n;
  ~StringArray() {
    for (size_t i = 0; i < n; ++i) items[i].~basic_string();
    aligned_free_bytes(items);
  }
};

}  // namespace

Tensor Tensor::allocate(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  const size_t n = static_cast<size_t>(t.shape_.numel());
  if (dtype == DType::kString) {
    auto* items = static_cast<std::string*>(aligned_alloc_bytes(n * sizeof(std::string)));
    for (size_t i = 0; i < n; ++i) new (items + i) std::string();
    // Not make_shared(StringArray{...}): that copies a temporary whose destructor
    // would free the strings a second time.
    std::shared_ptr<StringArray> arr(new StringArray{items, n});
    t.data_ = items;
    t.holder_ = std::move(arr);
    return t;
  }
  void* p = aligned_alloc_bytes(n * dtype_size(dtype));
  t.data_ = p;
  t.holder_ = std::shared_ptr<void>(p, aligned_free_bytes);
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = allocate(dtype, std::move(shape));
  if (dtype != DType::kString) std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, void* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = data;
  return t;
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> holder) {
  Tensor t = borrow(dtype, std::move(shape), data);
  t.holder_ = std::move(holder);
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return Tensor();
  Tensor t = allocate(dtype_, shape_);
  if (dtype_ == DType::kString) {
    const auto* src = data<std::string>();
    auto* dst = t.data<std::string>();
    for (int64_t i = 0; i < numel(); ++i) dst[i] = src[i];
  } else if (nbytes()) {
    std::memcpy(t.data_, data_, nbytes());
  }
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

}  // namespace kiln
