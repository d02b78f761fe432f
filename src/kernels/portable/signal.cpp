// Signal ops (opset 17): DFT, STFT, HannWindow, HammingWindow,
// BlackmanWindow and MelWeightMatrix.
//
// Transforms run in double precision: radix-2 FFT for power-of-two lengths,
// Bluestein's chirp-z algorithm (three power-of-two FFTs) for any other
// length, so every length costs O(n log n). Complex values are the ONNX
// layout: a trailing dimension of 2 (real, imaginary); real inputs have a
// trailing dimension of 1.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <type_traits>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

using cd = std::complex<double>;

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// exp(sign * 2*pi*i * k / n) with k reduced mod n first (keeps the angle small).
cd twiddle(int64_t k, int64_t n, double sign) {
  k %= n;
  if (k < 0) k += n;
  const double a = sign * 2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n);
  return {std::cos(a), std::sin(a)};
}

// In-place radix-2 FFT of a power-of-two length; sign -1 forward, +1 inverse (unscaled).
void fft_pow2(std::vector<cd>& a, double sign) {
  const auto n = static_cast<int64_t>(a.size());
  for (int64_t i = 1, j = 0; i < n; ++i) {
    int64_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[static_cast<size_t>(i)], a[static_cast<size_t>(j)]);
  }
  for (int64_t len = 2; len <= n; len <<= 1) {
    const int64_t half = len / 2;
    std::vector<cd> w(static_cast<size_t>(half));
    for (int64_t k = 0; k < half; ++k) w[static_cast<size_t>(k)] = twiddle(k, len, sign);
    for (int64_t i = 0; i < n; i += len) {
      for (int64_t k = 0; k < half; ++k) {
        const cd u = a[static_cast<size_t>(i + k)];
        const cd v = a[static_cast<size_t>(i + k + half)] * w[static_cast<size_t>(k)];
        a[static_cast<size_t>(i + k)] = u + v;
        a[static_cast<size_t>(i + k + half)] = u - v;
      }
    }
  }
}

// DFT of any length (unscaled): X[k] = sum_j x[j] exp(sign * 2*pi*i * j*k / n).
void dft(std::vector<cd>& a, double sign) {
  const auto n = static_cast<int64_t>(a.size());
  if (n <= 1) return;
  if (is_pow2(n)) {
    fft_pow2(a, sign);
    return;
  }
  // Bluestein: j*k = (j^2 + k^2 - (k - j)^2) / 2, so the DFT is a
  // convolution with the chirp exp(sign * pi*i * m^2 / n).
  int64_t m = 1;
  while (m < 2 * n - 1) m <<= 1;
  std::vector<cd> chirp(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    // exp(sign*pi*i*k^2/n) = twiddle(k^2 mod 2n, 2n).
    const int64_t k2 = (k * k) % (2 * n);
    chirp[static_cast<size_t>(k)] = twiddle(k2, 2 * n, sign);
  }
  std::vector<cd> u(static_cast<size_t>(m)), v(static_cast<size_t>(m));
  for (int64_t k = 0; k < n; ++k) u[static_cast<size_t>(k)] = a[static_cast<size_t>(k)] * chirp[static_cast<size_t>(k)];
  v[0] = std::conj(chirp[0]);
  for (int64_t k = 1; k < n; ++k) {
    v[static_cast<size_t>(k)] = v[static_cast<size_t>(m - k)] = std::conj(chirp[static_cast<size_t>(k)]);
  }
  fft_pow2(u, -1);
  fft_pow2(v, -1);
  for (int64_t i = 0; i < m; ++i) u[static_cast<size_t>(i)] *= v[static_cast<size_t>(i)];
  fft_pow2(u, 1);
  const double scale = 1.0 / static_cast<double>(m);
  for (int64_t k = 0; k < n; ++k) a[static_cast<size_t>(k)] = u[static_cast<size_t>(k)] * scale * chirp[static_cast<size_t>(k)];
}

// Reads a scalar (or one-element) integer input.
Result<int64_t> scalar_int(const KernelContext& ctx, size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1 || !dtype_is_integer(t.dtype())) {
    return invalid_argument("input ", i, " (", name, ") must be an integer scalar, got ",
                            dtype_name(t.dtype()), t.shape().to_string());
  }
  KILN_ASSIGN_OR_RETURN(auto v, to_int64_vector(t));
  return v[0];
}

Result<double> scalar_float(const KernelContext& ctx, size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) {
    return invalid_argument("input ", i, " (", name, ") must be a scalar, got shape ",
                            t.shape().to_string());
  }
  KILN_ASSIGN_OR_RETURN(auto v, to_double_vector(t));
  return v[0];
}

// Writes double values into a float tensor of any float dtype.
void store(const std::vector<double>& v, Tensor* out) {
  visit_dtype(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      std::copy(v.begin(), v.end(), out->data<double>());
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      T* d = out->data<T>();
      for (size_t i = 0; i < v.size(); ++i) d[i] = static_cast<T>(static_cast<float>(v[i]));
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      T* d = out->data<T>();
      for (size_t i = 0; i < v.size(); ++i) d[i] = static_cast<T>(v[i]);
    }
  });
}

class DftKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    // Opset 20 moved axis from an attribute (default 1) to input 2 (default -2).
    axis_from_input_ = init.opset >= 20;
    axis_ = axis_from_input_ ? -2 : init.attr_int("axis", 1);
    inverse_ = init.attr_int("inverse", 0) != 0;
    onesided_ = init.attr_int("onesided", 0) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const auto rank = static_cast<int64_t>(x.rank());
    if (!dtype_is_float(x.dtype()))
      return invalid_argument("input 0 (input) must be float, got ", dtype_name(x.dtype()));
    if (rank < 2 || (x.dim(x.rank() - 1) != 1 && x.dim(x.rank() - 1) != 2)) {
      return invalid_argument("input 0 (input) must be [batch, ..., 1 or 2], got ",
                              x.shape().to_string());
    }
    int64_t axis_given = axis_;
    if (axis_from_input_ && ctx.has_input(2)) {
      KILN_ASSIGN_OR_RETURN(axis_given, scalar_int(ctx, 2, "axis"));
    }
    int64_t axis = axis_given < 0 ? axis_given + rank : axis_given;
    if (axis < 0 || axis >= rank - 1) {
      return invalid_argument("axis ", axis_given, " is out of range for input rank ", rank,
                              " (the last dimension holds the complex parts)");
    }
    const bool complex_in = x.dim(x.rank() - 1) == 2;
    const int64_t in_len = x.dim(static_cast<size_t>(axis));
    // inverse + onesided (irfft): the input is the first n/2+1 bins of a
    // Hermitian spectrum; the output is the real signal of length n.
    const bool irfft = inverse_ && onesided_;
    int64_t n = irfft ? 2 * (in_len - 1) : in_len;
    if (ctx.has_input(1) && ctx.input(1).numel() > 0) {
      KILN_ASSIGN_OR_RETURN(n, scalar_int(ctx, 1, "dft_length"));
      if (n <= 0) return invalid_argument("input 1 (dft_length) must be positive, got ", n);
    }
    if (n <= 0) return invalid_argument("the signal length along axis ", axis, " is ", n);
    const int64_t out_len = irfft ? n : onesided_ ? n / 2 + 1 : n;
    Shape out_shape = x.shape();
    out_shape[static_cast<size_t>(axis)] = out_len;
    out_shape[x.rank() - 1] = irfft ? 1 : 2;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));

    KILN_ASSIGN_OR_RETURN(std::vector<double> in, to_double_vector(x));
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= x.dim(static_cast<size_t>(i));
    for (int64_t i = axis + 1; i < rank - 1; ++i) inner *= x.dim(static_cast<size_t>(i));
    const int64_t cin = complex_in ? 2 : 1;
    std::vector<double> res(static_cast<size_t>(out->numel()));
    std::vector<cd> buf(static_cast<size_t>(n));
    const double sign = inverse_ ? 1.0 : -1.0;
    const double scale = inverse_ ? 1.0 / static_cast<double>(n) : 1.0;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < inner; ++k) {
        for (int64_t j = 0; j < n; ++j) {
          const bool mirrored = irfft && j >= in_len && n - j < in_len;
          const int64_t src = mirrored ? n - j : j;
          if (src >= in_len) {
            buf[static_cast<size_t>(j)] = 0;
            continue;
          }
          const size_t at = static_cast<size_t>(((o * in_len + src) * inner + k) * cin);
          const cd v(in[at], complex_in ? in[at + 1] : 0.0);
          buf[static_cast<size_t>(j)] = mirrored ? std::conj(v) : v;
        }
        dft(buf, sign);
        const int64_t parts = irfft ? 1 : 2;
        for (int64_t j = 0; j < out_len; ++j) {
          const size_t at = static_cast<size_t>(((o * out_len + j) * inner + k) * parts);
          res[at] = buf[static_cast<size_t>(j)].real() * scale;
          if (!irfft) res[at + 1] = buf[static_cast<size_t>(j)].imag() * scale;
        }
      }
    }
    store(res, out);
    return Status::ok();
  }

 private:
  int64_t axis_ = 1;
  bool axis_from_input_ = false;
  bool inverse_ = false;
  bool onesided_ = false;
};

class StftKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    onesided_ = init.attr_int("onesided", 1) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (!dtype_is_float(x.dtype()))
      return invalid_argument("input 0 (signal) must be float, got ", dtype_name(x.dtype()));
    if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2)) {
      return invalid_argument("input 0 (signal) must be [batch, length, 1 or 2], got ",
                              x.shape().to_string());
    }
    const bool complex_in = x.dim(2) == 2;
    if (complex_in && onesided_)
      return invalid_argument("onesided=1 needs a real signal (last dimension 1)");
    if (!ctx.has_input(1)) return invalid_argument("input 1 (frame_step) is required");
    KILN_ASSIGN_OR_RETURN(int64_t step, scalar_int(ctx, 1, "frame_step"));
    if (step <= 0) return invalid_argument("input 1 (frame_step) must be positive, got ", step);
    std::vector<double> window;
    int64_t frame_len = -1;
    if (ctx.has_input(2)) {
      const Tensor& w = ctx.input(2);
      if (w.rank() != 1) {
        return invalid_argument("input 2 (window) must be 1-D, got ", w.shape().to_string());
      }
      KILN_ASSIGN_OR_RETURN(window, to_double_vector(w));
      frame_len = w.dim(0);
    }
    if (ctx.has_input(3)) {
      KILN_ASSIGN_OR_RETURN(int64_t fl, scalar_int(ctx, 3, "frame_length"));
      if (frame_len >= 0 && fl != frame_len) {
        return invalid_argument("input 3 (frame_length) is ", fl, " but input 2 (window) has ",
                                frame_len, " values");
      }
      frame_len = fl;
    }
    if (frame_len <= 0) {
      return invalid_argument("needs input 2 (window) or input 3 (frame_length), with a positive length");
    }
    const int64_t batch = x.dim(0), len = x.dim(1);
    if (frame_len > len) {
      return invalid_argument("frame length ", frame_len, " is longer than the signal (", len, ")");
    }
    const int64_t frames = (len - frame_len) / step + 1;
    const int64_t bins = onesided_ ? frame_len / 2 + 1 : frame_len;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), Shape{batch, frames, bins, 2}));
    KILN_ASSIGN_OR_RETURN(std::vector<double> in, to_double_vector(x));
    const int64_t cin = complex_in ? 2 : 1;
    std::vector<double> res(static_cast<size_t>(out->numel()));
    std::vector<cd> buf(static_cast<size_t>(frame_len));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t j = 0; j < frame_len; ++j) {
          const size_t at = static_cast<size_t>((b * len + f * step + j) * cin);
          const double w = window.empty() ? 1.0 : window[static_cast<size_t>(j)];
          buf[static_cast<size_t>(j)] = cd(in[at] * w, complex_in ? in[at + 1] * w : 0.0);
        }
        dft(buf, -1.0);
        for (int64_t k = 0; k < bins; ++k) {
          const size_t at = static_cast<size_t>(((b * frames + f) * bins + k) * 2);
          res[at] = buf[static_cast<size_t>(k)].real();
          res[at + 1] = buf[static_cast<size_t>(k)].imag();
        }
      }
    }
    store(res, out);
    return Status::ok();
  }

 private:
  bool onesided_ = true;
};

Result<DType> output_datatype(const KernelInit& init) {
  const auto dt = static_cast<DType>(init.attr_int("output_datatype", 1));
  const int64_t v = init.attr_int("output_datatype", 1);
  KILN_RETURN_IF_ERROR(init.attr_status());
  if (v <= 0 || v >= kNumDTypes || dt == DType::kString || dt == DType::kBool || dt == DType::kComplex64 ||
      dt == DType::kComplex128) {
    return invalid_argument("attribute output_datatype ", v, " is not a numeric type");
  }
  return dt;
}

enum class WindowKind { kHann, kHamming, kBlackman };

template <WindowKind K>
class WindowKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(dtype_, output_datatype(init));
    periodic_ = init.attr_int("periodic", 1) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(int64_t size, scalar_int(ctx, 0, "size"));
    if (size < 0) return invalid_argument("input 0 (size) must not be negative, got ", size);
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dtype_, Shape{size}));
    // N = size for a periodic window (one period of a size + 1 symmetric
    // window), size - 1 for a symmetric one.
    const double n = periodic_ ? static_cast<double>(size) : static_cast<double>(size - 1);
    std::vector<double> v(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) {
      const double a = n > 0 ? 2 * std::numbers::pi * static_cast<double>(i) / n : 0.0;
      double w = 0;
      if constexpr (K == WindowKind::kHann) {
        w = 0.5 - 0.5 * std::cos(a);
      } else if constexpr (K == WindowKind::kHamming) {
        w = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a);
      } else {
        w = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
      }
      v[static_cast<size_t>(i)] = w;
    }
    store(v, out);
    return Status::ok();
  }

 private:
  DType dtype_ = DType::kFloat32;
  bool periodic_ = true;
};

class MelWeightMatrixKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(dtype_, output_datatype(init));
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 5; ++i) {
      if (!ctx.has_input(i)) return invalid_argument("all 5 inputs are required, input ", i, " is missing");
    }
    KILN_ASSIGN_OR_RETURN(int64_t mel_bins, scalar_int(ctx, 0, "num_mel_bins"));
    KILN_ASSIGN_OR_RETURN(int64_t dft_length, scalar_int(ctx, 1, "dft_length"));
    KILN_ASSIGN_OR_RETURN(int64_t sample_rate, scalar_int(ctx, 2, "sample_rate"));
    KILN_ASSIGN_OR_RETURN(double lower, scalar_float(ctx, 3, "lower_edge_hertz"));
    KILN_ASSIGN_OR_RETURN(double upper, scalar_float(ctx, 4, "upper_edge_hertz"));
    if (mel_bins <= 0 || dft_length <= 0 || sample_rate <= 0) {
      return invalid_argument("num_mel_bins, dft_length and sample_rate must be positive, got ",
                              mel_bins, ", ", dft_length, ", ", sample_rate);
    }
    if (!(lower >= 0) || !(upper > lower)) {
      return invalid_argument("needs 0 <= lower_edge_hertz < upper_edge_hertz, got ", lower, " and ",
                              upper);
    }
    const int64_t spec_bins = dft_length / 2 + 1;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dtype_, Shape{spec_bins, mel_bins}));
    // The ONNX reference (MelWeightMatrix's function body): mel edges in
    // float32, num_mel_bins + 2 points spaced by (high - low) / (bins + 2),
    // mapped back to hertz and to a DFT bin by floor((dft_length + 1) * hz / rate).
    const float low_mel = 2595.f * std::log10(1.f + static_cast<float>(lower) / 700.f);
    const float high_mel = 2595.f * std::log10(1.f + static_cast<float>(upper) / 700.f);
    const float mel_step = (high_mel - low_mel) / static_cast<float>(mel_bins + 2);
    std::vector<int64_t> edges(static_cast<size_t>(mel_bins + 2));
    for (int64_t i = 0; i < mel_bins + 2; ++i) {
      const double mel = static_cast<double>(i) * static_cast<double>(mel_step) + static_cast<double>(low_mel);
      const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
      edges[static_cast<size_t>(i)] =
          static_cast<int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
    }
    std::vector<double> m(static_cast<size_t>(spec_bins * mel_bins), 0.0);
    auto set = [&](int64_t row, int64_t col, double v) -> Status {
      if (row < 0 || row >= spec_bins) {
        return invalid_argument("upper_edge_hertz ", upper, " maps past the last DFT bin (",
                                spec_bins - 1, ") for sample_rate ", sample_rate);
      }
      m[static_cast<size_t>(row * mel_bins + col)] = v;
      return Status::ok();
    };
    for (int64_t i = 0; i < mel_bins; ++i) {
      const int64_t lo = edges[static_cast<size_t>(i)], center = edges[static_cast<size_t>(i + 1)],
                    hi = edges[static_cast<size_t>(i + 2)];
      if (center == lo) {
        KILN_RETURN_IF_ERROR(set(center, i, 1.0));
      } else {
        for (int64_t j = lo; j <= center; ++j) {
          KILN_RETURN_IF_ERROR(set(j, i, static_cast<double>(j - lo) / static_cast<double>(center - lo)));
        }
      }
      for (int64_t j = center; j < hi; ++j) {
        KILN_RETURN_IF_ERROR(set(j, i, static_cast<double>(hi - j) / static_cast<double>(hi - center)));
      }
    }
    store(m, out);
    return Status::ok();
  }

 private:
  DType dtype_ = DType::kFloat32;
};

}  // namespace

void register_signal_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "DFT", .since_version = 17, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<DftKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "STFT", .since_version = 17, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<StftKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "HannWindow", .since_version = 17, .until_version = 1000, .dtypes = kIntDTypes,
         .type_input = 0, .factory = make_kernel<WindowKernel<WindowKind::kHann>>, .flags = 0});
  r.add({.domain = "", .op_type = "HammingWindow", .since_version = 17, .until_version = 1000, .dtypes = kIntDTypes,
         .type_input = 0, .factory = make_kernel<WindowKernel<WindowKind::kHamming>>, .flags = 0});
  r.add({.domain = "", .op_type = "BlackmanWindow", .since_version = 17, .until_version = 1000, .dtypes = kIntDTypes,
         .type_input = 0, .factory = make_kernel<WindowKernel<WindowKind::kBlackman>>, .flags = 0});
  r.add({.domain = "", .op_type = "MelWeightMatrix", .since_version = 17, .until_version = 1000, .dtypes = kIntDTypes,
         .type_input = 0, .factory = make_kernel<MelWeightMatrixKernel>, .flags = 0});
}

}  // namespace kiln::kernels
