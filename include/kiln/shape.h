// Shape: the dimensions of a tensor. Up to kInlineRank dims live inline (no
// heap allocation), which covers every shape the executor handles per node.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace kiln {

class Shape {
 public:
  static constexpr size_t kInlineRank = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Shape(std::span<const int64_t> dims) { assign(dims.data(), dims.size()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.data(), dims.size()); }

  Shape(const Shape& o) { assign(o.data(), o.size_); }
  Shape& operator=(const Shape& o) {
    if (this != &o) assign(o.data(), o.size_);
    return *this;
  }

  size_t rank() const { return size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* data() const { return size_ <= kInlineRank ? inline_ : heap_.data(); }
  int64_t* data() { return size_ <= kInlineRank ? inline_ : heap_.data(); }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + size_; }
  int64_t back() const { return data()[size_ - 1]; }
  std::span<const int64_t> dims() const { return {data(), size_}; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }

  /// Product of the dims (1 for a scalar).
  int64_t numel() const {
    int64_t n = 1;
    for (size_t i = 0; i < size_; ++i) n *= data()[i];
    return n;
  }

  void resize(size_t n, int64_t fill = 0);
  void push_back(int64_t d) {
    resize(size_ + 1);
    data()[size_ - 1] = d;
  }

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

  /// "[1, 3, 224, 224]"
  std::string to_string() const;

 private:
  void assign(const int64_t* d, size_t n);

  size_t size_ = 0;
  int64_t inline_[kInlineRank] = {};
  std::vector<int64_t> heap_;  // used only when rank > kInlineRank
};

}  // namespace kiln
