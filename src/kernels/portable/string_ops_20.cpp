// String ops of opset 20: StringConcat (broadcasting) and StringSplit
// (Python str.split semantics: a delimiter, or runs of whitespace when none).
#include <string>
#include <string_view>
#include <vector>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

class StringConcatKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return invalid_argument("needs X and Y");
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != DType::kString || b.dtype() != DType::kString)
      return invalid_argument("inputs must be strings");
    KILN_ASSIGN_OR_RETURN(BroadcastPlan plan, make_broadcast_plan(a.shape(), b.shape()));
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kString, plan.out));
    const std::string* x = a.data<std::string>();
    const std::string* y = b.data<std::string>();
    std::string* z = out->data<std::string>();
    for (int64_t r = 0; r < plan.num_runs(); ++r) {
      int64_t oa = 0, ob = 0;
      plan.run_offsets(r, &oa, &ob);
      for (int64_t i = 0; i < plan.inner; ++i)
        z[r * plan.inner + i] = x[oa + i * plan.step_a] + y[ob + i * plan.step_b];
    }
    return Status::ok();
  }
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's s.split(delimiter, maxsplit) (maxsplit < 0: no limit).
std::vector<std::string> split(std::string_view s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (delim.empty()) {  // runs of whitespace; no empty parts
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = s.size();
        while (end > i && is_space(s[end - 1])) --end;
        parts.emplace_back(s.substr(i, end - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !is_space(s[j])) ++j;
      parts.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) break;
    const size_t at = s.find(delim, start);
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(start, at - start));
    start = at + delim.size();
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

class StringSplitKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    delimiter_ = init.attr_string("delimiter", "");
    maxsplit_ = init.node.has_attr("maxsplit") ? init.attr_int("maxsplit", -1) : -1;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kString) return invalid_argument("X must be strings");
    std::vector<std::vector<std::string>> parts(static_cast<size_t>(x.numel()));
    int64_t widest = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      parts[static_cast<size_t>(i)] = split(x.data<std::string>()[i], delimiter_, maxsplit_);
      widest = std::max<int64_t>(widest, static_cast<int64_t>(parts[static_cast<size_t>(i)].size()));
    }
    Shape ys = x.shape();
    ys.push_back(widest);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kString, ys));
    KILN_ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(1, DType::kInt64, x.shape()));
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto& p = parts[static_cast<size_t>(i)];
      for (size_t k = 0; k < p.size(); ++k) y->data<std::string>()[i * widest + static_cast<int64_t>(k)] = std::move(p[k]);
      z->data<int64_t>()[i] = static_cast<int64_t>(p.size());
    }
    return Status::ok();
  }

 private:
  std::string delimiter_;
  int64_t maxsplit_ = -1;
};

}  // namespace

void register_string_20_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "StringConcat", .since_version = 20, .until_version = 1000,
         .dtypes = dtype_bit(DType::kString), .type_input = 0, .factory = make_kernel<StringConcatKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "StringSplit", .since_version = 20, .until_version = 1000,
         .dtypes = dtype_bit(DType::kString), .type_input = 0, .factory = make_kernel<StringSplitKernel>, .flags = 0});
}

}  // namespace kiln::kernels
