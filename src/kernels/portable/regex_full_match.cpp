// RegexFullMatch-20: whether each string fully matches `pattern` (RE2
// syntax, which is what ONNX specifies). Built only with RE2 (Debian's
// libre2-dev; KILN_HAVE_RE2): without it the op has no kernel.
#include "kernels/registry.h"

#ifdef KILN_HAVE_RE2
#include <re2/re2.h>

#include <memory>
#include <string>

namespace kiln::kernels {

namespace {

class RegexFullMatchKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const std::string pattern = init.attr_string("pattern", "");
    re_ = std::make_unique<RE2>(pattern, RE2::Quiet);
    if (!re_->ok())
      return invalid_argument("pattern '", pattern, "' is not a valid RE2 expression: ",
                              re_->error());
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kString) return invalid_argument("X must be strings");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kBool, x.shape()));
    for (int64_t i = 0; i < x.numel(); ++i) y->data<bool>()[i] = RE2::FullMatch(x.data<std::string>()[i], *re_);
    return Status::ok();
  }

 private:
  std::unique_ptr<RE2> re_;
};

}  // namespace

void register_regex_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "RegexFullMatch", .since_version = 20, .until_version = 1000,
         .dtypes = dtype_bit(DType::kString), .type_input = 0, .factory = make_kernel<RegexFullMatchKernel>, .flags = 0});
}

}  // namespace kiln::kernels

#else

namespace kiln::kernels {
void register_regex_ops(KernelRegistry&) {}
}  // namespace kiln::kernels

#endif
