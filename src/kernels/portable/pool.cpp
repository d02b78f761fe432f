// Pooling: MaxPool (with the optional Indices output, dilations, ceil_mode,
// storage_order), AveragePool (count_include_pad, ceil_mode), LpPool,
// GlobalAveragePool, GlobalMaxPool, GlobalLpPool and MaxUnpool; every opset.
//
// Windowed pools treat 1-D, 2-D and 3-D inputs alike as 3-D (missing leading
// spatial dims have size 1, kernel 1, stride 1) and run one plane (n, c) per
// task. For each output the valid part of the window is computed once per
// dim, so the inner loops touch only in-bounds elements and need no checks.
#include <algorithm>
#include <cmath>
#include <limits>

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

// Element-wise NaN-propagating max (a NaN in either wins); vectorizes to blends.
KILN_CV_MULTIVERSION
void rows_max(float* acc, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = (x[i] > acc[i] || x[i] != x[i]) ? x[i] : acc[i];
}

KILN_CV_MULTIVERSION
void rows_add(float* acc, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += x[i];
}

// The float32 path for 1-D/2-D max (without Indices) and average pools: for
// each output row, the valid kernel rows are combined element-wise into one
// padded row (vectorized), then each output reduces `kw` taps of that row,
// with no bounds checks (the padding holds -inf or 0).
void pool_plane_fast(const Window3& w, const PoolParams& pp, const float* x, float* y, std::vector<float>& row) {
  const bool is_max = pp.kind == PoolKind::kMax;
  const int64_t in_h = w.in[1], in_w = w.in[2], out_h = w.out[1], out_w = w.out[2];
  const int64_t kw = w.k[2], sw = w.s[2], dw = w.d[2], pl = w.pb[2];
  const int64_t padded = (out_w - 1) * sw + (kw - 1) * dw + 1;  // row positions the windows read
  const int64_t copy_lo = std::max<int64_t>(0, -pl);             // input columns that land in the row
  const int64_t copy_hi = std::min(in_w, padded - pl);
  const float fill = is_max ? -std::numeric_limits<float>::infinity() : 0.f;
  row.resize(static_cast<size_t>(padded));
  for (int64_t oh = 0; oh < out_h; ++oh) {
    int64_t s0, a0, b0;
    tap_range(w, 1, oh, &s0, &a0, &b0);
    std::fill(row.begin(), row.end(), fill);
    float* r = row.data() + pl;  // r[iw] is input column iw
    for (int64_t kh = a0; kh < b0; ++kh) {
      const float* xr = x + (s0 + kh * w.d[1]) * in_w;
      if (copy_hi <= copy_lo) break;
      if (kh == a0) {
        std::copy(xr + copy_lo, xr + copy_hi, r + copy_lo);
      } else if (is_max) {
        rows_max(r + copy_lo, xr + copy_lo, copy_hi - copy_lo);
      } else {
        rows_add(r + copy_lo, xr + copy_lo, copy_hi - copy_lo);
      }
    }
    float* yr = y + oh * out_w;
    if (is_max) {
      // Branch-free (maxss) with NaN tracked on the side: random data would
      // mispredict a compare-and-branch on every tap.
      for (int64_t ow = 0; ow < out_w; ++ow) {
        const float* t = row.data() + ow * sw;
        float m = t[0];
        bool nan = t[0] != t[0];
        for (int64_t k = 1; k < kw; ++k) {
          const float v = t[k * dw];
          m = m > v ? m : v;
          nan |= v != v;
        }
        yr[ow] = nan ? std::numeric_limits<float>::quiet_NaN() : m;
      }
      continue;
    }
    int64_t rows_count = b0 - a0;
    if (pp.count_include_pad) {
      const int64_t lo = std::max<int64_t>(s0, -w.pb[1]);
      const int64_t hi = std::min<int64_t>(s0 + (w.k[1] - 1) * w.d[1] + 1, in_h + w.pe[1]);
      rows_count = hi > lo ? (hi - lo + w.d[1] - 1) / w.d[1] : 0;
    }
    for (int64_t ow = 0; ow < out_w; ++ow) {
      const float* t = row.data() + ow * sw;
      float sum = 0.f;
      for (int64_t k = 0; k < kw; ++k) sum += t[k * dw];
      int64_t s2, a2, b2;
      tap_range(w, 2, ow, &s2, &a2, &b2);
      int64_t cols = b2 - a2;
      if (pp.count_include_pad) {
        const int64_t lo = std::max<int64_t>(s2, -w.pb[2]);
        const int64_t hi = std::min<int64_t>(s2 + (kw - 1) * dw + 1, in_w + w.pe[2]);
        cols = hi > lo ? (hi - lo + dw - 1) / dw : 0;
      }
      const int64_t count = rows_count * cols;
      yr[ow] = count > 0 ? sum / static_cast<float>(count) : 0.f;
    }
  }
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
          std::vector<float> row;
          for (int64_t plane = b; plane < e; ++plane) {
            if constexpr (std::is_same_v<T, float>) {
              if (fast) {
                pool_plane_fast(w, params_, xd + plane * in_size, yd + plane * out_size, row);
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
KILN_CV_MULTIVERSION
float plane_sum(const float* x, int64_t n) {
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

KILN_CV_MULTIVERSION
float plane_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    m = x[i] > m ? x[i] : m;
    nan |= x[i] != x[i];
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

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
