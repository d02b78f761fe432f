#include "kernels/portable/util/low_precision.h"

#include <array>
#include <cmath>
#include <limits>

#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct FloatFormat {
  int mbits;         // mantissa bits
  int bias;
  uint8_t sign;      // sign bit
  uint8_t max_code;  // largest finite positive code
  bool uz;           // FNUZ: no -0, NaN is the sign bit alone
  bool has_inf;      // E5M2: IEEE-style inf and NaN
  uint8_t nan_code;  // positive NaN (0 where there is none)
};

bool float_format(DType t, FloatFormat* f) {
  switch (t) {
    case DType::kFloat8E4M3FN: *f = {3, 7, 0x80, 0x7e, false, false, 0x7f}; return true;
    case DType::kFloat8E4M3FNUZ: *f = {3, 8, 0x80, 0x7f, true, false, 0x80}; return true;
    case DType::kFloat8E5M2: *f = {2, 15, 0x80, 0x7b, false, true, 0x7e}; return true;
    case DType::kFloat8E5M2FNUZ: *f = {2, 16, 0x80, 0x7f, true, false, 0x80}; return true;
    case DType::kFloat4E2M1: *f = {1, 1, 0x08, 0x07, false, false, 0x08}; return true;
    default: return false;
  }
}

// Magnitude of a positive code (no NaN/inf handling).
double magnitude(const FloatFormat& f, uint8_t m) {
  const int e = m >> f.mbits;
  const int mant = m & ((1 << f.mbits) - 1);
  if (e == 0) return std::ldexp(mant, 1 - f.bias - f.mbits);
  return std::ldexp((1 << f.mbits) + mant, e - f.bias - f.mbits);
}

double decode_float(const FloatFormat& f, uint8_t c) {
  if (f.uz && c == 0x80) return kNaN;
  const bool neg = (c & f.sign) != 0;
  const auto m = static_cast<uint8_t>(c & (f.sign - 1));
  if (!f.uz && !f.has_inf && f.nan_code != f.sign && m == f.nan_code) return kNaN;  // E4M3FN 0x7f
  if (f.has_inf && m > f.max_code) return m == 0x7c ? (neg ? -INFINITY : INFINITY) : kNaN;
  const double v = magnitude(f, m);
  return neg ? -v : v;
}

uint8_t encode_float(const FloatFormat& f, double x, bool saturate) {
  if (std::isnan(x)) return f.nan_code;
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  auto overflow = [&]() -> uint8_t {
    if (saturate || f.sign == 0x08) return static_cast<uint8_t>(f.max_code | (neg ? f.sign : 0));
    if (f.has_inf) return static_cast<uint8_t>(0x7c | (neg ? f.sign : 0));
    return f.uz ? uint8_t{0x80} : static_cast<uint8_t>(f.nan_code | (neg ? f.sign : 0));
  };
  if (std::isinf(a)) return overflow();
  // Nearest code by bisection over the (monotonic) positive codes; the
  // value one ulp above the largest stands for overflow.
  int lo = 0, hi = f.max_code;
  if (a >= magnitude(f, f.max_code)) {
    const double top = magnitude(f, f.max_code);
    const double ulp = top - magnitude(f, static_cast<uint8_t>(f.max_code - 1));
    const double half = top + ulp / 2;
    // Ties go to the even code: max_code+1 is even exactly when max_code is odd.
    if (a > half || (a == half && (f.max_code & 1))) return overflow();
    lo = hi = f.max_code;
  }
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (magnitude(f, static_cast<uint8_t>(mid)) <= a) lo = mid;
    else hi = mid;
  }
  int code = lo;
  if (hi != lo) {
    const double dl = a - magnitude(f, static_cast<uint8_t>(lo));
    const double dh = magnitude(f, static_cast<uint8_t>(hi)) - a;
    code = dh < dl || (dh == dl && (hi & 1) == 0) ? hi : lo;
  }
  if (code == 0 && f.uz) return 0;  // no negative zero
  return static_cast<uint8_t>(code | (neg ? f.sign : 0));
}

// E8M0: 2^(code - 127), 0xff NaN; encoding rounds the exponent up.
double decode_e8m0(uint8_t c) { return c == 0xff ? kNaN : std::ldexp(1.0, c - 127); }

uint8_t encode_e8m0(double x, bool saturate) {
  if (std::isnan(x) || x < 0) return 0xff;
  if (std::isinf(x)) return saturate ? 0xfe : 0xff;
  if (x == 0) return 0;
  int e = 0;
  const double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  int exp = m == 0.5 ? e - 1 : e;      // round up to the next power of two
  if (exp < -127) exp = -127;
  if (exp > 127) return saturate ? 0xfe : 0xff;
  return static_cast<uint8_t>(exp + 127);
}

int int_bits(DType t) {
  switch (t) {
    case DType::kInt4:
    case DType::kUInt4: return 4;
    case DType::kInt2:
    case DType::kUInt2: return 2;
    default: return 0;
  }
}

bool int_signed(DType t) { return t == DType::kInt4 || t == DType::kInt2; }

uint8_t from_int(DType t, int64_t v) {
  const int bits = int_bits(t);
  int64_t low = v & ((int64_t{1} << bits) - 1);
  if (int_signed(t) && low >= (int64_t{1} << (bits - 1))) low -= int64_t{1} << bits;
  return static_cast<uint8_t>(static_cast<int8_t>(low));
}

}  // namespace

double lp_decode(DType t, uint8_t code) {
  FloatFormat f;
  if (float_format(t, &f)) return decode_float(f, code);
  if (t == DType::kFloat8E8M0) return decode_e8m0(code);
  if (int_signed(t)) return static_cast<int8_t>(code);
  return code;
}

uint8_t lp_encode(DType t, double x, bool saturate) {
  FloatFormat f;
  if (float_format(t, &f)) return encode_float(f, x, saturate);
  if (t == DType::kFloat8E8M0) return encode_e8m0(x, saturate);
  if (std::isnan(x) || std::isinf(x)) return 0;
  return from_int(t, static_cast<int64_t>(std::trunc(std::fmax(std::fmin(x, 9.2e18), -9.2e18))));
}

uint8_t lp_quantize(DType t, double x) {
  FloatFormat f;
  if (float_format(t, &f) || t == DType::kFloat8E8M0) return lp_encode(t, x, true);
  const int bits = int_bits(t);
  const double lo = int_signed(t) ? -std::ldexp(1, bits - 1) : 0;
  const double hi = int_signed(t) ? std::ldexp(1, bits - 1) - 1 : std::ldexp(1, bits) - 1;
  const double r = std::nearbyint(x);  // half to even in the default rounding mode
  return from_int(t, static_cast<int64_t>(std::fmin(std::fmax(r, lo), hi)));
}

Status cast_low_precision(KernelContext& ctx, const Tensor& x, DType to, bool saturate) {
  KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, to, x.shape()));
  const int64_t n = x.numel();
  const bool from_lp = dtype_is_low_precision(x.dtype());
  const bool to_lp = dtype_is_low_precision(to);
  std::vector<double> v(static_cast<size_t>(n));
  if (from_lp) {
    const auto* c = static_cast<const uint8_t*>(x.raw_data());
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = lp_decode(x.dtype(), c[i]);
  } else {
    Status st;
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        const T* p = x.data<T>();
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_arithmetic_v<T>) {
            v[static_cast<size_t>(i)] = static_cast<double>(p[i]);
          } else {
            v[static_cast<size_t>(i)] = static_cast<double>(static_cast<float>(p[i]));
          }
        }
      } else {
        st = unimplemented("cannot cast ", dtype_name(x.dtype()), " to ", dtype_name(to));
      }
    });
    if (!st.is_ok()) return st;
  }
  if (to_lp) {
    auto* c = static_cast<uint8_t*>(y->raw_data());
    for (int64_t i = 0; i < n; ++i) c[i] = lp_encode(to, v[static_cast<size_t>(i)], saturate);
    return Status::ok();
  }
  Status st;
  visit_dtype(to, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      bool* p = y->data<bool>();
      for (int64_t i = 0; i < n; ++i) p[i] = v[static_cast<size_t>(i)] != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      T* p = y->data<T>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(v[static_cast<size_t>(i)]);
    } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      T* p = y->data<T>();
      for (int64_t i = 0; i < n; ++i) p[i] = T(static_cast<float>(v[static_cast<size_t>(i)]));
    } else if constexpr (std::is_integral_v<T>) {
      // Low-precision values are small: every finite one fits; NaN gives 0.
      T* p = y->data<T>();
      for (int64_t i = 0; i < n; ++i) {
        const double d = v[static_cast<size_t>(i)];
        p[i] = std::isfinite(d) ? static_cast<T>(static_cast<int64_t>(d)) : T(0);
      }
    } else {
      st = unimplemented("cannot cast ", dtype_name(x.dtype()), " to ", dtype_name(to));
    }
  });
  return st;
}

}  // namespace kiln::kernels
