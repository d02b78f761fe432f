#include "kiln/shape.h"

#include <algorithm>
#include <cstring>

namespace kiln {

void Shape::assign(const int64_t* d, size_t n) {
  if (n <= kInlineRank) {
    if (n) std::memmove(inline_, d, n * sizeof(int64_t));
    heap_.clear();
  } else {
    heap_.assign(d, d + n);
  }
  size_ = n;
}

void Shape::resize(size_t n, int64_t fill) {
  if (n == size_) return;
  if (n <= kInlineRank) {
    if (size_ > kInlineRank) std::memcpy(inline_, heap_.data(), n * sizeof(int64_t));
    for (size_t i = size_; i < n; ++i) inline_[i] = fill;
    heap_.clear();
  } else {
    if (size_ <= kInlineRank) heap_.assign(inline_, inline_ + size_);
    heap_.resize(n, fill);
  }
  size_ = n;
}

bool Shape::operator==(const Shape& o) const {
  return size_ == o.size_ && std::equal(begin(), end(), o.begin());
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < size_; ++i) {
    if (i) s += ", ";
    s += std::to_string(data()[i]);
  }
  return s + "]";
}

}  // namespace kiln
