// ai.onnx.ml TreeEnsemble-5: sums (or averages, mins, maxes) the leaf
// weights that each sample reaches in every tree. Nodes compare one feature
// with a split (<=, <, >=, >, ==, != or membership in a set); a NaN feature
// follows nodes_missing_value_tracks_true.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

enum Mode : int64_t { kLeq = 0, kLt, kGte, kGt, kEq, kNeq, kMember };
enum Aggregate : int64_t { kAverage = 0, kSum, kMin, kMax };

class TreeEnsembleKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const ir::Node& n = init.node;
    roots_ = init.attr_ints("tree_roots");
    features_ = init.attr_ints("nodes_featureids");
    true_ids_ = init.attr_ints("nodes_truenodeids");
    false_ids_ = init.attr_ints("nodes_falsenodeids");
    true_leaf_ = init.attr_ints("nodes_trueleafs");
    false_leaf_ = init.attr_ints("nodes_falseleafs");
    missing_true_ = init.attr_ints("nodes_missing_value_tracks_true");
    leaf_targets_ = init.attr_ints("leaf_targetids");
    n_targets_ = init.attr_int("n_targets", 1);
    aggregate_ = init.attr_int("aggregate_function", kSum);
    post_ = init.attr_int("post_transform", 0);
    KILN_RETURN_IF_ERROR(tensor_attr(n, "nodes_splits", &splits_));
    KILN_RETURN_IF_ERROR(tensor_attr(n, "leaf_weights", &weights_));
    std::vector<double> modes, members;
    KILN_RETURN_IF_ERROR(tensor_attr(n, "nodes_modes", &modes));
    if (n.find_attr("membership_values")) KILN_RETURN_IF_ERROR(tensor_attr(n, "membership_values", &members));
    const size_t count = features_.size();
    if (splits_.size() != count || modes.size() != count || true_ids_.size() != count || false_ids_.size() != count ||
        true_leaf_.size() != count || false_leaf_.size() != count || weights_.size() != leaf_targets_.size())
      return invalid_argument("the nodes_* (", count, ") or leaf_* attributes differ in length");
    if (post_ != 0) return unimplemented("post_transform ", post_, " is not implemented");
    for (double m : modes) modes_.push_back(static_cast<int64_t>(m));
    // Each membership node takes the next NaN-terminated run of values.
    size_t at = 0;
    sets_.resize(count);
    for (size_t i = 0; i < count; ++i) {
      if (modes_[i] != kMember) continue;
      while (at < members.size() && !std::isnan(members[at])) sets_[i].push_back(members[at++]);
      ++at;
    }
    for (int64_t t : leaf_targets_)
      if (t < 0 || t >= n_targets_) return invalid_argument("leaf target ", t, " is out of range");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    if (x.rank() != 2) return invalid_argument("X must be 2-D, not ", x.shape().to_string());
    const int64_t rows = x.dim(0), cols = x.dim(1);
    KILN_ASSIGN_OR_RETURN(const std::vector<double> xv, to_double_vector(x));  // float64 X compares exactly
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), Shape{rows, n_targets_}));
    std::vector<float> out(static_cast<size_t>(rows * n_targets_));
    std::vector<double> acc(static_cast<size_t>(n_targets_));
    std::vector<bool> seen(static_cast<size_t>(n_targets_));
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(seen.begin(), seen.end(), false);
      for (int64_t root : roots_) {
        KILN_ASSIGN_OR_RETURN(const int64_t leaf, walk(root, xv.data() + r * cols, cols));
        const auto t = static_cast<size_t>(leaf_targets_[static_cast<size_t>(leaf)]);
        const double w = weights_[static_cast<size_t>(leaf)];
        if (!seen[t]) acc[t] = w;
        else if (aggregate_ == kMin) acc[t] = std::min(acc[t], w);
        else if (aggregate_ == kMax) acc[t] = std::max(acc[t], w);
        else acc[t] += w;
        seen[t] = true;
      }
      for (int64_t t = 0; t < n_targets_; ++t) {
        double v = acc[static_cast<size_t>(t)];
        if (aggregate_ == kAverage && !roots_.empty()) v /= static_cast<double>(roots_.size());
        out[static_cast<size_t>(r * n_targets_ + t)] = static_cast<float>(v);
      }
    }
    from_float_vector(out.data(), y);
    return Status::ok();
  }

 private:
  static Status tensor_attr(const ir::Node& n, const char* name, std::vector<double>* out) {
    const ir::Attribute* a = n.find_attr(name);
    if (!a || !a->t.defined()) return invalid_argument("tensor attribute '", name, "' is missing");
    if (a->t.dtype() == DType::kFloat64) {
      out->assign(a->t.data<double>(), a->t.data<double>() + a->t.numel());
    } else if (dtype_is_float(a->t.dtype())) {
      for (float f : to_float_vector(a->t)) out->push_back(f);
    } else {
      KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, to_int64_vector(a->t));
      for (int64_t i : v) out->push_back(static_cast<double>(i));
    }
    return Status::ok();
  }

  bool branch(size_t node, double v) const {
    if (std::isnan(v)) return node < missing_true_.size() && missing_true_[node] != 0;
    const double s = splits_[node];
    switch (modes_[node]) {
      case kLeq: return v <= s;
      case kLt: return v < s;
      case kGte: return v >= s;
      case kGt: return v > s;
      case kEq: return v == s;
      case kNeq: return v != s;
      default:
        for (double m : sets_[node])
          if (m == v) return true;
        return false;
    }
  }

  Result<int64_t> walk(int64_t node, const double* row, int64_t cols) const {
    for (size_t steps = 0; steps <= features_.size(); ++steps) {
      if (node < 0 || node >= static_cast<int64_t>(features_.size()))
        return invalid_argument("node id ", node, " is out of range");
      const auto i = static_cast<size_t>(node);
      const int64_t f = features_[i];
      if (f < 0 || f >= cols) return invalid_argument("feature ", f, " is out of range");
      const bool t = branch(i, row[f]);
      const int64_t next = t ? true_ids_[i] : false_ids_[i];
      if ((t ? true_leaf_[i] : false_leaf_[i]) != 0) {
        if (next < 0 || next >= static_cast<int64_t>(weights_.size()))
          return invalid_argument("leaf id ", next, " is out of range");
        return next;
      }
      node = next;
    }
    return invalid_argument("a tree has a cycle");
  }

  std::vector<int64_t> roots_, features_, true_ids_, false_ids_, true_leaf_, false_leaf_, missing_true_, leaf_targets_,
      modes_;
  std::vector<double> splits_, weights_;
  std::vector<std::vector<double>> sets_;
  int64_t n_targets_ = 1, aggregate_ = kSum, post_ = 0;
};

}  // namespace

void register_tree_ensemble_ops(KernelRegistry& r) {
  r.add({.domain = "ai.onnx.ml", .op_type = "TreeEnsemble", .since_version = 5, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<TreeEnsembleKernel>, .flags = 0});
}

}  // namespace kiln::kernels
