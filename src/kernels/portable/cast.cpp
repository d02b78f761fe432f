// Cast and CastLike between every pair of ONNX dtypes (except complex).
//
// Numeric conversions round to nearest even; double (and wide integers) to
// float16/bfloat16 round once, through a round-to-odd float. Float to integer
// truncates toward zero (NaN -> 0, see ew::float_to_int).
//
// Exception: float32 -> bfloat16 before opset 19 truncates (drops the low 16
// bits), which is what the ONNX reference and backend test data of those
// opsets do (onnx/backend/test/case/node/cast.py views the float32 bits as
// uint16 pairs); from opset 19 on it rounds to nearest even, as the newer
// reference implementation does.
//
// Strings, per the Cast spec: numbers are written in the shortest form that
// reads back to the same value, positional for 1e-4 <= |x| < 1e16 and
// scientific otherwise (as numpy's str() does: "0.039187793", "1e-05",
// "3.0"); NaN and infinities are written "NaN", "INF", "-INF". Parsing
// accepts plain and scientific numbers and, case-insensitively, "NaN",
// "INF", "+INF", "-INF" and "infinity"; independent of the C locale.
#include <charconv>
#include <cmath>
#include <cstring>
#include <string_view>

#include "kernels/portable/util/elementwise.h"
#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/util/low_precision.h"
#include "kernels/registry.h"

namespace kiln::kernels {
namespace {

using namespace ew;

// ---- numeric conversions ---------------------------------------------------

/// d rounded to float toward zero with the inexact bit ORed into the last
/// place ("round to odd"): a later rounding to fewer bits is then correct.
float round_to_odd_float(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <class To, class From>
To convert_numeric(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (kIsHalf<From>) {
      return static_cast<float>(v) != 0.0f;
    } else {
      return v != From{0};
    }
  } else if constexpr (std::is_same_v<From, bool>) {
    return static_cast<To>(v ? 1.0f : 0.0f);
  } else if constexpr (kIsHalf<To>) {
    if constexpr (std::is_same_v<From, float> || kIsHalf<From>) {
      return To(static_cast<float>(v));
    } else {
      return To(round_to_odd_float(static_cast<double>(v)));
    }
  } else if constexpr (kIsInt<To>) {
    if constexpr (kIsInt<From>) {
      return static_cast<To>(v);  // modular, as numpy and C++20 define it
    } else {
      return float_to_int<To>(static_cast<double>(static_cast<Compute<From>>(v)));
    }
  } else {  // float or double from an integer or a float
    return static_cast<To>(static_cast<Compute<From>>(v));
  }
}

// ---- to string -------------------------------------------------------------

/// Writes a finite value given as shortest scientific text ("d.ddde+XX")
/// in numpy's str() style.
std::string numpy_style(std::string_view sci) {
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out += '-';
    i = 1;
  }
  const size_t epos = sci.find('e');
  std::string digits;
  for (size_t k = i; k < epos; ++k)
    if (sci[k] != '.') digits += sci[k];
  int exp10 = 0;
  std::from_chars(sci.data() + epos + 1 + (sci[epos + 1] == '+'), sci.data() + sci.size(), exp10);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (digits == "0") return out + "0.0";
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp10 - 1), '0');
      out += digits;
    } else {
      const size_t int_len = static_cast<size_t>(exp10) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_len);
        out += '.';
        out += digits.substr(int_len);
      }
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  return out + buf;
}

template <class T>
std::string float_to_string(T v) {
  const double d = static_cast<double>(static_cast<Compute<T>>(v));
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-INF" : "INF";
  char buf[64];
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    return numpy_style(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
  } else {
    // 16-bit floats: the fewest digits that read back to the same bits.
    const float f = static_cast<float>(v);
    for (int precision = 0; precision < 9; ++precision) {
      auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific, precision);
      float back = 0;
      std::from_chars(buf, r.ptr, back, std::chars_format::scientific);
      if (T(back).bits == v.bits) return numpy_style(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
    }
    auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
    return numpy_style(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
  }
}

template <class T>
std::string to_string_value(const T& v) {
  if constexpr (kIsFloat<T>) {
    return float_to_string(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else {
    return std::to_string(v);
  }
}

// ---- from string -----------------------------------------------------------

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// Parses a float literal into F (float or double); false if malformed.
template <class F>
bool parse_float(std::string_view s, F* out) {
  s = trim(s);
  bool neg = false;
  std::string_view body = s;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (iequals(body, "nan")) {
    *out = std::numeric_limits<F>::quiet_NaN();
    return true;
  }
  if (iequals(body, "inf") || iequals(body, "infinity")) {
    *out = neg ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    return true;
  }
  if (body.empty() || body[0] == '+' || body[0] == '-') return false;
  F v = 0;
  auto r = std::from_chars(body.data(), body.data() + body.size(), v);
  if (r.ptr != body.data() + body.size()) return false;
  if (r.ec == std::errc::result_out_of_range) {
    // Too large or too small for F: inf or zero by the exponent's sign.
    const size_t e = body.find_first_of("eE");
    const bool tiny = e != std::string_view::npos && e + 1 < body.size() && body[e + 1] == '-';
    v = tiny ? F{0} : std::numeric_limits<F>::infinity();
  } else if (r.ec != std::errc()) {
    return false;
  }
  *out = neg ? -v : v;
  return true;
}

template <class To>
bool from_string_value(const std::string& s, To* out) {
  if constexpr (std::is_same_v<To, float> || std::is_same_v<To, double>) {
    return parse_float(s, out);
  } else if constexpr (kIsHalf<To>) {
    double d;
    if (!parse_float(s, &d)) return false;
    *out = To(round_to_odd_float(d));
    return true;
  } else if constexpr (std::is_same_v<To, bool>) {
    const std::string_view t = trim(s);
    if (iequals(t, "true")) {
      *out = true;
      return true;
    }
    if (iequals(t, "false")) {
      *out = false;
      return true;
    }
    double d;
    if (!parse_float(t, &d)) return false;
    *out = d != 0.0;
    return true;
  } else {
    static_assert(kIsInt<To>);
    std::string_view t = trim(s);
    if (!t.empty() && t[0] == '+') t.remove_prefix(1);
    To v{};
    auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (!t.empty() && r.ec == std::errc() && r.ptr == t.data() + t.size()) {
      *out = v;
      return true;
    }
    double d;  // "100.5", "1e3", or out of To's range
    if (!parse_float(s, &d)) return false;
    *out = float_to_int<To>(d);
    return true;
  }
}

// ---- the kernel ------------------------------------------------------------

template <class T>
constexpr bool kCastable = kIsNumeric<T> || std::is_same_v<T, bool> || std::is_same_v<T, std::string>;

/// Parses the `to` attribute: a dtype number, or (opset 1-5) a name such
/// as "FLOAT".
Result<DType> parse_to(const ir::Node& node) {
  const ir::Attribute* a = node.find_attr("to");
  if (a == nullptr) return invalid_argument("attribute 'to' is required");
  DType t = DType::kUndefined;
  if (a->type == ir::AttrType::kString) {
    static const char* const kNames[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16",
                                         "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
                                         "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
                                         "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                                         "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
    static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumDTypes);
    for (int i = 1; i < kNumDTypes; ++i)
      if (iequals(a->s, kNames[i])) t = static_cast<DType>(i);
    if (t == DType::kUndefined) t = dtype_from_name(a->s);
  } else if (a->i > 0 && a->i < kNumDTypes) {
    t = static_cast<DType>(a->i);
  }
  const bool ok = dtype_is_low_precision(t) || visit_dtype(t, [](auto tag) { return kCastable<decltype(tag)>; });
  if (!ok) {
    return invalid_argument("attribute 'to' (",
                            a->type == ir::AttrType::kString ? a->s : std::to_string(a->i),
                            ") is not a dtype Cast supports");
  }
  return t;
}

/// float32 -> bfloat16 by dropping the low 16 bits (NaN stays NaN).
BFloat16 truncate_to_bfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return BFloat16::from_bits(static_cast<uint16_t>((bits >> 16) | 0x40u));
  return BFloat16::from_bits(static_cast<uint16_t>(bits >> 16));
}

template <class From, class To>
Status cast_loop(KernelContext& ctx, const Tensor& x, Tensor* y, bool truncate_bf16) {
  const From* px = x.data<From>();
  To* py = y->data<To>();
  const int64_t n = x.numel();
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, BFloat16>) {
    if (truncate_bf16) {
      parallel_for(ctx.pool(), n, kGrainCheap, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) py[i] = truncate_to_bfloat16(px[i]);
      });
      return Status::ok();
    }
  }
  if constexpr ((std::is_same_v<From, float> && kIsHalf<To>) || (kIsHalf<From> && std::is_same_v<To, float>)) {
    parallel_for(ctx.pool(), n, kGrainCheap, [&](int64_t i0, int64_t i1) {
      if constexpr (std::is_same_v<To, float>) {
        to_f32(px + i0, py + i0, i1 - i0);
      } else {
        from_f32(px + i0, py + i0, i1 - i0);
      }
    });
  } else if constexpr (std::is_same_v<From, std::string> && !std::is_same_v<To, std::string>) {
    for (int64_t i = 0; i < n; ++i) {
      if (!from_string_value(px[i], &py[i])) {
        return invalid_argument("input 0 element ", i, " ('", px[i], "') is not a ",
                                dtype_name(dtype_of<To>), " literal");
      }
    }
  } else if constexpr (std::is_same_v<To, std::string>) {
    parallel_for(ctx.pool(), n, kGrainHeavy, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        if constexpr (std::is_same_v<From, std::string>) {
          py[i] = px[i];
        } else {
          py[i] = to_string_value(px[i]);
        }
      }
    });
  } else {
    parallel_for(ctx.pool(), n, kGrainMedium, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) py[i] = convert_numeric<To>(px[i]);
    });
  }
  return Status::ok();
}

Status cast(KernelContext& ctx, const Tensor& x, DType to, bool truncate_bf16, bool saturate) {
  if (dtype_is_low_precision(x.dtype()) || dtype_is_low_precision(to))
    return cast_low_precision(ctx, x, to, saturate);
  return visit_dtype(x.dtype(), [&](auto from_tag) -> Status {
    using From = decltype(from_tag);
    if constexpr (kCastable<From>) {
      return visit_dtype(to, [&](auto to_tag) -> Status {
        using To = decltype(to_tag);
        if constexpr (kCastable<To>) {
          KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, to, x.shape()));
          return cast_loop<From, To>(ctx, x, y, truncate_bf16);
        } else {
          return unimplemented("cannot cast to ", dtype_name(to));
        }
      });
    } else {
      return unsupported_dtype(0, x.dtype());
    }
  });
}

class CastKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(to_, parse_to(init.node));
    truncate_bf16_ = init.opset < 19;
    saturate_ = init.attr_int("saturate", 1) != 0;
    const std::string round_mode = init.attr_string("round_mode", "up");
    if (round_mode != "up")  // (float8e8m0 targets only)
      return unimplemented("round_mode '", round_mode, "' is not implemented (only 'up')");
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    return cast(ctx, *x, to_, truncate_bf16_, saturate_);
  }

 private:
  DType to_ = DType::kUndefined;
  bool truncate_bf16_ = false;
  bool saturate_ = true;
};

// CastLike: the target dtype is input 1's.
class CastLikeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    truncate_bf16_ = init.opset < 19;
    saturate_ = init.attr_int("saturate", 1) != 0;
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(const Tensor* like, tensor_input(ctx, 1));
    return cast(ctx, *x, like->dtype(), truncate_bf16_, saturate_);
  }

 private:
  bool truncate_bf16_ = false;
  bool saturate_ = true;
};

constexpr DTypeSet kCastTypes = kNumericDTypes | kBoolDType | kStringDType | kLowPrecisionDTypes;

}  // namespace

void register_cast_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Cast", .since_version = 1, .until_version = 1000, .dtypes = kCastTypes,
         .type_input = 0, .factory = make_kernel<CastKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "CastLike", .since_version = 15, .until_version = 1000, .dtypes = kCastTypes,
         .type_input = 0, .factory = make_kernel<CastLikeKernel>, .flags = 0});
}

}  // namespace kiln::kernels
