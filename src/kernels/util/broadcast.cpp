#include "kernels/util/broadcast.h"

#include <algorithm>

namespace kiln::kernels {

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.rank(), b.rank());
  Shape out;
  out.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return invalid_argument("shapes ", a.to_string(), " and ", b.to_string(), " do not broadcast");
    }
  }
  return out;
}

Result<Shape> broadcast_inputs(const Shape& a, size_t ia, const Shape& b, size_t ib) {
  Result<Shape> s = broadcast_shapes(a, b);
  if (!s.ok()) {
    return invalid_argument("input ", ia, " has shape ", a.to_string(), " and input ", ib, " has shape ",
                            b.to_string(), ", which do not broadcast");
  }
  return s;
}

Result<Shape> broadcast_shapes(std::span<const Shape* const> shapes) {
  Shape out;
  for (const Shape* s : shapes) {
    KILN_ASSIGN_OR_RETURN(out, broadcast_shapes(out, *s));
  }
  return out;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.rank());
  int64_t acc = 1;
  for (size_t i = shape.rank(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> s(out.rank(), 0);
  const size_t off = out.rank() - in.rank();
  int64_t acc = 1;
  for (size_t i = in.rank(); i-- > 0;) {
    s[i + off] = in[i] == 1 ? 0 : acc;
    acc *= in[i];
  }
  return s;
}

void BroadcastPlan::run_offsets(int64_t r, int64_t* off_a, int64_t* off_b) const {
  int64_t oa = 0, ob = 0;
  for (size_t i = outer_dims.size(); i-- > 0;) {
    int64_t d = outer_dims[i];
    int64_t idx = r % d;
    r /= d;
    oa += idx * outer_a[i];
    ob += idx * outer_b[i];
  }
  *off_a = oa;
  *off_b = ob;
}

Result<BroadcastPlan> make_broadcast_plan(const Shape& a, const Shape& b) {
  BroadcastPlan p;
  KILN_ASSIGN_OR_RETURN(p.out, broadcast_shapes(a, b));
  const size_t rank = p.out.rank();
  std::vector<int64_t> sa = broadcast_strides(a, p.out), sb = broadcast_strides(b, p.out);
  // Grow the inner run from the last dim while both inputs keep one pattern:
  // contiguous (stride == running size) or constant (stride 0).
  size_t k = rank;
  int64_t inner = 1;
  int mode_a = -1, mode_b = -1;  // 1 contiguous, 0 constant
  while (k > 0) {
    int64_t d = p.out[k - 1];
    if (d == 1) {
      --k;
      continue;
    }
    int ma = sa[k - 1] == 0 ? 0 : (sa[k - 1] == inner ? 1 : 2);
    int mb = sb[k - 1] == 0 ? 0 : (sb[k - 1] == inner ? 1 : 2);
    if (ma == 2 || mb == 2) break;
    if ((mode_a >= 0 && ma != mode_a) || (mode_b >= 0 && mb != mode_b)) break;
    mode_a = ma;
    mode_b = mb;
    inner *= d;
    --k;
  }
  p.inner = inner;
  p.step_a = mode_a == 0 ? 0 : 1;
  p.step_b = mode_b == 0 ? 0 : 1;
  for (size_t i = 0; i < k; ++i) {
    if (p.out[i] == 1) continue;
    p.outer_dims.push_back(p.out[i]);
    p.outer_a.push_back(sa[i]);
    p.outer_b.push_back(sb[i]);
  }
  if (p.out.numel() == 0) p.inner = 0;
  return p;
}

}  // namespace kiln::kernels
