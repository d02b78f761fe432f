// Einsum (opset 12): explicit ("ij,jk->ik") and implicit ("ij,jk") output,
// ellipsis with broadcasting, repeated labels within a term (diagonals),
// any number of operands.
//
// Plan: each operand first takes its diagonals and sums away the labels no
// other term needs; operands are then contracted left to right, each pair as
// one batched matrix product (batch labels shared and still needed, the
// contracted labels as K) on the MatMul engine; the last result is summed to
// the output labels and transposed into their order. float16/bfloat16 are
// staged through float32.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/matmul.h"
#include "kernels/portable/util/strided_copy.h"
#include "kernels/util/kernel_args.h"
#include "kernels/registry.h"

namespace kiln::kernels {

namespace {

// Labels: letters map to their ASCII code; ellipsis dims to kEllipsisBase + i
// (right-aligned over the widest ellipsis, so they broadcast like numpy).
constexpr int kEllipsisBase = 1000;

struct Equation {
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
};

Result<Equation> parse_equation(const std::string& eq_in, const std::vector<const Tensor*>& operands) {
  std::string eq;
  for (char ch : eq_in)
    if (!std::isspace(static_cast<unsigned char>(ch))) eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands.size()) {
    return invalid_argument("equation '", eq_in, "' has ", terms.size(), " input terms but the node has ",
                            operands.size(), " inputs");
  }
  auto letters_of = [&](const std::string& term, size_t* ellipsis_at, int64_t* letter_count) -> Status {
    *ellipsis_at = std::string::npos;
    *letter_count = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.compare(i, 3, "...") == 0) {
        if (*ellipsis_at != std::string::npos)
          return invalid_argument("equation '", eq_in, "' has two ellipses in one term");
        *ellipsis_at = i;
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
        ++*letter_count;
      } else {
        return invalid_argument("equation '", eq_in, "' has an invalid character '", term[i], "'");
      }
    }
    return Status::ok();
  };
  Equation e;
  int64_t max_ellipsis = 0;
  std::vector<int64_t> ellipsis_rank(terms.size(), 0);
  for (size_t t = 0; t < terms.size(); ++t) {
    size_t at;
    int64_t letters;
    KILN_RETURN_IF_ERROR(letters_of(terms[t], &at, &letters));
    const int64_t rank = static_cast<int64_t>(operands[t]->rank());
    if ((at == std::string::npos && letters != rank) || letters > rank) {
      return invalid_argument("term '", terms[t], "' of equation '", eq_in, "' does not match input ", t,
                              " of rank ", rank);
    }
    ellipsis_rank[t] = at == std::string::npos ? 0 : rank - letters;
    max_ellipsis = std::max(max_ellipsis, ellipsis_rank[t]);
  }
  std::map<int, int> counts;
  for (size_t t = 0; t < terms.size(); ++t) {
    std::vector<int>& labels = e.inputs.emplace_back();
    for (size_t i = 0; i < terms[t].size(); ++i) {
      if (terms[t].compare(i, 3, "...") == 0) {
        for (int64_t d = 0; d < ellipsis_rank[t]; ++d)
          labels.push_back(kEllipsisBase + static_cast<int>(max_ellipsis - ellipsis_rank[t] + d));
        i += 2;
      } else {
        labels.push_back(static_cast<unsigned char>(terms[t][i]));
        ++counts[labels.back()];
      }
    }
  }
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    size_t at;
    int64_t letters;
    KILN_RETURN_IF_ERROR(letters_of(rhs, &at, &letters));
    std::set<int> seen;
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs.compare(i, 3, "...") == 0) {
        for (int64_t d = 0; d < max_ellipsis; ++d) e.output.push_back(kEllipsisBase + static_cast<int>(d));
        i += 2;
        continue;
      }
      const int label = static_cast<unsigned char>(rhs[i]);
      if (!counts.count(label) || !seen.insert(label).second) {
        return invalid_argument("output label '", rhs[i], "' of equation '", eq_in,
                                "' is repeated or not in any input");
      }
      e.output.push_back(label);
    }
  } else {
    // Implicit: the ellipsis dims, then labels used once, in ASCII order.
    for (int64_t d = 0; d < max_ellipsis; ++d) e.output.push_back(kEllipsisBase + static_cast<int>(d));
    for (const auto& [label, n] : counts)
      if (n == 1) e.output.push_back(label);
  }
  return e;
}

// An operand during evaluation: values with one label per dim.
template <class T>
struct Labeled {
  std::vector<T> data;
  std::vector<int64_t> dims;
  std::vector<int> labels;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

template <class T>
std::vector<int64_t> strides_of(const Labeled<T>& x) {
  std::vector<int64_t> s(x.dims.size());
  int64_t acc = 1;
  for (size_t i = x.dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= x.dims[i];
  }
  return s;
}

// Keeps one dim per distinct label (diagonal of repeated labels) and sums
// over labels not in `keep`, preserving the order of first appearance.
template <class T>
Labeled<T> diagonal_and_reduce(const Labeled<T>& x, const std::set<int>& keep) {
  const std::vector<int64_t> st = strides_of(x);
  std::vector<int> uniq;
  std::vector<int64_t> udim, ustride;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    auto it = std::find(uniq.begin(), uniq.end(), x.labels[i]);
    if (it == uniq.end()) {
      uniq.push_back(x.labels[i]);
      udim.push_back(x.dims[i]);
      ustride.push_back(st[i]);
    } else {
      ustride[static_cast<size_t>(it - uniq.begin())] += st[i];
    }
  }
  Labeled<T> out;
  std::vector<int64_t> out_pos(uniq.size(), -1);  // position of each unique label in out
  for (size_t u = 0; u < uniq.size(); ++u) {
    if (!keep.count(uniq[u])) continue;
    out_pos[u] = static_cast<int64_t>(out.labels.size());
    out.labels.push_back(uniq[u]);
    out.dims.push_back(udim[u]);
  }
  out.data.assign(static_cast<size_t>(out.numel()), T(0));
  const std::vector<int64_t> ost = strides_of(out);
  std::vector<int64_t> idx(uniq.size(), 0);
  int64_t total = 1;
  for (int64_t d : udim) total *= d;
  for (int64_t n = 0; n < total; ++n) {
    int64_t src = 0, dst = 0;
    for (size_t u = 0; u < uniq.size(); ++u) {
      src += idx[u] * ustride[u];
      if (out_pos[u] >= 0) dst += idx[u] * ost[static_cast<size_t>(out_pos[u])];
    }
    out.data[static_cast<size_t>(dst)] += x.data[static_cast<size_t>(src)];
    for (size_t u = uniq.size(); u-- > 0;) {
      if (++idx[u] < udim[u]) break;
      idx[u] = 0;
    }
  }
  return out;
}

// Reorders the dims of x to `labels` (a permutation of x.labels).
template <class T>
Labeled<T> permute(const Labeled<T>& x, const std::vector<int>& labels, ThreadPool* pool) {
  if (labels == x.labels) return x;
  const std::vector<int64_t> st = strides_of(x);
  Labeled<T> out;
  out.labels = labels;
  std::vector<int64_t> src_strides;
  for (int l : labels) {
    const size_t i = static_cast<size_t>(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
    out.dims.push_back(x.dims[i]);
    src_strides.push_back(st[i]);
  }
  out.data.resize(static_cast<size_t>(out.numel()));
  const std::vector<int64_t> dst_strides = strides_of(out);
  layout::strided_copy(dtype_of<T>, out.data.data(), dst_strides, x.data.data(), src_strides, out.dims, pool);
  return out;
}

template <class T>
int64_t dim_of(const Labeled<T>& x, int label) {
  for (size_t i = 0; i < x.labels.size(); ++i)
    if (x.labels[i] == label) return x.dims[i];
  return 1;
}

// Contracts a and b; `needed` holds the labels later terms or the output use.
template <class T>
Result<Labeled<T>> contract(Labeled<T> a, Labeled<T> b, const std::set<int>& needed,
                            ThreadPool* pool) {
  auto has = [](const Labeled<T>& x, int l) { return std::find(x.labels.begin(), x.labels.end(), l) != x.labels.end(); };
  // A label summed away whose size is 1 on one side: sum the other side first.
  for (int l : std::vector<int>(a.labels)) {
    if (!has(b, l) || needed.count(l)) continue;
    const int64_t da = dim_of(a, l), db = dim_of(b, l);
    if (da == db) continue;
    std::set<int> keep_a(a.labels.begin(), a.labels.end()), keep_b(b.labels.begin(), b.labels.end());
    if (da != 1) {
      keep_a.erase(l);
      a = diagonal_and_reduce(a, keep_a);
    } else {
      keep_b.erase(l);
      b = diagonal_and_reduce(b, keep_b);
    }
  }
  std::vector<int> batch, a_only, b_only, sum;
  for (int l : a.labels) {
    if (has(b, l)) (needed.count(l) ? batch : sum).push_back(l);
    else a_only.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a, l)) b_only.push_back(l);
  std::vector<int> a_order = batch, b_order = batch;
  a_order.insert(a_order.end(), a_only.begin(), a_only.end());
  a_order.insert(a_order.end(), sum.begin(), sum.end());
  b_order.insert(b_order.end(), sum.begin(), sum.end());
  b_order.insert(b_order.end(), b_only.begin(), b_only.end());
  a = permute(a, a_order, pool);
  b = permute(b, b_order, pool);
  int64_t m = 1, n = 1, k = 1;
  for (int l : a_only) m *= dim_of(a, l);
  for (int l : b_only) n *= dim_of(b, l);
  for (int l : sum) k *= dim_of(a, l);  // equal on both sides, or both summed to 1 above
  Shape as, bs;
  for (int l : batch) {
    as.push_back(dim_of(a, l));
    bs.push_back(dim_of(b, l));
  }
  as.push_back(m);
  as.push_back(k);
  bs.push_back(k);
  bs.push_back(n);
  KILN_ASSIGN_OR_RETURN(MatMulPlan plan, plan_matmul(as, bs));
  Labeled<T> out;
  out.labels = batch;
  for (size_t i = 0; i < batch.size(); ++i) out.dims.push_back(plan.out_shape[i]);
  for (int l : a_only) {
    out.labels.push_back(l);
    out.dims.push_back(dim_of(a, l));
  }
  for (int l : b_only) {
    out.labels.push_back(l);
    out.dims.push_back(dim_of(b, l));
  }
  out.data.assign(static_cast<size_t>(out.numel()), T(0));
  if (out.data.empty() || k == 0) return out;
  if constexpr (std::is_same_v<T, float>) {
    matmul_f32(plan, a.data.data(), b.data.data(), nullptr, out.data.data(), pool);
  } else {
    for (int64_t t = 0; t < plan.batches; ++t) {
      const size_t ti = static_cast<size_t>(t);
      gemm_generic<T>(false, false, m, n, k, a.data.data() + plan.a_offset[ti], k, b.data.data() + plan.b_offset[ti],
                      n, out.data.data() + t * m * n, n, false);
    }
  }
  return out;
}

template <class T>
Status run_einsum(const Equation& eq, const std::vector<std::vector<T>>& values, const std::vector<const Tensor*>& ops,ThreadPool* pool, Labeled<T>* result) {
  std::vector<Labeled<T>> terms(ops.size());
  for (size_t t = 0; t < ops.size(); ++t) {
    terms[t].data = values[t];
    terms[t].dims = ops[t]->shape().to_vector();
    terms[t].labels = eq.inputs[t];
  }
  const std::set<int> out_labels(eq.output.begin(), eq.output.end());
  // Labels needed by terms after `t`, or by the output.
  auto needed_after = [&](size_t t) {
    std::set<int> s = out_labels;
    for (size_t u = t + 1; u < terms.size(); ++u) s.insert(eq.inputs[u].begin(), eq.inputs[u].end());
    return s;
  };
  auto needed_except = [&](size_t t) {
    std::set<int> s = out_labels;
    for (size_t u = 0; u < terms.size(); ++u)
      if (u != t) s.insert(eq.inputs[u].begin(), eq.inputs[u].end());
    return s;
  };
  for (size_t t = 0; t < terms.size(); ++t) terms[t] = diagonal_and_reduce(terms[t], needed_except(t));
  Labeled<T> acc = std::move(terms[0]);
  for (size_t t = 1; t < terms.size(); ++t) {
    KILN_ASSIGN_OR_RETURN(acc, contract(std::move(acc), std::move(terms[t]), needed_after(t),pool));
  }
  acc = diagonal_and_reduce(acc, out_labels);
  *result = permute(acc, eq.output, pool);
  return Status::ok();
}

class EinsumKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    if (!init.node.has_attr("equation"))
      return invalid_argument("attribute equation is required");
    equation_ = init.attr_string("equation", "");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    std::vector<const Tensor*> ops;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
      ops.push_back(&ctx.input(i));
      if (ops.back()->dtype() != ops[0]->dtype()) {
        return invalid_argument("input ", i, " has dtype ", dtype_name(ops.back()->dtype()),
                                ", expected ", dtype_name(ops[0]->dtype()), " like input 0");
      }
    }
    if (ops.empty()) return invalid_argument("needs at least one input");
    KILN_ASSIGN_OR_RETURN(Equation eq, parse_equation(equation_, ops));
    // Every label must have one size (1 broadcasts only for ellipsis dims).
    std::map<int, int64_t> sizes;
    for (size_t t = 0; t < ops.size(); ++t) {
      for (size_t d = 0; d < eq.inputs[t].size(); ++d) {
        const int l = eq.inputs[t][d];
        const int64_t s = ops[t]->dim(d);
        auto [it, fresh] = sizes.emplace(l, s);
        if (fresh || it->second == s) continue;
        if (l >= kEllipsisBase && (s == 1 || it->second == 1)) {
          it->second = std::max(it->second, s);
          continue;
        }
        return invalid_argument("label '",
                                l >= kEllipsisBase ? std::string("...") : std::string(1, static_cast<char>(l)),
                                "' has size ", it->second, " and ", s, " (input ", t, " ",
                                ops[t]->shape().to_string(), ")");
      }
    }
    const DType dtype = ops[0]->dtype();
    Status st;
    auto run = [&](auto tag, auto&& load, auto&& store) {
      using T = decltype(tag);
      std::vector<std::vector<T>> values;
      for (const Tensor* t : ops) values.push_back(load(*t));
      Labeled<T> result;
      st = run_einsum<T>(eq, values, ops,ctx.pool(), &result);
      if (!st.is_ok()) return;
      auto out = ctx.allocate_output(0, dtype, Shape(result.dims));
      if (!out.ok()) {
        st = std::move(out).status();
        return;
      }
      store(result.data, *out);
    };
    if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
      run(float{}, [](const Tensor& t) { return to_float_vector(t); },
          [](const std::vector<float>& v, Tensor* out) { from_float_vector(v.data(), out); });
      return st;
    }
    visit_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        run(T{}, [](const Tensor& t) { return std::vector<T>(t.data<T>(), t.data<T>() + t.numel()); },
            [](const std::vector<T>& v, Tensor* out) { std::copy(v.begin(), v.end(), out->data<T>()); });
      } else {
        st = unsupported_dtype(0, dtype);
      }
    });
    return st;
  }

 private:
  std::string equation_;
};

constexpr DTypeSet kEinsumTypes = kFloatDTypes | dtype_set(DType::kInt32, DType::kInt64, DType::kUInt32,
                                                           DType::kUInt64, DType::kInt8, DType::kUInt8,
                                                           DType::kInt16, DType::kUInt16);

}  // namespace

void register_einsum_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Einsum", .since_version = 12, .until_version = 1000, .dtypes = kEinsumTypes,
         .type_input = 0, .factory = make_kernel<EinsumKernel>, .flags = 0});
}

}  // namespace kiln::kernels
