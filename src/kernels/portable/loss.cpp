// Loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12
// and 13), with reduction none/sum/mean, optional class weights,
// ignore_index, inputs [N, C] or [N, C, d1, ..., dk], and SCE's optional
// log_prob output.
//
// Semantics of the ONNX reference implementation: with weights or an
// ignore_index, "mean" divides the weighted sum by the sum of the weights
// that were gathered (ignored entries weigh 0); otherwise by the number of
// entries. Arithmetic is in double; outputs take the input's dtype.
#include <cmath>
#include <limits>
#include <string>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

enum class Reduction { kNone, kSum, kMean };

class LossKernel final : public Kernel {
 public:
  explicit LossKernel(bool softmax) : softmax_(softmax) {}

  Status init(const KernelInit& init) {
    const std::string r = init.attr_string("reduction", "mean");
    if (r == "none") reduction_ = Reduction::kNone;
    else if (r == "sum") reduction_ = Reduction::kSum;
    else if (r == "mean") reduction_ = Reduction::kMean;
    else return invalid_argument("attribute reduction '", r, "' is not none, sum or mean");
    has_ignore_ = init.node.has_attr("ignore_index");
    ignore_index_ = init.attr_int("ignore_index", 0);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const char* scores_name = softmax_ ? "scores" : "input";
    if (!ctx.has_input(0) || !ctx.has_input(1))
      return invalid_argument("inputs 0 (", scores_name, ") and 1 (labels/target) are required");
    const Tensor& x = ctx.input(0);
    const Tensor& target = ctx.input(1);
    if (!dtype_is_float(x.dtype()))
      return invalid_argument(input_label(0, scores_name), " must be float, got ", dtype_name(x.dtype()));
    if (x.rank() < 2) {
      return invalid_argument(input_label(0, scores_name), " must have shape [N, C, ...], got ",
                              x.shape().to_string());
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    const int64_t d = n * c > 0 ? x.numel() / (n * c) : 0;
    Shape want_target;
    want_target.push_back(n);
    for (size_t i = 2; i < x.rank(); ++i) want_target.push_back(x.dim(i));
    if (target.shape() != want_target || !dtype_is_integer(target.dtype())) {
      return invalid_argument("input 1 (target) must be an int32/int64 tensor of shape ",
                              want_target.to_string(), ", got ", dtype_name(target.dtype()), target.shape().to_string());
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> labels, to_int64_vector(target));
    std::vector<double> weight;
    if (ctx.has_input(2)) {
      const Tensor& w = ctx.input(2);
      if (w.shape() != Shape{c}) {
        return invalid_argument("input 2 (weight) must have shape [", c, "], got ", w.shape().to_string());
      }
      KILN_ASSIGN_OR_RETURN(weight, to_double_vector(w));
    }
    for (int64_t label : labels) {
      if (has_ignore_ && label == ignore_index_) continue;
      if (label < 0 || label >= c) {
        return invalid_argument("input 1 (target) has class ", label, ", outside [0, ", c, ")",
                                has_ignore_ ? " and not ignore_index" : "");
      }
    }

    // log-probabilities: the input itself (NLL) or its log-softmax over C (SCE).
    KILN_ASSIGN_OR_RETURN(std::vector<double> logp, to_double_vector(x));
    if (softmax_) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t k = 0; k < d; ++k) {
          double* base = logp.data() + i * c * d + k;
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < c; ++j) mx = std::max(mx, base[j * d]);
          double sum = 0;
          for (int64_t j = 0; j < c; ++j) sum += std::exp(base[j * d] - mx);
          const double lse = mx + std::log(sum);
          for (int64_t j = 0; j < c; ++j) base[j * d] -= lse;
        }
      }
    }

    std::vector<double> loss(static_cast<size_t>(n * d));
    double total = 0, weight_sum = 0;
    const bool weighted = !weight.empty() || has_ignore_;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < d; ++k) {
        const int64_t label = labels[static_cast<size_t>(i * d + k)];
        double l = 0, w = 1;
        if (has_ignore_ && label == ignore_index_) {
          w = 0;
        } else {
          if (!weight.empty()) w = weight[static_cast<size_t>(label)];
          l = -w * logp[static_cast<size_t>((i * c + label) * d + k)];
        }
        loss[static_cast<size_t>(i * d + k)] = l;
        total += l;
        weight_sum += w;
      }
    }

    Shape out_shape = reduction_ == Reduction::kNone ? want_target : Shape{};
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
    if (reduction_ == Reduction::kNone) {
      write(loss, out);
    } else {
      double v = total;
      if (reduction_ == Reduction::kMean) v = weighted ? total / weight_sum : total / static_cast<double>(n * d);
      write({v}, out);
    }
    if (softmax_ && ctx.wants_output(1)) {
      KILN_ASSIGN_OR_RETURN(Tensor * lp, ctx.allocate_output(1, x.dtype(), x.shape()));
      write(logp, lp);
    }
    return Status::ok();
  }

 private:
  static void write(const std::vector<double>& v, Tensor* out) {
    if (out->dtype() == DType::kFloat64) {
      std::copy(v.begin(), v.end(), out->data<double>());
      return;
    }
    std::vector<float> f(v.begin(), v.end());
    from_float_vector(f.data(), out);
  }

  bool softmax_;
  Reduction reduction_ = Reduction::kMean;
  bool has_ignore_ = false;
  int64_t ignore_index_ = 0;
};

template <bool Softmax>
Result<std::unique_ptr<Kernel>> make_loss(const KernelInit& init) {
  return init_kernel(std::make_unique<LossKernel>(Softmax), init);
}

}  // namespace

void register_loss_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "NegativeLogLikelihoodLoss", .since_version = 12, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_loss<false>, .flags = 0});
  r.add({.domain = "", .op_type = "SoftmaxCrossEntropyLoss", .since_version = 12, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_loss<true>, .flags = 0});
}

}  // namespace kiln::kernels
