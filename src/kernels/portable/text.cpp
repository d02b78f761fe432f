// Text ops: TfIdfVectorizer (opset 9).
//
// The pool holds the n-grams to count: pool_int64s or pool_strings, with
// ngram_counts[k] the offset of the first (k+1)-gram; the i-th n-gram of the
// pool (in pool order) is counted into output column ngram_indexes[i]. An
// n-gram of size n with skip distance d takes tokens t, t+d, ..., t+(n-1)d
// of one row, for every d in 1..max_skip_count+1; unigrams do not depend on
// d and are counted once. Modes: TF (counts), IDF (counts capped at 1, times
// the weight), TFIDF (counts times the weight); weights default to 1. A
// weight belongs to an output column, as in ONNX Runtime and the ONNX
// reference (onnx/reference/ops/op_tfidf_vectorizer.py), which is what
// converters such as skl2onnx rely on.
#include <algorithm>
#include <map>
#include <string>
#include <type_traits>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

enum class TfIdfMode { kTf, kIdf, kTfIdf };

class TfIdfVectorizer final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const ir::Node& node = init.node;
    const std::string mode = init.attr_string("mode", "");
    if (mode == "TF") mode_ = TfIdfMode::kTf;
    else if (mode == "IDF") mode_ = TfIdfMode::kIdf;
    else if (mode == "TFIDF") mode_ = TfIdfMode::kTfIdf;
    else return invalid_argument("attribute mode must be TF, IDF or TFIDF, got '", mode, "'");
    min_gram_ = init.attr_int("min_gram_length", 0);
    max_gram_ = init.attr_int("max_gram_length", 0);
    max_skip_ = init.attr_int("max_skip_count", 0);
    if (min_gram_ < 1 || max_gram_ < min_gram_) {
      return invalid_argument("needs 1 <= min_gram_length <= max_gram_length, got ", min_gram_, " and ",
                              max_gram_);
    }
    if (max_skip_ < 0) return invalid_argument("attribute max_skip_count must not be negative");
    const std::vector<int64_t> counts = init.attr_ints("ngram_counts");
    const std::vector<int64_t> indexes = init.attr_ints("ngram_indexes");
    weights_ = init.attr_floats("weights");
    const bool has_ints = node.has_attr("pool_int64s"), has_strings = node.has_attr("pool_strings");
    if (has_ints == has_strings)
      return invalid_argument("exactly one of pool_int64s and pool_strings must be given");
    strings_ = has_strings;
    const std::vector<int64_t> pool_i = init.attr_ints("pool_int64s");
    const std::vector<std::string> pool_s = init.attr_strings("pool_strings");
    const auto pool_size = static_cast<int64_t>(strings_ ? pool_s.size() : pool_i.size());
    // Walk the pool: ngram_counts[k] .. ngram_counts[k + 1] hold (k+1)-grams.
    int64_t ordinal = 0;
    for (size_t k = 0; k < counts.size(); ++k) {
      const int64_t begin = counts[k];
      const int64_t end = k + 1 < counts.size() ? counts[k + 1] : pool_size;
      const auto n = static_cast<int64_t>(k + 1);
      if (begin < 0 || end < begin || end > pool_size || (end - begin) % n != 0) {
        return invalid_argument("attribute ngram_counts[", k, "] = ", begin,
                                " does not split the pool into ", n, "-grams");
      }
      for (int64_t at = begin; at < end; at += n, ++ordinal) {
        if (ordinal >= static_cast<int64_t>(indexes.size())) {
          return invalid_argument("attribute ngram_indexes has ", indexes.size(),
                                  " entries, fewer than the pool's n-grams");
        }
        const int64_t column = indexes[static_cast<size_t>(ordinal)];
        if (column < 0) return invalid_argument("attribute ngram_indexes has negative ", column);
        Entry e{column};
        if (strings_) {
          std::vector<std::string> key(pool_s.begin() + at, pool_s.begin() + at + n);
          string_pool_[key] = e;
        } else {
          std::vector<int64_t> key(pool_i.begin() + at, pool_i.begin() + at + n);
          int_pool_[key] = e;
        }
        num_columns_ = std::max(num_columns_, column + 1);
      }
    }
    if (!weights_.empty() && static_cast<int64_t>(weights_.size()) < num_columns_) {
      return invalid_argument("attribute weights has ", weights_.size(), " entries, fewer than the ",
                              num_columns_, " output columns");
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() > 2) {
      return invalid_argument("input 0 (X) must be 1-D or 2-D, got ", x.shape().to_string());
    }
    if (strings_ != (x.dtype() == DType::kString)) {
      return invalid_argument("input 0 (X) has dtype ", dtype_name(x.dtype()), " but the pool holds ",
                              strings_ ? "strings" : "integers");
    }
    const int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
    const int64_t len = x.rank() == 2 ? x.dim(1) : x.numel();  // a scalar is one token
    const Shape out_shape = x.rank() == 2 ? Shape{rows, num_columns_} : Shape{num_columns_};
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kFloat32, out_shape));
    std::fill(out->data<float>(), out->data<float>() + out->numel(), 0.f);
    if (strings_) {
      count_rows(x.data<std::string>(), rows, len, string_pool_, out->data<float>());
    } else {
      Status st;
      visit_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          std::vector<int64_t> v(x.data<T>(), x.data<T>() + x.numel());
          count_rows(v.data(), rows, len, int_pool_, out->data<float>());
        } else {
          st = invalid_argument("input 0 (X) must be int32, int64 or string, got ", dtype_name(x.dtype()));
        }
      });
      KILN_RETURN_IF_ERROR(std::move(st));
    }
    return Status::ok();
  }

 private:
  struct Entry {
    int64_t column = 0;
  };

  template <class T>
  void count_rows(const T* x, int64_t rows, int64_t len, const std::map<std::vector<T>, Entry>& pool, float* out) const {
    std::vector<double> counts(static_cast<size_t>(num_columns_));
    std::vector<T> key;
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = x + r * len;
      std::fill(counts.begin(), counts.end(), 0.0);
      for (int64_t d = 1; d <= max_skip_ + 1; ++d) {
        const int64_t first_n = d > 1 ? std::max<int64_t>(min_gram_, 2) : min_gram_;
        if (first_n > max_gram_) break;
        for (int64_t start = 0; start < len; ++start) {
          key.clear();
          for (int64_t n = 1; n <= max_gram_; ++n) {
            const int64_t at = start + (n - 1) * d;
            if (at >= len) break;
            key.push_back(row[at]);
            if (n < first_n) continue;
            auto it = pool.find(key);
            if (it != pool.end()) counts[static_cast<size_t>(it->second.column)] += 1;
          }
        }
      }
      float* o = out + r * num_columns_;
      for (int64_t j = 0; j < num_columns_; ++j) {
        double v = counts[static_cast<size_t>(j)];
        const double w = weights_.empty() ? 1.0 : static_cast<double>(weights_[static_cast<size_t>(j)]);
        if (mode_ == TfIdfMode::kIdf) v = v > 0 ? w : 0.0;
        else if (mode_ == TfIdfMode::kTfIdf) v *= w;
        o[j] = static_cast<float>(v);
      }
    }
  }

  TfIdfMode mode_ = TfIdfMode::kTf;
  int64_t min_gram_ = 1, max_gram_ = 1, max_skip_ = 0;
  bool strings_ = false;
  std::vector<float> weights_;
  std::map<std::vector<int64_t>, Entry> int_pool_;
  std::map<std::vector<std::string>, Entry> string_pool_;
  int64_t num_columns_ = 0;
};

}  // namespace

void register_text_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "TfIdfVectorizer", .since_version = 9, .until_version = 1000,
         .dtypes = dtype_set(DType::kString, DType::kInt32, DType::kInt64), .type_input = 0,
         .factory = make_kernel<TfIdfVectorizer>, .flags = 0});
}

}  // namespace kiln::kernels
