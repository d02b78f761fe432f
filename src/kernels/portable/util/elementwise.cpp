// Shared helpers of the element-wise families (binary, unary, activation,
// compare/logic, variadic, cast, string ops).
#include "kernels/portable/util/elementwise.h"

#include <algorithm>

namespace kiln::kernels {

namespace ew {

void NaryPlan::run_offsets(int64_t r, int64_t* offsets) const {
  for (size_t k = 0; k < strides.size(); ++k) offsets[k] = 0;
  for (size_t d = dims.size() - 1; d-- > 0;) {
    const int64_t idx = r % dims[d];
    r /= dims[d];
    for (size_t k = 0; k < strides.size(); ++k) offsets[k] += idx * strides[k][d];
  }
}

NaryPlan make_nary_plan(std::span<const Shape* const> shapes, const Shape& out) {
  NaryPlan p;
  p.out = out;
  const size_t k = shapes.size();
  std::vector<std::vector<int64_t>> full(k);
  for (size_t i = 0; i < k; ++i) full[i] = broadcast_strides(*shapes[i], out);
  p.strides.assign(k, {});
  // Walk dims outermost first, dropping 1s and merging a dim into the
  // previous one when every input's stride continues across the boundary.
  for (size_t d = 0; d < out.rank(); ++d) {
    if (out[d] == 1) continue;
    bool merge = !p.dims.empty();
    for (size_t i = 0; merge && i < k; ++i) {
      const int64_t prev = p.strides[i].back();
      merge = prev == full[i][d] * out[d];
    }
    if (merge) {
      p.dims.back() *= out[d];
      for (size_t i = 0; i < k; ++i) p.strides[i].back() = full[i][d];
    } else {
      p.dims.push_back(out[d]);
      for (size_t i = 0; i < k; ++i) p.strides[i].push_back(full[i][d]);
    }
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    for (size_t i = 0; i < k; ++i) p.strides[i].push_back(0);
  }
  if (out.numel() == 0) p.dims.back() = 0;
  return p;
}

Result<Shape> LegacyBroadcast::b_shape(const Shape& a, const Shape& b) const {
  if (!broadcast || a == b) return b;
  const int64_t ra = static_cast<int64_t>(a.rank()), rb = static_cast<int64_t>(b.rank());
  int64_t start = ra - rb;  // suffix matching without axis
  if (has_axis) {
    start = axis < 0 ? axis + ra : axis;
    if (start < 0 || start >= std::max<int64_t>(ra, 1)) {
      return invalid_argument("axis ", axis, " is out of range for input 0 of shape ",
                              a.to_string());
    }
  }
  if (rb == 0 || (b.numel() == 1 && rb <= ra)) {
    Shape s;
    s.resize(a.rank(), 1);
    return s;
  }
  if (start < 0 || start + rb > ra) {
    return invalid_argument("input 1 of shape ", b.to_string(),
                            " cannot broadcast to input 0 of shape ", a.to_string(), " at axis ", start);
  }
  Shape s;
  s.resize(a.rank(), 1);
  for (int64_t i = 0; i < rb; ++i) {
    const int64_t d = b[static_cast<size_t>(i)];
    if (d != 1 && d != a[static_cast<size_t>(start + i)]) {
      return invalid_argument("input 1 of shape ", b.to_string(),
                              " cannot broadcast to input 0 of shape ", a.to_string(), " at axis ", start);
    }
    s[static_cast<size_t>(start + i)] = d;
  }
  return s;
}

}  // namespace ew
}  // namespace kiln::kernels
