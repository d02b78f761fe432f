// Random ops: RandomNormal, RandomUniform, RandomNormalLike,
// RandomUniformLike, Bernoulli and Multinomial. Registered
// kNondeterministic: never constant-folded.
//
// Numbers come from a 64-bit Mersenne Twister (std::mt19937_64, whose output
// sequence the C++ standard fixes) turned into doubles by hand (53 random
// bits; Box-Muller for normals), so a seeded model gives the same values on
// every platform and compiler. With the `seed` attribute every run starts
// from that seed (runs repeat, and concurrent runs share no state); without
// it every run draws a fresh seed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <type_traits>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/dtype_attr.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /// Standard normal (Box-Muller; the second value of each pair is kept).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform();
    while (u1 <= 0) u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2 * std::log(u1));
    spare_ = r * std::sin(2 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// The seed attribute (a float) as engine seed, or a fresh seed per call.
struct SeedAttr {
  bool given = false;
  uint64_t value = 0;

  void read(const KernelInit& init) {
    given = init.node.has_attr("seed");
    if (given) {
      const float f = init.attr_float("seed", 0.f);
      uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof bits);  // every float, NaN included, is a distinct seed
      value = bits;
    }
  }
  Rng make() const {
    if (given) return Rng(value);
    static std::atomic<uint64_t> counter{0};
    std::random_device rd;
    const uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                       static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                       (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
    return Rng(s);
  }
};

bool is_real_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Fills `out` (a float dtype) with gen() values.
template <class Gen>
void fill_float(Tensor* out, Gen&& gen) {
  const int64_t n = out->numel();
  visit_dtype(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      for (int64_t i = 0; i < n; ++i) out->data<double>()[i] = gen();
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      for (int64_t i = 0; i < n; ++i) out->data<T>()[i] = static_cast<T>(static_cast<float>(gen()));
    }
  });
}

enum class Dist { kNormal, kUniform };

// RandomNormal/RandomUniform (shape attribute) and their *Like forms
// (shape, and by default dtype, of input 0).
template <Dist D, bool Like>
class RandomFill final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    seed_.read(init);
    if (D == Dist::kNormal) {
      a_ = init.attr_float("mean", 0.f);
      b_ = init.attr_float("scale", 1.f);
    } else {
      a_ = init.attr_float("low", 0.f);
      b_ = init.attr_float("high", 1.f);
      if (!(b_ >= a_)) return invalid_argument("attribute high (", b_, ") must not be below low (", a_, ")");
    }
    if (init.node.has_attr("dtype")) {
      KILN_ASSIGN_OR_RETURN(dtype_, dtype_attr(init, "dtype", DType::kFloat32));
      if (!is_real_float(dtype_)) {
        return invalid_argument("attribute dtype ", init.attr_int("dtype", 1),
                                " is not a float type (float16, float, double, bfloat16)");
      }
    } else if (!Like) {
      dtype_ = DType::kFloat32;
    }
    if constexpr (!Like) {
      if (!init.node.has_attr("shape")) return invalid_argument("needs attribute shape");
      for (int64_t d : init.attr_ints("shape")) {
        if (d < 0) return invalid_argument("attribute shape has negative dimension ", d);
        shape_.push_back(d);
      }
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    Shape shape = shape_;
    DType dt = dtype_;
    if constexpr (Like) {
      if (!ctx.has_input(0)) return invalid_argument("input 0 (input) is required");
      shape = ctx.input(0).shape();
      if (dt == DType::kUndefined) dt = ctx.input(0).dtype();
      if (!is_real_float(dt)) {
        return invalid_argument("output dtype ", dtype_name(dt),
                                " is not a float type; set attribute dtype");
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, shape));
    Rng rng = seed_.make();
    if constexpr (D == Dist::kNormal) {
      fill_float(out, [&] { return a_ + b_ * rng.normal(); });
    } else {
      fill_float(out, [&] { return a_ + (b_ - a_) * rng.uniform(); });
    }
    return Status::ok();
  }

 private:
  SeedAttr seed_;
  double a_ = 0, b_ = 1;
  DType dtype_ = DType::kUndefined;
  Shape shape_;
};

// Writes 0/1 (or false/true) into any numeric or bool tensor.
void store_binary(Tensor* out, int64_t i, bool v) {
  visit_dtype(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      out->data<bool>()[i] = v;
    } else if constexpr (std::is_arithmetic_v<T>) {
      out->data<T>()[i] = static_cast<T>(v ? 1 : 0);
    } else if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
      out->data<T>()[i] = static_cast<T>(v ? 1.f : 0.f);
    }
  });
}

class Bernoulli final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    seed_.read(init);
    if (init.node.has_attr("dtype")) {
      KILN_ASSIGN_OR_RETURN(dtype_, dtype_attr(init, "dtype", DType::kFloat32));
      if (!(dtype_is_float(dtype_) || dtype_is_integer(dtype_) || dtype_ == DType::kBool)) {
        return invalid_argument("attribute dtype ", init.attr_int("dtype", 1),
                                " is not a numeric or bool type");
      }
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const Tensor& p = ctx.input(0);
    if (!dtype_is_float(p.dtype()))
      return invalid_argument("input 0 (input) must be float, got ", dtype_name(p.dtype()));
    KILN_ASSIGN_OR_RETURN(std::vector<double> probs, to_double_vector(p));
    for (double v : probs) {
      if (!(v >= 0 && v <= 1))
        return invalid_argument("input 0 (input) has probability ", v, ", outside [0, 1]");
    }
    const DType dt = dtype_ == DType::kUndefined ? p.dtype() : dtype_;
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dt, p.shape()));
    Rng rng = seed_.make();
    for (size_t i = 0; i < probs.size(); ++i) store_binary(out, static_cast<int64_t>(i), rng.uniform() < probs[i]);
    return Status::ok();
  }

 private:
  SeedAttr seed_;
  DType dtype_ = DType::kUndefined;
};

class Multinomial final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    seed_.read(init);
    KILN_ASSIGN_OR_RETURN(dtype_, dtype_attr(init, "dtype", DType::kInt32));
    if (dtype_ != DType::kInt32 && dtype_ != DType::kInt64)
      return invalid_argument("attribute dtype must be int32 (6) or int64 (7)");
    samples_ = init.attr_int("sample_size", 1);
    if (samples_ < 0) return invalid_argument("attribute sample_size must not be negative");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (!dtype_is_float(x.dtype()) || x.rank() != 2) {
      return invalid_argument("input 0 (input) must be float [batch_size, class_size], got ",
                              dtype_name(x.dtype()), x.shape().to_string());
    }
    const int64_t batch = x.dim(0), classes = x.dim(1);
    if (classes == 0 && samples_ > 0)
      return invalid_argument("input 0 (input) has no classes to sample from");
    KILN_ASSIGN_OR_RETURN(std::vector<double> logits, to_double_vector(x));
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, dtype_, Shape{batch, samples_}));
    Rng rng = seed_.make();
    std::vector<double> cdf(static_cast<size_t>(classes));
    for (int64_t b = 0; b < batch; ++b) {
      // The input holds unnormalized log-probabilities: softmax, then the CDF.
      const double* row = logits.data() + b * classes;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, row[c]);
      if (!std::isfinite(mx)) {
        return invalid_argument("input 0 (input) row ", b, " has no finite log-probability");
      }
      double total = 0;
      for (int64_t c = 0; c < classes; ++c) {
        total += std::exp(row[c] - mx);  // NaN logits make total NaN: rejected below
        cdf[static_cast<size_t>(c)] = total;
      }
      if (!(total > 0) || !std::isfinite(total)) {
        return invalid_argument("input 0 (input) row ", b, " has no finite probability mass");
      }
      for (int64_t s = 0; s < samples_; ++s) {
        const double u = rng.uniform() * total;
        const int64_t c = std::min<int64_t>(
            classes - 1, std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        if (dtype_ == DType::kInt32) {
          out->data<int32_t>()[b * samples_ + s] = static_cast<int32_t>(c);
        } else {
          out->data<int64_t>()[b * samples_ + s] = c;
        }
      }
    }
    return Status::ok();
  }

 private:
  SeedAttr seed_;
  DType dtype_ = DType::kInt32;
  int64_t samples_ = 1;
};

}  // namespace

void register_random_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "RandomNormal", .since_version = 1, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<RandomFill<Dist::kNormal, false>>, .flags = kNondeterministic});
  r.add({.domain = "", .op_type = "RandomUniform", .since_version = 1, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<RandomFill<Dist::kUniform, false>>, .flags = kNondeterministic});
  r.add({.domain = "", .op_type = "RandomNormalLike", .since_version = 1, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<RandomFill<Dist::kNormal, true>>, .flags = kNondeterministic});
  r.add({.domain = "", .op_type = "RandomUniformLike", .since_version = 1, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<RandomFill<Dist::kUniform, true>>, .flags = kNondeterministic});
  r.add({.domain = "", .op_type = "Bernoulli", .since_version = 15, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<Bernoulli>, .flags = kNondeterministic});
  r.add({.domain = "", .op_type = "Multinomial", .since_version = 7, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<Multinomial>, .flags = kNondeterministic});
}

}  // namespace kiln::kernels
