#include "sim_kernels.h"

#include <algorithm>
#include <string>

#include "kiln/c/backend_sdk.hpp"

namespace simdev {
namespace {

using kiln::sdk::fail;

std::string str(const Dims& d) { return kiln::sdk::dims_string(d.data(), d.size()); }

// Per output dim, the stride of an operand broadcast to `od` (0 where it is broadcast).
std::vector<int64_t> broadcast_strides(const Dims& d, const Dims& od) {
  std::vector<int64_t> s(od.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < d.size(); ++k) {
    size_t i = d.size() - 1 - k, o = od.size() - 1 - k;
    s[o] = d[i] == 1 ? 0 : stride;
    stride *= d[i];
  }
  return s;
}

}  // namespace

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

Dims broadcast_dims(const Dims& a, const Dims& b) {
  const size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t y = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (x != y && x != 1 && y != 1) fail(KILN_STATUS_INVALID_ARGUMENT, "cannot broadcast " + str(a) + " with " + str(b));
    out[r - 1 - k] = x == 1 ? y : x;
  }
  return out;
}

Dims matmul_dims(const Dims& a0, const Dims& b0) {
  if (a0.empty() || b0.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, "MatMul of a scalar");
  Dims a = a0.size() == 1 ? Dims{1, a0[0]} : a0;
  Dims b = b0.size() == 1 ? Dims{b0[0], 1} : b0;
  if (a[a.size() - 1] != b[b.size() - 2]) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "MatMul of " + str(a0) + " and " + str(b0) + ": inner dims differ");
  }
  Dims batch = broadcast_dims(Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2));
  if (a0.size() > 1) batch.push_back(a[a.size() - 2]);
  if (b0.size() > 1) batch.push_back(b[b.size() - 1]);
  return batch;
}

Dims conv_dims(const Dims& x, const Dims& w, const ConvAttrs& a) {
  if (x.size() != 4 || w.size() != 4) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "Conv needs 4-D input and weight, got " + str(x) + " and " + str(w));
  }
  if (a.group < 1 || x[1] != w[1] * a.group || w[0] % a.group != 0) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "Conv input " + str(x) + " and weight " + str(w) + " do not fit group " +
                                           std::to_string(a.group));
  }
  Dims y{x[0], w[0], 0, 0};
  for (size_t i = 0; i < 2; ++i) {
    int64_t span = (w[2 + i] - 1) * a.dilations[i] + 1;
    int64_t padded = x[2 + i] + a.pads[i] + a.pads[i + 2];
    if (padded < span) fail(KILN_STATUS_INVALID_ARGUMENT, "Conv kernel " + str(w) + " is larger than input " + str(x));
    y[2 + i] = (padded - span) / a.strides[i] + 1;
  }
  return y;
}

size_t conv_workspace_floats(const Dims& x, const Dims& w, const ConvAttrs& a) {
  Dims y = conv_dims(x, w, a);
  return static_cast<size_t>(w[1] * w[2] * w[3] * y[2] * y[3]);
}

void add(const float* a, const Dims& ad, const float* b, const Dims& bd, float* out, const Dims& od) {
  const int64_t n = numel(od);
  if (ad == od && bd == od) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    return;
  }
  const std::vector<int64_t> sa = broadcast_strides(ad, od), sb = broadcast_strides(bd, od);
  const size_t r = od.size();
  std::vector<int64_t> idx(r, 0);
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = a[ia] + b[ib];
    for (size_t k = r; k-- > 0;) {  // odometer step over the output index
      ia += sa[k];
      ib += sb[k];
      if (++idx[k] < od[k]) break;
      ia -= sa[k] * od[k];
      ib -= sb[k] * od[k];
      idx[k] = 0;
    }
  }
}

void relu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void matmul(const float* a, const Dims& a0, const float* b, const Dims& b0, float* out, const Dims& od) {
  Dims ad = a0.size() == 1 ? Dims{1, a0[0]} : a0;
  Dims bd = b0.size() == 1 ? Dims{b0[0], 1} : b0;
  const int64_t m = ad[ad.size() - 2], k = ad[ad.size() - 1], n = bd[bd.size() - 1];
  Dims ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  Dims batch = broadcast_dims(ab, bb);
  const int64_t nb = numel(batch);
  (void)od;
  // Batch offsets of a and b, by broadcasting an index counter over `batch`.
  const std::vector<int64_t> sa = broadcast_strides(ab, batch), sb = broadcast_strides(bb, batch);
  std::vector<int64_t> idx(batch.size(), 0);
  int64_t oa = 0, ob = 0;
  for (int64_t t = 0; t < nb; ++t) {
    const float* pa = a + oa * m * k;
    const float* pb = b + ob * k * n;
    float* po = out + t * m * n;
    std::fill(po, po + m * n, 0.f);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        const float av = pa[i * k + p];
        for (int64_t j = 0; j < n; ++j) po[i * n + j] += av * pb[p * n + j];
      }
    for (size_t d = batch.size(); d-- > 0;) {
      oa += sa[d];
      ob += sb[d];
      if (++idx[d] < batch[d]) break;
      oa -= sa[d] * batch[d];
      ob -= sb[d] * batch[d];
      idx[d] = 0;
    }
  }
}

void conv(const float* x, const Dims& xd, const float* w, const Dims& wd, const float* bias, float* y,
          const Dims& yd, const ConvAttrs& a, float* col) {
  const int64_t C = xd[1], H = xd[2], W = xd[3];
  const int64_t M = wd[0], Cg = wd[1], KH = wd[2], KW = wd[3];
  const int64_t OH = yd[2], OW = yd[3], Mg = M / a.group, P = OH * OW, K = Cg * KH * KW;
  for (int64_t n = 0; n < xd[0]; ++n) {
    for (int64_t g = 0; g < a.group; ++g) {
      const float* xg = x + (n * C + g * Cg) * H * W;
      for (int64_t c = 0; c < Cg; ++c)  // im2col: row (c, i, j), column (oy, ox)
        for (int64_t i = 0; i < KH; ++i)
          for (int64_t j = 0; j < KW; ++j) {
            float* row = col + ((c * KH + i) * KW + j) * P;
            for (int64_t oy = 0; oy < OH; ++oy) {
              const int64_t iy = oy * a.strides[0] - a.pads[0] + i * a.dilations[0];
              for (int64_t ox = 0; ox < OW; ++ox) {
                const int64_t ix = ox * a.strides[1] - a.pads[1] + j * a.dilations[1];
                row[oy * OW + ox] = iy >= 0 && iy < H && ix >= 0 && ix < W ? xg[(c * H + iy) * W + ix] : 0.f;
              }
            }
          }
      for (int64_t m = 0; m < Mg; ++m) {
        const int64_t oc = g * Mg + m;
        float* yo = y + (n * M + oc) * P;
        std::fill(yo, yo + P, bias ? bias[oc] : 0.f);
        const float* wm = w + oc * K;
        for (int64_t kk = 0; kk < K; ++kk) {
          const float wv = wm[kk];
          const float* row = col + kk * P;
          for (int64_t p = 0; p < P; ++p) yo[p] += wv * row[p];
        }
      }
    }
  }
}

}  // namespace simdev
