#include "template_ops.h"

#include <algorithm>
#include <string>

namespace kiln_template {

using kiln::sdk::fail;

namespace {

std::string dims_str(const std::vector<int64_t>& d) { return kiln::sdk::dims_string(d.data(), d.size()); }

// Row-major strides of `dims` aligned to the output rank, 0 where broadcast.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& dims, size_t out_rank) {
  std::vector<int64_t> s(out_rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    size_t d = dims.size() - 1 - i;
    size_t o = out_rank - 1 - i;
    s[o] = dims[d] == 1 ? 0 : stride;
    stride *= dims[d];
  }
  return s;
}

}  // namespace

std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(KILN_STATUS_INVALID_ARGUMENT, "shapes " + dims_str(a) + " and " + dims_str(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> matmul_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, "MatMul inputs must have rank >= 1");
  std::vector<int64_t> a2 = a, b2 = b;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  if (a2.back() != b2[b2.size() - 2]) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "MatMul shapes " + dims_str(a) + " and " + dims_str(b) +
                                           " differ in the inner dimension");
  }
  std::vector<int64_t> batch = broadcast_dims(std::vector<int64_t>(a2.begin(), a2.end() - 2),
                                              std::vector<int64_t>(b2.begin(), b2.end() - 2));
  std::vector<int64_t> out = batch;
  if (a.size() > 1) out.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) out.push_back(b2.back());
  return out;
}

void binary(kiln::sdk::ExecContext& ctx, Binary op, const F32& a, const F32& b, const F32& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const float* pa = a.data;
  const float* pb = b.data;
  float* po = out.data;
  auto apply = [op](float x, float y) { return op == Binary::kAdd ? x + y : x * y; };
  if (a.dims == b.dims || (a.numel() == n && b.numel() == n)) {
    ctx.parallel_for(n, 1 << 14, [&](int64_t lo, int64_t hi) {
      if (op == Binary::kAdd) for (int64_t i = lo; i < hi; ++i) po[i] = pa[i] + pb[i];
      else for (int64_t i = lo; i < hi; ++i) po[i] = pa[i] * pb[i];
    });
    return;
  }
  if (b.numel() == 1 || a.numel() == 1) {
    const bool scalar_b = b.numel() == 1;
    const float s = scalar_b ? pb[0] : pa[0];
    const float* v = scalar_b ? pa : pb;
    ctx.parallel_for(n, 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) po[i] = scalar_b ? apply(v[i], s) : apply(s, v[i]);
    });
    return;
  }
  // General case: rows of the innermost dim, offsets per row from strides.
  const size_t r = out.dims.size();
  const std::vector<int64_t> sa = broadcast_strides(a.dims, r), sb = broadcast_strides(b.dims, r);
  const int64_t inner = r ? out.dims[r - 1] : 1;
  const int64_t rows = inner ? n / inner : 0;
  const int64_t ia = r ? sa[r - 1] : 0, ib = r ? sb[r - 1] : 0;
  ctx.parallel_for(rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(inner, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      int64_t rem = row, oa = 0, ob = 0;
      for (size_t d = r - 1; d-- > 0;) {
        int64_t idx = rem % out.dims[d];
        rem /= out.dims[d];
        oa += idx * sa[d];
        ob += idx * sb[d];
      }
      float* o = po + row * inner;
      for (int64_t j = 0; j < inner; ++j) o[j] = apply(pa[oa + j * ia], pb[ob + j * ib]);
    }
  });
}

void relu(kiln::sdk::ExecContext& ctx, const F32& x, const F32& out) {
  const float* px = x.data;
  float* po = out.data;
  ctx.parallel_for(x.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) po[i] = px[i] < 0.f ? 0.f : px[i];  // NaN stays NaN
  });
}

void matmul(kiln::sdk::ExecContext& ctx, const F32& a, const F32& b, const F32& out) {
  std::vector<int64_t> a2 = a.dims, b2 = b.dims;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  const int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
  std::vector<int64_t> batch(out.dims.begin(), out.dims.end() - (a.dims.size() > 1) - (b.dims.size() > 1));
  std::vector<int64_t> ab(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  const size_t br = batch.size();
  const std::vector<int64_t> sa = broadcast_strides(ab, br), sb = broadcast_strides(bb, br);
  int64_t nbatch = 1;
  for (int64_t d : batch) nbatch *= d;
  float* po = out.data;
  const float* pa = a.data;
  const float* pb = b.data;
  if (nbatch * m * n == 0) return;
  ctx.parallel_for(nbatch * m, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * n)), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t bi = row / m, i = row % m;
      int64_t rem = bi, oa = 0, ob = 0;
      for (size_t d = br; d-- > 0;) {
        int64_t idx = rem % batch[d];
        rem /= batch[d];
        oa += idx * sa[d];
        ob += idx * sb[d];
      }
      const float* arow = pa + (oa * m + i) * k;
      const float* bmat = pb + ob * k * n;
      float* orow = po + row * n;
      std::fill(orow, orow + n, 0.f);
      for (int64_t p = 0; p < k; ++p) {
        const float av = arow[p];
        const float* brow = bmat + p * n;
        for (int64_t j = 0; j < n; ++j) orow[j] += av * brow[j];
      }
    }
  });
}

}  // namespace kiln_template
