// ai.onnx.ml ops the backend tests cover: Binarizer-1,
// ArrayFeatureExtractor-1, LabelEncoder-2/4 (keys and values as lists or,
// from version 4, tensors) and TreeEnsemble-5.
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

constexpr const char* kMl = "ai.onnx.ml";

class BinarizerKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    threshold_ = init.attr_float("threshold", 0.f);
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    std::vector<float> v = to_float_vector(x);
    for (float& e : v) e = e > threshold_ ? 1.f : 0.f;
    from_float_vector(v.data(), y);
    return Status::ok();
  }

 private:
  float threshold_ = 0.f;
};

// Y[..., j] = X[..., indices[j]] along the last axis.
class ArrayFeatureExtractorKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return invalid_argument("needs X and Y");
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> idx, to_int64_vector(ctx.input(1)));
    if (x.rank() == 0) return invalid_argument("X must have rank 1 or more");
    const int64_t last = x.dim(x.rank() - 1), rows = last ? x.numel() / last : 0;
    for (int64_t i : idx)
      if (i < 0 || i >= last) return invalid_argument("index ", i, " is outside [0, ", last, ")");
    Shape ys = x.shape();
    ys[ys.size() - 1] = static_cast<int64_t>(idx.size());
    if (x.rank() == 1) ys = Shape{1, static_cast<int64_t>(idx.size())};
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), ys));
    if (x.dtype() == DType::kString) {
      for (int64_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < idx.size(); ++j)
          y->data<std::string>()[r * static_cast<int64_t>(idx.size()) + static_cast<int64_t>(j)] =
              x.data<std::string>()[r * last + idx[j]];
      return Status::ok();
    }
    const size_t e = dtype_size(x.dtype());
    const auto* src = static_cast<const uint8_t*>(x.raw_data());
    auto* dst = static_cast<uint8_t*>(y->raw_data());
    for (int64_t r = 0; r < rows; ++r)
      for (size_t j = 0; j < idx.size(); ++j)
        std::memcpy(dst + (static_cast<size_t>(r) * idx.size() + j) * e,
                    src + static_cast<size_t>(r * last + idx[j]) * e, e);
    return Status::ok();
  }
};

// ------------------------------------------------------------ LabelEncoder

// A key or value: strings, integers and floats (floats compare by value;
// NaN keys match NaN).
using Label = std::variant<std::string, int64_t, double>;

struct LabelLess {
  bool operator()(const Label& a, const Label& b) const {
    if (a.index() != b.index()) return a.index() < b.index();
    if (const auto* x = std::get_if<double>(&a)) {
      const double y = std::get<double>(b);
      if (std::isnan(*x) || std::isnan(y)) return !std::isnan(*x) && std::isnan(y);
      return *x < y;
    }
    return a < b;
  }
};

// Elements of a tensor as labels, with the dtype they came from.
std::vector<Label> tensor_labels(const Tensor& t) {
  std::vector<Label> out;
  if (t.dtype() == DType::kString) {
    for (int64_t i = 0; i < t.numel(); ++i) out.emplace_back(t.data<std::string>()[i]);
  } else if (dtype_is_float(t.dtype())) {
    for (float f : to_float_vector(t)) out.emplace_back(static_cast<double>(f));
  } else {
    auto v = to_int64_vector(t);
    if (v.ok())
      for (int64_t i : *v) out.emplace_back(i);
  }
  return out;
}

class LabelEncoderKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const ir::Node& n = init.node;
    std::vector<Label> keys, values;
    if (const ir::Attribute* a = n.find_attr("keys_tensor")) keys = tensor_labels(a->t);
    for (const std::string& s : init.attr_strings("keys_strings")) keys.emplace_back(s);
    for (int64_t i : init.attr_ints("keys_int64s")) keys.emplace_back(i);
    for (float f : init.attr_floats("keys_floats")) keys.emplace_back(static_cast<double>(f));
    if (const ir::Attribute* a = n.find_attr("values_tensor")) {
      values = tensor_labels(a->t);
      out_dtype_ = a->t.dtype();
    } else if (n.has_attr("values_strings")) {
      for (const std::string& s : init.attr_strings("values_strings")) values.emplace_back(s);
      out_dtype_ = DType::kString;
    } else if (n.has_attr("values_int64s")) {
      for (int64_t i : init.attr_ints("values_int64s")) values.emplace_back(i);
      out_dtype_ = DType::kInt64;
    } else {
      for (float f : init.attr_floats("values_floats")) values.emplace_back(static_cast<double>(f));
      out_dtype_ = DType::kFloat32;
    }
    if (keys.size() != values.size())
      return invalid_argument(keys.size(), " keys but ", values.size(), " values");
    for (size_t i = 0; i < keys.size(); ++i) map_.emplace(keys[i], values[i]);
    if (const ir::Attribute* a = n.find_attr("default_tensor"); a && a->t.numel() > 0) {
      default_ = tensor_labels(a->t).front();
    } else if (out_dtype_ == DType::kString) {
      default_ = init.attr_string("default_string", "_Unused");
    } else if (out_dtype_ == DType::kInt64 || !dtype_is_float(out_dtype_)) {
      default_ = init.attr_int("default_int64", -1);
    } else {
      default_ = static_cast<double>(init.attr_float("default_float", -0.f));
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    const std::vector<Label> in = tensor_labels(x);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_dtype_, x.shape()));
    std::vector<float> floats;
    for (size_t i = 0; i < in.size(); ++i) {
      auto it = map_.find(in[i]);
      const Label& v = it == map_.end() ? default_ : it->second;
      if (out_dtype_ == DType::kString) {
        y->data<std::string>()[i] = std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : "";
      } else if (dtype_is_float(out_dtype_)) {
        floats.push_back(std::holds_alternative<double>(v) ? static_cast<float>(std::get<double>(v))
                         : std::holds_alternative<int64_t>(v) ? static_cast<float>(std::get<int64_t>(v)) : 0.f);
      } else {
        const int64_t iv = std::holds_alternative<int64_t>(v) ? std::get<int64_t>(v) : 0;
        visit_dtype(out_dtype_, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (std::is_integral_v<T>) y->data<T>()[i] = static_cast<T>(iv);
        });
      }
    }
    if (dtype_is_float(out_dtype_)) from_float_vector(floats.data(), y);
    return Status::ok();
  }

 private:
  std::map<Label, Label, LabelLess> map_;
  Label default_;
  DType out_dtype_ = DType::kInt64;
};

}  // namespace

void register_tree_ensemble_ops(KernelRegistry& r);

void register_ml_ops(KernelRegistry& r) {
  r.add({.domain = kMl, .op_type = "Binarizer", .since_version = 1, .until_version = 1000,
         .dtypes = kNumericDTypes, .type_input = 0, .factory = make_kernel<BinarizerKernel>, .flags = 0});
  r.add({.domain = kMl, .op_type = "ArrayFeatureExtractor", .since_version = 1, .until_version = 1000,
         .dtypes = kAllDTypes, .type_input = 0, .factory = make_kernel<ArrayFeatureExtractorKernel>, .flags = 0});
  r.add({.domain = kMl, .op_type = "LabelEncoder", .since_version = 2, .until_version = 1000,
         .dtypes = kAllDTypes, .type_input = 0, .factory = make_kernel<LabelEncoderKernel>, .flags = 0});
  register_tree_ensemble_ops(r);
}

}  // namespace kiln::kernels
