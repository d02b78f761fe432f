// Helpers shared by the compute-heavy kernel families (conv, conv_transpose,
// pool, normalization, quantize, matmul): the sliding-window geometry of
// Conv/Pool (kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) and
// float32 staging of float16/bfloat16/double tensors for kernels whose fast
// path is float32.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/portable/cpu/x86/isa.h"  // KILN_ISA_BODY / KILN_ISA_DISPATCH for the conv loops
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

/// The window attributes of Conv, ConvTranspose and the pools, as given.
/// Empty vectors mean "not given" (defaults are filled in by the geometry).
struct WindowAttrs {
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begins then ends
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;

  /// Reads the attributes of `node`; checks auto_pad's value and that no
  /// stride/dilation is < 1 and no pad < 0.
  static Result<WindowAttrs> parse(const KernelInit& init);
};

/// The resolved window over the spatial dims of one input.
struct WindowGeometry {
  std::vector<int64_t> in;      // input spatial dims
  std::vector<int64_t> out;     // output spatial dims
  std::vector<int64_t> kernel;  // kernel spatial dims
  std::vector<int64_t> stride, dilation, pad_begin, pad_end;

  size_t rank() const { return in.size(); }
  int64_t in_size() const;      // product of in
  int64_t out_size() const;     // product of out
  int64_t kernel_size() const;  // product of kernel
};

/// A rank-1 or rank-2 window as 2-D: rank 1 is one row (height 1, no top
/// padding). The shared base of the 2-D convolution paths' plans.
struct WindowDims2 {
  int64_t ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl;
  explicit WindowDims2(const WindowGeometry& g) {
    const bool two = g.rank() == 2;
    auto height = [two](const std::vector<int64_t>& v, int64_t none) { return two ? v[0] : none; };
    ih = height(g.in, 1), iw = g.in.back();
    oh = height(g.out, 1), ow = g.out.back();
    kh = height(g.kernel, 1), kw = g.kernel.back();
    sh = height(g.stride, 1), sw = g.stride.back();
    dh = height(g.dilation, 1), dw = g.dilation.back();
    pt = height(g.pad_begin, 0), pl = g.pad_begin.back();
  }
};

/// Resolves `attrs` for the spatial dims `in_spatial` and the kernel dims
/// `kernel` (from W for Conv, kernel_shape for pools). Applies auto_pad
/// (SAME_UPPER/SAME_LOWER: output = ceil(in / stride); VALID: no padding)
/// and ceil_mode (a window that would start inside the end padding is
/// dropped, as in PyTorch). Errors name `node` and the offending attribute.
Result<WindowGeometry> resolve_window(const WindowAttrs& attrs, std::span<const int64_t> in_spatial,
                                      std::span<const int64_t> kernel);

namespace detail {
/// The write cursor of im2col_panels over one row p of the panels: `panel`
/// points at lane 0 of the current panel's row, panels are kc * nr apart.
template <class T>
struct PanelWriter {
  T* panel;
  int64_t lane;
  int64_t nr, kc;
  T pad;
  const T* pad8;  // 8 copies of pad

  /// Appends `len` values src[t * step] (or `pad` when src is null).
  inline void emit(const T* src, int64_t step, int64_t len) {
    while (len > 0) {
      const int64_t chunk = std::min(len, nr - lane);
      T* dst = panel + lane;
      if (!src) {
        int64_t t = 0;
        for (; t + 8 <= chunk; t += 8) __builtin_memcpy(dst + t, pad8, 8 * sizeof(T));
        for (; t < chunk; ++t) dst[t] = pad;
      } else if (step == 1) {
        copy_short(dst, src, chunk);
        src += chunk;
      } else if (step == 2) {
        copy_stride2(dst, src, chunk);
        src += chunk * 2;
      } else {
        for (int64_t t = 0; t < chunk; ++t) dst[t] = src[t * step];
        src += chunk * step;
      }
      lane += chunk;
      len -= chunk;
      if (lane == nr) {
        lane = 0;
        panel += kc * nr;
      }
    }
  }

  // Fixed-size copies inline as vector moves; a plain loop would become a
  // libc memcpy call, costly for these short runs.
  static inline void copy_short(T* dst, const T* src, int64_t n) {
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) __builtin_memcpy(dst + t, src + t, 8 * sizeof(T));
    if (n - t >= 4) {
      __builtin_memcpy(dst + t, src + t, 4 * sizeof(T));
      t += 4;
    }
    if (n - t >= 2) {
      __builtin_memcpy(dst + t, src + t, 2 * sizeof(T));
      t += 2;
    }
    if (n - t >= 1) dst[t] = src[t];
  }

  // dst[t] = src[2 * t] (stride-2 convolutions: the stems): sixteen, then
  // four at a time from twice as many loaded values and one shuffle, never
  // reading past src[2 * (n - 1)].
  static inline void copy_stride2(T* dst, const T* src, int64_t n) {
    int64_t t = 0;
    if constexpr (std::is_same_v<T, float>) {
      typedef float V16 __attribute__((vector_size(64)));  // one permute where the ISA has 16 lanes
      for (; t + 17 <= n; t += 16) {
        V16 lo, hi;
        __builtin_memcpy(&lo, src + 2 * t, sizeof(V16));
        __builtin_memcpy(&hi, src + 2 * t + 16, sizeof(V16));
        const V16 even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        __builtin_memcpy(dst + t, &even, sizeof(V16));
      }
      typedef float V4 __attribute__((vector_size(16)));
      for (; t + 5 <= n; t += 4) {
        V4 lo, hi;
        __builtin_memcpy(&lo, src + 2 * t, sizeof(V4));
        __builtin_memcpy(&hi, src + 2 * t + 4, sizeof(V4));
        const V4 even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6);
        __builtin_memcpy(dst + t, &even, sizeof(V4));
      }
    }
    for (; t < n; ++t) dst[t] = src[2 * t];
  }
};
}  // namespace detail

/// Writes rows [p0, p0 + kc) and columns [j0, j0 + nc) of the im2col matrix
/// of one image (or one group of it) in the panel layout of BPanelSource
/// (gemm.h): row p is (channel p / kernel_size, kernel offset p %
/// kernel_size), column j is output position j (both row-major), so
/// out[(j / nr) * kc * nr + p * nr + j % nr]. With nr >= nc it is a plain
/// row-major kc x nc matrix with leading dimension nr. `x` points at the
/// first channel, channels are g.in_size() apart; `pad` fills positions
/// outside the input and the columns past nc of the last panel.
template <class T>
void im2col_panels(const WindowGeometry& g, const T* x, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
                   T pad, T* out) {
  const size_t r = g.rank();
  const size_t last = r - 1;
  const int64_t ksize = g.kernel_size(), in_size = g.in_size();
  const int64_t out_last = g.out[last], in_last = g.in[last], s_last = g.stride[last];
  int64_t kd[8], od[8];  // kernel and output coordinates; rank <= 8 is checked by the kernels
  T pad8[8];
  for (T& v : pad8) v = pad;
  for (int64_t pp = 0; pp < kc; ++pp) {
    const int64_t p = p0 + pp;
    const T* xc = x + (p / ksize) * in_size;
    for (int64_t rem = p % ksize, d = static_cast<int64_t>(r); d-- > 0;) {
      kd[d] = rem % g.kernel[static_cast<size_t>(d)];
      rem /= g.kernel[static_cast<size_t>(d)];
    }
    for (int64_t rem = j0, d = static_cast<int64_t>(r); d-- > 0;) {
      od[d] = rem % g.out[static_cast<size_t>(d)];
      rem /= g.out[static_cast<size_t>(d)];
    }
    // The inside part of a run that starts at output column 0.
    const int64_t first0 = kd[last] * g.dilation[last] - g.pad_begin[last];
    const int64_t row_lo = first0 < 0 ? (-first0 + s_last - 1) / s_last : 0;
    const int64_t row_hi = first0 < in_last ? (in_last - 1 - first0) / s_last + 1 : 0;
    detail::PanelWriter<T> w{out + pp * nr, 0, nr, kc, pad, pad8};
    for (int64_t remaining = nc; remaining > 0;) {
      const int64_t run = std::min(out_last - od[last], remaining);
      bool inside = true;
      int64_t base = 0;
      for (size_t d = 0; d < last; ++d) {
        const int64_t i = od[d] * g.stride[d] - g.pad_begin[d] + kd[d] * g.dilation[d];
        if (i < 0 || i >= g.in[d]) inside = false;
        base = base * g.in[d] + i;
      }
      if (!inside) {
        w.emit(nullptr, 0, run);
      } else {
        // Input column of output column o: o * s - pad + k * dilation; split
        // the run into [before the input | inside | after the input]. Runs
        // that start a row reuse the split computed once for this p (the
        // divisions would otherwise dominate on small maps).
        const int64_t first = od[last] * s_last - g.pad_begin[last] + kd[last] * g.dilation[last];
        int64_t lo, hi;
        if (od[last] == 0) {
          lo = std::min(row_lo, run);
          hi = std::max(lo, std::min(row_hi, run));
        } else {
          lo = first < 0 ? (-first + s_last - 1) / s_last : 0;                // first t inside
          hi = first < in_last ? (in_last - 1 - first) / s_last + 1 : 0;      // one past the last t inside
          lo = std::min(lo, run);
          hi = std::max(lo, std::min(hi, run));
        }
        w.emit(nullptr, 0, lo);
        w.emit(xc + base * in_last + first + lo * s_last, s_last, hi - lo);
        w.emit(nullptr, 0, run - hi);
      }
      remaining -= run;
      od[last] = 0;
      for (size_t d = last; d-- > 0;) {
        if (++od[d] < g.out[d]) break;
        od[d] = 0;
      }
    }
    if (w.lane != 0) w.emit(nullptr, 0, nr - w.lane);
  }
}

/// Copies a float16/bfloat16/double/float32 tensor's values into float32.
std::vector<float> to_float_vector(const Tensor& t);
/// Writes float32 values into `out` (float16/bfloat16/double/float32),
/// rounding as the dtype requires.
void from_float_vector(const float* values, Tensor* out);

/// Checks Conv/ConvTranspose inputs X, W (present, ranks 3..10 and equal)
/// and the dtypes of W and the optional B against X; errors name the input.
Status check_conv_inputs(const KernelContext& ctx);

}  // namespace kiln::kernels

