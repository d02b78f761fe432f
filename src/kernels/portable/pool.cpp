// Pooling: MaxPool (with the optional Indices output, dilations, ceil_mode,
// storage_order), AveragePool (count_include_pad, ceil_mode), LpPool,
// GlobalAveragePool, GlobalMaxPool, GlobalLpPool and MaxUnpool; every opset.
//
// Windowed pools treat 1-D, 2-D and 3-D inputs alike as 3-D (missing leading
// spatial dims have size 1, kernel 1, stride 1) and run one plane (n, c) per
// task. For each output the valid part of the window is computed once per
// dim, so the inner loops touch only in-bounds elements and need no checks.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/portable/pool_rows.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

enum class PoolKind { kMax, kAverage, kLp };

// The window of a 1-3-D pool padded to 3-D.
struct Window3 {
  int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

Window3 to_window3(const WindowGeometry& g) {
  Window3 w;
  const size_t off = 3 - g.rank();
  for (size_t i = 0; i < 3; ++i) {
    const bool real = i >= off;
    const size_t j = i - off;
    w.in[i] = real ? g.in[j] : 1;
    w.out[i] = real ? g.out[j] : 1;
    w.k[i] = real ? g.kernel[j] : 1;
    w.s[i] = real ? g.stride[j] : 1;
    w.d[i] = real ? g.dilation[j] : 1;
    w.pb[i] = real ? g.pad_begin[j] : 0;
    w.pe[i] = real ? g.pad_end[j] : 0;
  }
  return w;
}

// Valid kernel taps [k_lo, k_hi) of output o in one dim: those whose input
// position o*s - pb + k*d lies in [0, in).
inline void tap_range(const Window3& w, int dim, int64_t o, int64_t* start, int64_t* k_lo, int64_t* k_hi) {
  const int64_t s = o * w.s[dim] - w.pb[dim], d = w.d[dim];
  *start = s;
  *k_lo = s < 0 ? (-s + d - 1) / d : 0;
  *k_hi = s < w.in[dim] ? std::min(w.k[dim], (w.in[dim] - 1 - s) / d + 1) : 0;
  if (*k_hi < *k_lo) *k_hi = *k_lo;
}

struct PoolParams {
  PoolKind kind = PoolKind::kMax;
  bool count_include_pad = false;
  double p = 2.0;               // LpPool
  bool column_major = false;    // MaxPool storage_order 1 (indices)
};

// Pools one plane. `idx`, when not null, receives MaxPool's argmax as an
// offset within the plane (row- or column-major), to which the caller adds
// the plane offset.
template <class T>
void pool_plane(const Window3& w, const PoolParams& pp, const T* x, T* y, int64_t* idx) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t o0 = 0; o0 < w.out[0]; ++o0) {
    int64_t s0, a0, b0;
    tap_range(w, 0, o0, &s0, &a0, &b0);
    for (int64_t o1 = 0; o1 < w.out[1]; ++o1) {
      int64_t s1, a1, b1;
      tap_range(w, 1, o1, &s1, &a1, &b1);
      for (int64_t o2 = 0; o2 < w.out[2]; ++o2) {
        int64_t s2, a2, b2;
        tap_range(w, 2, o2, &s2, &a2, &b2);
        const int64_t out_i = (o0 * w.out[1] + o1) * w.out[2] + o2;
        if (pp.kind == PoolKind::kMax) {
          bool found = false;
          T best{};
          int64_t best_at = 0;
          for (int64_t k0 = a0; k0 < b0; ++k0)
            for (int64_t k1 = a1; k1 < b1; ++k1) {
              const int64_t i0 = s0 + k0 * w.d[0], i1 = s1 + k1 * w.d[1];
              const T* row = x + (i0 * w.in[1] + i1) * w.in[2];
              for (int64_t k2 = a2; k2 < b2; ++k2) {
                const int64_t i2 = s2 + k2 * w.d[2];
                const T v = row[i2];
                // NaN propagates like a maximum in numpy (first NaN wins).
                if (!found || static_cast<Acc>(v) > static_cast<Acc>(best) ||
                    (static_cast<Acc>(v) != static_cast<Acc>(v) && static_cast<Acc>(best) == static_cast<Acc>(best))) {
                  found = true;
                  best = v;
                  best_at = pp.column_major ? (i2 * w.in[1] + i1) * w.in[0] + i0 : (i0 * w.in[1] + i1) * w.in[2] + i2;
                }
              }
            }
          if (!found) {  // a window entirely in the padding (only with ceil_mode)
            if constexpr (std::numeric_limits<T>::is_specialized) {
              best = std::numeric_limits<T>::lowest();
            } else {
              best = T(-std::numeric_limits<float>::infinity());
            }
          }
          y[out_i] = best;
          if (idx) idx[out_i] = best_at;
          continue;
        }
        Acc sum = 0;
        for (int64_t k0 = a0; k0 < b0; ++k0)
          for (int64_t k1 = a1; k1 < b1; ++k1) {
            const int64_t i0 = s0 + k0 * w.d[0], i1 = s1 + k1 * w.d[1];
            const T* row = x + (i0 * w.in[1] + i1) * w.in[2] + s2;
            if (pp.kind == PoolKind::kAverage) {
              for (int64_t k2 = a2; k2 < b2; ++k2) sum += static_cast<Acc>(row[k2 * w.d[2]]);
            } else {
              for (int64_t k2 = a2; k2 < b2; ++k2)
                sum += static_cast<Acc>(std::pow(std::abs(static_cast<double>(row[k2 * w.d[2]])), pp.p));
            }
          }
        if (pp.kind == PoolKind::kLp) {
          y[out_i] = static_cast<T>(std::pow(static_cast<double>(sum), 1.0 / pp.p));
          continue;
        }
        int64_t count;
        if (pp.count_include_pad) {
          // Taps inside the padded input (ceil_mode overhang is not counted).
          count = 1;
          for (int dim = 0; dim < 3; ++dim) {
            const int64_t s = dim == 0 ? s0 : (dim == 1 ? s1 : s2);
            const int64_t lo = std::max<int64_t>(s, -w.pb[dim]);
            const int64_t hi = std::min<int64_t>(s + (w.k[dim] - 1) * w.d[dim] + 1, w.in[dim] + w.pe[dim]);
            count *= hi > lo ? (hi - lo + w.d[dim] - 1) / w.d[dim] : 0;
          }
        } else {
          count = (b0 - a0) * (b1 - a1) * (b2 - a2);
        }
        y[out_i] = count > 0 ? static_cast<T>(sum / static_cast<Acc>(count)) : T(0);
      }
    }
  }
}

// Per-thread buffers of pool_plane_fast.
struct PoolRows {
  std::vector<float> padded;      // the plane with its padding, when it has any
  std::vector<float> v, h;        // kernel rows combined; then kernel columns
  std::vector<int32_t> at;        // per output: its position in h
  std::array<int64_t, 4> at_key{};  // (stride, out_h, out_w, sw) that `at` is for
  std::vector<float> count;       // average: taps counted per output
};

// a = max(a, b) with NaN winning, or a + b.
template <bool kMax>
inline __attribute__((always_inline)) float pool_op(float a, float b) {
  if constexpr (kMax) {
    return (b > a || b != b) ? b : a;
  } else {
    return a + b;
  }
}

// acc[i] = max over k < taps of x[i + k * step] (NaN wins), or the sum:
// two and three taps in one pass, more in passes of up to three.
template <bool kMax>
inline __attribute__((always_inline)) void combine_taps(float* __restrict acc, const float* __restrict x, int64_t n,
                                                        int64_t taps, int64_t step) {
  if (taps == 1) {
    std::memcpy(acc, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const float *x1 = x + step, *x2 = x + 2 * step;
  if (taps == 2) {
    for (int64_t i = 0; i < n; ++i) acc[i] = pool_op<kMax>(x[i], x1[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) acc[i] = pool_op<kMax>(pool_op<kMax>(x[i], x1[i]), x2[i]);
  for (int64_t k = 3; k < taps; ++k) {
    const float* xk = x + k * step;
    for (int64_t i = 0; i < n; ++i) acc[i] = pool_op<kMax>(acc[i], xk[i]);
  }
}

// Window of one plane, separably over the flat plane (row stride `stride`):
// v row oh = over kernel rows the source row oh * sh + kh * dh, h[i] = over
// kernel columns v[i + kw * dw], y[j] = h[at[j]]. Every pass is one
// contiguous loop (per output row with a row stride), whatever the width of
// its rows, so small maps fill vectors too; h at row ends mixes two rows,
// and is never gathered.
template <bool kMax>
inline __attribute__((always_inline)) void pool_flat_impl(const float* src, int64_t stride, int64_t out_h, int64_t sh,
                                                          int64_t kh, int64_t dh, int64_t kw, int64_t dw, float* v,
                                                          float* h, const int32_t* at, int64_t out_n, float* y) {
  if (sh == 1) {
    combine_taps<kMax>(v, src, out_h * stride, kh, dh * stride);
  } else {
    for (int64_t oh = 0; oh < out_h; ++oh) combine_taps<kMax>(v + oh * stride, src + oh * sh * stride, stride, kh, dh * stride);
  }
  combine_taps<kMax>(h, v, out_h * stride - (kw - 1) * dw, kw, dw);
  for (int64_t j = 0; j < out_n; ++j) y[j] = h[at[j]];
}

KILN_ISA_BODY
void pool_flat_body(bool is_max, const float* src, int64_t stride, int64_t out_h, int64_t sh, int64_t kh, int64_t dh,
               int64_t kw, int64_t dw, float* v, float* h, const int32_t* at, int64_t out_n, float* y) {
  if (is_max) {
    pool_flat_impl<true>(src, stride, out_h, sh, kh, dh, kw, dw, v, h, at, out_n, y);
  } else {
    pool_flat_impl<false>(src, stride, out_h, sh, kh, dh, kw, dw, v, h, at, out_n, y);
  }
}
KILN_ISA_DISPATCH(pool_flat, pool_flat_body);

KILN_ISA_BODY
void divide_by_count_body(float* y, const float* count, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = count[i] > 0 ? y[i] / count[i] : 0.f;
}
KILN_ISA_DISPATCH(divide_by_count, divide_by_count_body);

// The average's divisor in one dim: taps inside the input (or inside the
// pads, count_include_pad; ceil_mode overhang is never counted) of output o.
int64_t taps_counted(const Window3& w, const PoolParams& pp, int dim, int64_t o) {
  int64_t s, a, b;
  tap_range(w, dim, o, &s, &a, &b);
  if (!pp.count_include_pad) return b - a;
  const int64_t lo = std::max<int64_t>(s, -w.pb[dim]);
  const int64_t hi = std::min<int64_t>(s + (w.k[dim] - 1) * w.d[dim] + 1, w.in[dim] + w.pe[dim]);
  return hi > lo ? (hi - lo + w.d[dim] - 1) / w.d[dim] : int64_t{0};
}

// 1-D/2-D float32 max (without Indices) and average pools of dilation 1 on
// the phase-row kernels (pool_rows.h), where they apply: false otherwise.
bool pool_on_phase_rows(const Window3& w, const PoolParams& pp, int64_t planes, const float* x, float* y,
                        ThreadPool* pool) {
  if (w.in[0] != 1 || w.out[0] != 1 || w.d[1] != 1 || w.d[2] != 1 || pp.kind == PoolKind::kLp) return false;
  PoolRows2D g;
  g.planes = planes;
  g.in_h = w.in[1];
  g.in_w = w.in[2];
  g.out_h = w.out[1];
  g.out_w = w.out[2];
  g.k_h = w.k[1];
  g.k_w = w.k[2];
  g.s_h = w.s[1];
  g.s_w = w.s[2];
  g.p_t = w.pb[1];
  g.p_l = w.pb[2];
  g.is_max = pp.kind == PoolKind::kMax;
  thread_local std::vector<float> row_count, col_count;
  if (!g.is_max) {
    row_count.resize(static_cast<size_t>(g.out_h));
    col_count.resize(static_cast<size_t>(g.out_w));
    for (int64_t o = 0; o < g.out_h; ++o) row_count[static_cast<size_t>(o)] = static_cast<float>(taps_counted(w, pp, 1, o));
    for (int64_t o = 0; o < g.out_w; ++o) col_count[static_cast<size_t>(o)] = static_cast<float>(taps_counted(w, pp, 2, o));
    g.row_count = row_count.data();
    g.col_count = col_count.data();
  }
  if (!pool_rows_applies(g)) return false;
  pool_rows_f32(g, x, y, pool);
  return true;
}

// The float32 path for 1-D/2-D max (without Indices) and average pools. A
// plane whose windows all lie inside it is read in place; otherwise it is
// copied once into a buffer with its padding (-inf or 0) around it. The
// per-output tables (position, count) are the same for every plane.
void pool_plane_fast(const Window3& w, const PoolParams& pp, const float* x, float* y, PoolRows& buf) {
  const bool is_max = pp.kind == PoolKind::kMax;
  const int64_t in_h = w.in[1], in_w = w.in[2], out_h = w.out[1], out_w = w.out[2];
  const int64_t kh = w.k[1], kw = w.k[2], sh = w.s[1], sw = w.s[2], dh = w.d[1], dw = w.d[2];
  const int64_t pt = w.pb[1], pl = w.pb[2];
  const int64_t rows = (out_h - 1) * sh + (kh - 1) * dh + 1, cols = (out_w - 1) * sw + (kw - 1) * dw + 1;
  const bool in_place = pt == 0 && pl == 0 && rows <= in_h && cols <= in_w;
  const int64_t stride = in_place ? in_w : cols;
  const float* src = x;
  if (!in_place) {
    buf.padded.assign(static_cast<size_t>(rows * cols), is_max ? -std::numeric_limits<float>::infinity() : 0.f);
    const int64_t c0 = std::max<int64_t>(0, -pl), c1 = std::min(in_w, cols - pl);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t ih = r - pt;
      if (ih >= 0 && ih < in_h && c1 > c0)
        std::memcpy(buf.padded.data() + r * cols + pl + c0, x + ih * in_w + c0, static_cast<size_t>(c1 - c0) * 4);
    }
    src = buf.padded.data();
  }
  const int64_t v_n = out_h * stride, out_n = out_h * out_w;
  if (buf.v.size() < static_cast<size_t>(v_n)) {
    buf.v.resize(static_cast<size_t>(v_n));
    buf.h.resize(static_cast<size_t>(v_n));
  }
  const std::array<int64_t, 4> key{stride, out_h, out_w, sw};
  if (buf.at_key != key) {  // the same for every plane of a call
    buf.at.resize(static_cast<size_t>(out_n));
    for (int64_t oh = 0; oh < out_h; ++oh)
      for (int64_t ow = 0; ow < out_w; ++ow)
        buf.at[static_cast<size_t>(oh * out_w + ow)] = static_cast<int32_t>(oh * stride + ow * sw);
    buf.at_key = key;
  }
  pool_flat(is_max, src, stride, out_h, sh, kh, dh, kw, dw, buf.v.data(), buf.h.data(), buf.at.data(), out_n, y);
  if (is_max) return;
  auto counted = [&](int dim, int64_t o) { return taps_counted(w, pp, dim, o); };
  buf.count.resize(static_cast<size_t>(out_n));
  for (int64_t oh = 0; oh < out_h; ++oh) {
    const int64_t r = counted(1, oh);
    for (int64_t ow = 0; ow < out_w; ++ow)
      buf.count[static_cast<size_t>(oh * out_w + ow)] = static_cast<float>(r * counted(2, ow));
  }
  divide_by_count(y, buf.count.data(), out_n);
}

class PoolKernel final : public Kernel {
 public:
  explicit PoolKernel(PoolKind kind) : kind_(kind) {}

  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(attrs_, WindowAttrs::parse(init));
    if (attrs_.kernel_shape.empty())
      return invalid_argument("attribute kernel_shape is required");
    params_.kind = kind_;
    params_.count_include_pad = init.attr_int("count_include_pad", 0) != 0;
    const int64_t order = init.attr_int("storage_order", 0);
    if (order != 0 && order != 1)
      return invalid_argument("attribute storage_order is ", order, ", expected 0 or 1");
    params_.column_major = order == 1;
    if (kind_ == PoolKind::kLp) {
      const ir::Attribute* p = init.node.find_attr("p");
      if (p) params_.p = p->type == ir::AttrType::kFloat ? static_cast<double>(p->f) : static_cast<double>(p->i);
      if (!(params_.p > 0))
        return invalid_argument("attribute p is ", params_.p, ", expected > 0");
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    if (x.rank() < 3 || x.rank() > 5) {
      return invalid_argument("input 0 (X) has shape ", x.shape().to_string(),
                              ", expected [N, C, D1...] with 1 to 3 spatial dims");
    }
    if (attrs_.kernel_shape.size() != x.rank() - 2) {
      return invalid_argument("attribute kernel_shape has ", attrs_.kernel_shape.size(),
                              " values, input 0 (X) ", x.shape().to_string(), " has ", x.rank() - 2, " spatial dims");
    }
    KILN_ASSIGN_OR_RETURN(WindowGeometry g, resolve_window(attrs_, x.shape().dims().subspan(2), attrs_.kernel_shape));
    Shape y_shape{x.dim(0), x.dim(1)};
    for (int64_t d : g.out) y_shape.push_back(d);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), y_shape));
    Tensor* indices = nullptr;
    if (kind_ == PoolKind::kMax && ctx.wants_output(1)) {
      KILN_ASSIGN_OR_RETURN(indices, ctx.allocate_output(1, DType::kInt64, y_shape));
    }
    const Window3 w = to_window3(g);
    const int64_t planes = x.dim(0) * x.dim(1), in_size = w.in_size(), out_size = w.out_size();
    if (planes == 0 || out_size == 0) return Status::ok();
    if (x.dtype() == DType::kFloat32 && !indices &&
        pool_on_phase_rows(w, params_, planes, x.data<float>(), y->data<float>(), ctx.pool()))
      return Status::ok();
    const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, out_size * g.kernel_size()));
    Status st;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Float16> ||
                    std::is_same_v<T, BFloat16> || std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) {
        const T* xd = x.data<T>();
        T* yd = y->data<T>();
        int64_t* id = indices ? indices->data<int64_t>() : nullptr;
        const bool fast = std::is_same_v<T, float> && !id && w.in[0] == 1 && w.out[0] == 1 &&
                          kind_ != PoolKind::kLp;
        parallel_for(ctx.pool(), planes, grain, [&](int64_t b, int64_t e) {
          thread_local PoolRows rows;
          for (int64_t plane = b; plane < e; ++plane) {
            if constexpr (std::is_same_v<T, float>) {
              if (fast) {
                pool_plane_fast(w, params_, xd + plane * in_size, yd + plane * out_size, rows);
                continue;
              }
            }
            int64_t* pidx = id ? id + plane * out_size : nullptr;
            pool_plane<T>(w, params_, xd + plane * in_size, yd + plane * out_size, pidx);
            if (pidx)
              for (int64_t i = 0; i < out_size; ++i) pidx[i] += plane * in_size;
          }
        });
      } else {
        st = unsupported_dtype(0, x.dtype());
      }
    });
    return st;
  }

 private:
  PoolKind kind_;
  WindowAttrs attrs_;
  PoolParams params_;
};

template <PoolKind kKind>
Result<std::unique_ptr<Kernel>> make_pool(const KernelInit& init) {
  return init_kernel(std::make_unique<PoolKernel>(kKind), init);
}

// ------------------------------------------------------------ Global pools

// Sum / max / sum of |x|^p of one contiguous plane.
KILN_ISA_BODY
float plane_sum_body(const float* x, int64_t n) {
  // Eight partial sums: vectorizes without reassociation flags.
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += x[i + j];
  float s = 0.f;
  for (; i < n; ++i) s += x[i];
  for (int j = 0; j < 8; ++j) s += acc[j];
  return s;
}
KILN_ISA_DISPATCH(plane_sum, plane_sum_body);

KILN_ISA_BODY
float plane_max_body(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    m = x[i] > m ? x[i] : m;
    nan |= x[i] != x[i];
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}
KILN_ISA_DISPATCH(plane_max, plane_max_body);

class GlobalPoolKernel final : public Kernel {
 public:
  explicit GlobalPoolKernel(PoolKind kind) : kind_(kind) {}

  Status init(const KernelInit& init) {
    if (kind_ == PoolKind::kLp) {
      const ir::Attribute* p = init.node.find_attr("p");
      if (p) p_ = p->type == ir::AttrType::kFloat ? static_cast<double>(p->f) : static_cast<double>(p->i);
      if (!(p_ > 0)) return invalid_argument("attribute p is ", p_, ", expected > 0");
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2) {
      return invalid_argument("input 0 (X) has shape ", x.shape().to_string(),
                              ", expected [N, C, spatial...]");
    }
    Shape y_shape{x.dim(0), x.dim(1)};
    int64_t size = 1;
    for (size_t i = 2; i < x.rank(); ++i) {
      y_shape.push_back(1);
      size *= x.dim(i);
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), y_shape));
    const int64_t planes = x.dim(0) * x.dim(1);
    if (planes == 0) return Status::ok();
    if (size == 0 && kind_ != PoolKind::kLp) {
      return invalid_argument("input 0 (X) ", x.shape().to_string(), " has empty spatial dims");
    }
    Status st;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Float16> ||
                    std::is_same_v<T, BFloat16>) {
        const T* xd = x.data<T>();
        T* yd = y->data<T>();
        parallel_for(ctx.pool(), planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, size)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t plane = b; plane < e; ++plane) yd[plane] = reduce<T>(xd + plane * size, size);
                     });
      } else {
        st = unsupported_dtype(0, x.dtype());
      }
    });
    return st;
  }

 private:
  template <class T>
  T reduce(const T* x, int64_t n) const {
    if constexpr (std::is_same_v<T, float>) {
      if (kind_ == PoolKind::kAverage) return plane_sum(x, n) / static_cast<float>(n);
      if (kind_ == PoolKind::kMax) return plane_max(x, n);
    }
    using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
    if (kind_ == PoolKind::kMax) {
      Acc m = static_cast<Acc>(x[0]);
      for (int64_t i = 1; i < n; ++i) {
        const Acc v = static_cast<Acc>(x[i]);
        if (v > m || v != v) m = v;
        if (m != m) break;
      }
      return static_cast<T>(m);
    }
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(x[i]);
      s += kind_ == PoolKind::kLp ? std::pow(std::abs(v), p_) : v;
    }
    if (kind_ == PoolKind::kLp) return static_cast<T>(std::pow(s, 1.0 / p_));
    return static_cast<T>(s / static_cast<double>(n));
  }

  PoolKind kind_;
  double p_ = 2.0;
};

template <PoolKind kKind>
Result<std::unique_ptr<Kernel>> make_global_pool(const KernelInit& init) {
  return init_kernel(std::make_unique<GlobalPoolKernel>(kKind), init);
}

// ------------------------------------------------------------ MaxUnpool

// Y = zeros(output_shape); Y.flat[I[i]] = X[i]. The default output shape
// inverts MaxPool: (in - 1) * stride + kernel - pad_begin - pad_end, and the
// indices I address that default shape. When input 2 (output_shape) asks for
// a larger output, each index keeps its coordinates (the extra rows and
// columns are zeros), as the ONNX backend test
// maxunpool_export_with_output_shape expects; an index whose coordinates do
// not fit the output is an error.
class MaxUnpoolKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(attrs_, WindowAttrs::parse(init));
    if (attrs_.kernel_shape.empty())
      return invalid_argument("attribute kernel_shape is required");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1))
      return invalid_argument("inputs 0 (X) and 1 (I) are required");
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    const size_t r = x.rank() >= 2 ? x.rank() - 2 : 0;
    if (x.rank() < 3 || attrs_.kernel_shape.size() != r) {
      return invalid_argument("input 0 (X) has shape ", x.shape().to_string(),
                              ", expected [N, C] plus ", attrs_.kernel_shape.size(), " spatial dims (kernel_shape)");
    }
    if (ind.shape() != x.shape() || ind.dtype() != DType::kInt64) {
      return invalid_argument("input 1 (I) is ", dtype_name(ind.dtype()), ind.shape().to_string(),
                              ", expected int64 with the shape of input 0 (X) ", x.shape().to_string());
    }
    if ((!attrs_.strides.empty() && attrs_.strides.size() != r) || (!attrs_.pads.empty() && attrs_.pads.size() != 2 * r))
      return invalid_argument("attributes strides/pads do not match ", r, " spatial dims");
    Shape inferred{x.dim(0), x.dim(1)};
    for (size_t d = 0; d < r; ++d) {
      const int64_t st = attrs_.strides.empty() ? 1 : attrs_.strides[d];
      const int64_t pads = attrs_.pads.empty() ? 0 : attrs_.pads[d] + attrs_.pads[d + r];
      inferred.push_back(std::max<int64_t>(0, (x.dim(d + 2) - 1) * st + attrs_.kernel_shape[d] - pads));
    }
    Shape y_shape = inferred;
    if (ctx.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> os, to_int64_vector(ctx.input(2)));
      if (os.size() != x.rank()) {
        return invalid_argument("input 2 (output_shape) has ", os.size(), " values, expected ",
                                x.rank());
      }
      y_shape = Shape(os);
      if (y_shape[0] != x.dim(0) || y_shape[1] != x.dim(1))
        return invalid_argument("input 2 (output_shape) ", y_shape.to_string(),
                                " must keep N and C of input 0 (X) ", x.shape().to_string());
      for (int64_t d : os)
        if (d < 0) return invalid_argument("input 2 (output_shape) has a negative dim");
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), y_shape));
    std::fill_n(static_cast<unsigned char*>(y->raw_data()), y->nbytes(), 0);
    const int64_t total = inferred.numel();
    const int64_t* id = ind.data<int64_t>();
    const size_t esize = dtype_size(x.dtype());
    const auto* xb = static_cast<const unsigned char*>(x.raw_data());
    auto* yb = static_cast<unsigned char*>(y->raw_data());
    const bool same = y_shape == inferred;
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t at = id[i];
      if (at < 0 || at >= total) {
        return invalid_argument("input 1 (I) has index ", at, " at ", i, ", outside the ",
                                inferred.to_string(), " output it indexes");
      }
      if (!same) {  // same coordinates in the larger output
        int64_t rem = at, off = 0, scale = 1;
        for (size_t d = y_shape.rank(); d-- > 0;) {
          const int64_t c = rem % inferred[d];
          rem /= inferred[d];
          if (c >= y_shape[d]) {
            return invalid_argument("input 1 (I) index ", at, " does not fit input 2 (output_shape) ",
                                    y_shape.to_string());
          }
          off += c * scale;
          scale *= y_shape[d];
        }
        at = off;
      }
      std::copy_n(xb + i * esize, esize, yb + at * esize);
    }
    return Status::ok();
  }

 private:
  WindowAttrs attrs_;
};

constexpr DTypeSet kPoolFloat = kFloatDTypes;
constexpr DTypeSet kMaxPoolTypes = kFloatDTypes | dtype_set(DType::kInt8, DType::kUInt8);

}  // namespace

void register_pool_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "MaxPool", .since_version = 1, .until_version = 1000, .dtypes = kMaxPoolTypes,
         .type_input = 0, .factory = make_pool<PoolKind::kMax>, .flags = 0});
  r.add({.domain = "", .op_type = "AveragePool", .since_version = 1, .until_version = 1000, .dtypes = kPoolFloat,
         .type_input = 0, .factory = make_pool<PoolKind::kAverage>, .flags = 0});
  r.add({.domain = "", .op_type = "LpPool", .since_version = 1, .until_version = 1000, .dtypes = kPoolFloat,
         .type_input = 0, .factory = make_pool<PoolKind::kLp>, .flags = 0});
  r.add({.domain = "", .op_type = "GlobalAveragePool", .since_version = 1, .until_version = 1000, .dtypes = kPoolFloat,
         .type_input = 0, .factory = make_global_pool<PoolKind::kAverage>, .flags = 0});
  r.add({.domain = "", .op_type = "GlobalMaxPool", .since_version = 1, .until_version = 1000, .dtypes = kPoolFloat,
         .type_input = 0, .factory = make_global_pool<PoolKind::kMax>, .flags = 0});
  r.add({.domain = "", .op_type = "GlobalLpPool", .since_version = 1, .until_version = 1000, .dtypes = kPoolFloat,
         .type_input = 0, .factory = make_global_pool<PoolKind::kLp>, .flags = 0});
  r.add({.domain = "", .op_type = "MaxUnpool", .since_version = 9, .until_version = 1000, .dtypes = kPoolFloat,
         .type_input = 0, .factory = make_kernel<MaxUnpoolKernel>, .flags = 0});
}

}  // namespace kiln::kernels
