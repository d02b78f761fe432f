// CausalConvWithState-27: depthwise causal 1-D convolution over
// concat(past_state, input) along time, with optional bias and SiLU
// ("silu" or "swish"); present_state is the last K-1 time steps of that
// concatenation (the state for the next call).
#include <cmath>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

class CausalConvWithStateKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const std::string act = init.attr_string("activation", "none");
    if (act != "none" && act != "silu" && act != "swish" && !act.empty())
      return invalid_argument("activation '", act, "' is not none, silu or swish");
    silu_ = act == "silu" || act == "swish";
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return invalid_argument("needs input and weight");
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    if (x.rank() != 3 || w.rank() != 3 || w.dim(0) != x.dim(1) || w.dim(1) != 1 || w.dim(2) < 1)
      return invalid_argument("input ", x.shape().to_string(), " and weight ",
                              w.shape().to_string(), " are not [B, C, T] and [C, 1, K]");
    const int64_t b = x.dim(0), c = x.dim(1), t = x.dim(2), k = w.dim(2), p = k - 1;
    std::vector<float> bias(static_cast<size_t>(c), 0.f), past(static_cast<size_t>(b * c * p), 0.f);
    if (ctx.has_input(2)) {
      if (ctx.input(2).numel() != c) return invalid_argument("bias must have ", c, " values");
      bias = to_float_vector(ctx.input(2));
    }
    if (ctx.has_input(3)) {
      const Tensor& s = ctx.input(3);
      if (s.rank() != 3 || s.dim(0) != b || s.dim(1) != c || s.dim(2) != p)
        return invalid_argument("past_state is ", s.shape().to_string(), "; expected [", b,
                                ", ", c, ", ", p, "]");
      past = to_float_vector(s);
    }
    const std::vector<float> xv = to_float_vector(x), wv = to_float_vector(w);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    std::vector<float> out(static_cast<size_t>(b * c * t)), state(static_cast<size_t>(b * c * p));
    std::vector<float> padded(static_cast<size_t>(p + t));
    for (int64_t bc = 0; bc < b * c; ++bc) {
      const int64_t ch = bc % c;
      std::copy(past.begin() + bc * p, past.begin() + (bc + 1) * p, padded.begin());
      std::copy(xv.begin() + bc * t, xv.begin() + (bc + 1) * t, padded.begin() + p);
      const float* wk = wv.data() + ch * k;
      for (int64_t i = 0; i < t; ++i) {
        float s = bias[static_cast<size_t>(ch)];
        for (int64_t j = 0; j < k; ++j) s += wk[j] * padded[static_cast<size_t>(i + j)];
        if (silu_) s = s / (1.f + std::exp(-s));
        out[static_cast<size_t>(bc * t + i)] = s;
      }
      std::copy(padded.end() - p, padded.end(), state.begin() + bc * p);
    }
    from_float_vector(out.data(), y);
    if (ctx.wants_output(1)) {
      KILN_ASSIGN_OR_RETURN(Tensor * st, ctx.allocate_output(1, x.dtype(), Shape{b, c, p}));
      from_float_vector(state.data(), st);
    }
    return Status::ok();
  }

 private:
  bool silu_ = false;
};

}  // namespace

void register_causal_conv_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "CausalConvWithState", .since_version = 27, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<CausalConvWithStateKernel>, .flags = 0});
}

}  // namespace kiln::kernels
