// Sequence and optional ops: SequenceEmpty/Construct/Insert/Erase/At/Length,
// SplitToSequence, ConcatFromSequence, SequenceMap, Optional,
// OptionalHasElement, OptionalGetElement.
//
// Tensors stored in a sequence must own their memory: an input may be a view
// into the run's arena that is reused once its last reader has run.
#include <cstring>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/dtype_attr.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

Tensor owned(const Tensor& t) { return t.owns_memory() ? t : t.clone(); }

Result<const Value*> sequence_input(const KernelContext& ctx, size_t i) {
  const Value* v = ctx.input_value(i);
  if (!v || !v->is_sequence()) return invalid_argument("input ", i, " must be a sequence");
  return v;
}

Result<int64_t> position(const KernelContext& ctx, size_t i, int64_t size, int64_t dflt, bool allow_end) {
  if (!ctx.has_input(i)) return dflt;
  KILN_ASSIGN_OR_RETURN(auto p, to_int64_vector(ctx.input(i)));
  if (p.size() != 1) return invalid_argument("position must be a scalar");
  int64_t pos = p[0];
  const int64_t hi = allow_end ? size : size - 1;
  if (pos < -size || pos > hi)
    return invalid_argument("position ", pos, " is out of range for a sequence of ", size);
  return pos < 0 ? pos + size : pos;
}

class SequenceEmpty final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(dtype_, dtype_attr(init, "dtype", DType::kFloat32));
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    ctx.set_output_value(0, Value::sequence({}, dtype_));
    return Status::ok();
  }

 private:
  DType dtype_ = DType::kFloat32;
};

class SequenceConstruct final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    std::vector<Tensor> items;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i) || !ctx.input_value(i)->is_tensor())
        return invalid_argument("input ", i, " must be a tensor");
      if (!items.empty() && ctx.input(i).dtype() != items[0].dtype())
        return invalid_argument("inputs have different dtypes");
      items.push_back(owned(ctx.input(i)));
    }
    DType dt = items.empty() ? DType::kUndefined : items[0].dtype();
    ctx.set_output_value(0, Value::sequence(std::move(items), dt));
    return Status::ok();
  }
};

class SequenceInsert final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    if (!ctx.has_input(1)) return invalid_argument("input 1 (tensor) is missing");
    const Tensor& t = ctx.input(1);
    if (seq->elem_dtype() != DType::kUndefined && t.dtype() != seq->elem_dtype()) {
      return invalid_argument("tensor dtype ", dtype_name(t.dtype()),
                              " does not match the sequence's ", dtype_name(seq->elem_dtype()));
    }
    auto n = static_cast<int64_t>(seq->sequence_items().size());
    KILN_ASSIGN_OR_RETURN(int64_t pos, position(ctx, 2, n, n, true));
    std::vector<Tensor> items = seq->sequence_items();
    items.insert(items.begin() + pos, owned(t));
    ctx.set_output_value(0, Value::sequence(std::move(items), t.dtype()));
    return Status::ok();
  }
};

class SequenceErase final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    auto n = static_cast<int64_t>(seq->sequence_items().size());
    if (n == 0) return invalid_argument("cannot erase from an empty sequence");
    KILN_ASSIGN_OR_RETURN(int64_t pos, position(ctx, 1, n, n - 1, false));
    std::vector<Tensor> items = seq->sequence_items();
    items.erase(items.begin() + pos);
    ctx.set_output_value(0, Value::sequence(std::move(items), seq->elem_dtype()));
    return Status::ok();
  }
};

class SequenceAt final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    auto n = static_cast<int64_t>(seq->sequence_items().size());
    if (!ctx.has_input(1)) return invalid_argument("input 1 (position) is missing");
    KILN_ASSIGN_OR_RETURN(int64_t pos, position(ctx, 1, n, 0, false));
    ctx.set_output_value(0, Value(seq->sequence_items()[static_cast<size_t>(pos)]));
    return Status::ok();
  }
};

class SequenceLength final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kInt64, Shape{}));
    out->data<int64_t>()[0] = static_cast<int64_t>(seq->sequence_items().size());
    return Status::ok();
  }
};

// Copies the [begin, end) range of `axis` of t into a new tensor.
Tensor narrow(const Tensor& t, int64_t axis, int64_t begin, int64_t end, bool drop_axis) {
  Shape s = t.shape();
  s[static_cast<size_t>(axis)] = end - begin;
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < t.rank(); ++i) {
    if (static_cast<int64_t>(i) < axis) outer *= t.dim(i);
    if (static_cast<int64_t>(i) > axis) inner *= t.dim(i);
  }
  Tensor out = Tensor::allocate(t.dtype(), s);
  const int64_t d = t.dim(static_cast<size_t>(axis)), len = end - begin;
  const size_t es = dtype_size(t.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    if (t.dtype() == DType::kString) {
      for (int64_t k = 0; k < len * inner; ++k)
        out.data<std::string>()[o * len * inner + k] = t.data<std::string>()[(o * d + begin) * inner + k];
    } else {
      std::memcpy(static_cast<uint8_t*>(out.raw_data()) + static_cast<size_t>(o * len * inner) * es,
                  static_cast<const uint8_t*>(t.raw_data()) + static_cast<size_t>((o * d + begin) * inner) * es,
                  static_cast<size_t>(len * inner) * es);
    }
  }
  if (drop_axis) {
    Shape squeezed;
    for (size_t i = 0; i < s.rank(); ++i)
      if (static_cast<int64_t>(i) != axis) squeezed.push_back(s[i]);
    return out.reshaped(squeezed);
  }
  return out;
}

class SplitToSequence final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axis_ = init.attr_int("axis", 0);
    keepdims_ = init.attr_int("keepdims", 1) != 0;
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, static_cast<int64_t>(x.rank())));
    const int64_t d = x.dim(static_cast<size_t>(axis));
    std::vector<int64_t> sizes;
    bool drop = false;
    if (!ctx.has_input(1)) {
      sizes.assign(static_cast<size_t>(d), 1);
      drop = !keepdims_;
    } else {
      KILN_ASSIGN_OR_RETURN(auto split, to_int64_vector(ctx.input(1)));
      if (ctx.input(1).rank() == 0) {
        if (split.empty() || split[0] <= 0) return invalid_argument("split must be positive");
        for (int64_t at = 0; at < d; at += split[0]) sizes.push_back(std::min(split[0], d - at));
      } else {
        sizes = split;
        int64_t total = 0;
        for (int64_t s : sizes) total += s;
        if (total != d)
          return invalid_argument("split sizes sum to ", total, ", axis has ", d);
      }
    }
    std::vector<Tensor> items;
    int64_t at = 0;
    for (int64_t s : sizes) {
      items.push_back(narrow(x, axis, at, at + s, drop));
      at += s;
    }
    ctx.set_output_value(0, Value::sequence(std::move(items), x.dtype()));
    return Status::ok();
  }

 private:
  int64_t axis_ = 0;
  bool keepdims_ = true;
};

class ConcatFromSequence final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    if (!init.node.has_attr("axis")) return invalid_argument("needs attribute axis");
    axis_ = init.attr_int("axis", 0);
    new_axis_ = init.attr_int("new_axis", 0) != 0;
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    const auto& items = seq->sequence_items();
    if (items.empty()) return invalid_argument("cannot concatenate an empty sequence");
    const Tensor& first = items[0];
    const auto rank = static_cast<int64_t>(first.rank());
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(axis_, new_axis_ ? rank + 1 : rank));
    Shape out_shape = first.shape();
    int64_t total = 0;
    for (const Tensor& t : items) {
      bool same = t.rank() == first.rank() && t.dtype() == first.dtype();
      for (size_t i = 0; same && i < t.rank(); ++i)
        if ((new_axis_ || static_cast<int64_t>(i) != axis) && t.dim(i) != first.dim(i)) same = false;
      if (!same) return invalid_argument("sequence items have incompatible shapes");
      total += new_axis_ ? 1 : t.dim(static_cast<size_t>(axis));
    }
    if (new_axis_) {
      Shape s;
      for (int64_t i = 0; i <= rank; ++i) {
        if (i == axis) s.push_back(total);
        if (i < rank) s.push_back(first.dim(static_cast<size_t>(i)));
      }
      out_shape = s;
    } else {
      out_shape[static_cast<size_t>(axis)] = total;
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, first.dtype(), out_shape));
    int64_t outer = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= out_shape[static_cast<size_t>(i)];
    const int64_t out_row = out_shape.numel() / std::max<int64_t>(outer, 1);
    const size_t es = dtype_size(first.dtype());
    int64_t col = 0;
    for (const Tensor& t : items) {
      const int64_t row = outer ? t.numel() / outer : 0;
      for (int64_t o = 0; o < outer; ++o) {
        if (first.dtype() == DType::kString) {
          for (int64_t k = 0; k < row; ++k) out->data<std::string>()[o * out_row + col + k] = t.data<std::string>()[o * row + k];
        } else {
          std::memcpy(static_cast<uint8_t*>(out->raw_data()) + static_cast<size_t>(o * out_row + col) * es,
                      static_cast<const uint8_t*>(t.raw_data()) + static_cast<size_t>(o * row) * es,
                      static_cast<size_t>(row) * es);
        }
      }
      col += row;
    }
    return Status::ok();
  }

 private:
  int64_t axis_ = 0;
  bool new_axis_ = false;
};

class SequenceMap final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    body_ = init.attr_graph("body");
    if (!body_) return invalid_argument("needs a body graph");
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    KILN_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    const size_t n = seq->sequence_items().size();
    std::vector<std::vector<Tensor>> outs(ctx.num_outputs());
    std::vector<Value> body_in(ctx.num_inputs());
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < ctx.num_inputs(); ++j) {
        const Value* v = ctx.input_value(j);
        if (!v) return invalid_argument("input ", j, " is missing");
        if (v->is_sequence()) {
          if (v->sequence_items().size() != n)
            return invalid_argument("input sequences have different lengths");
          body_in[j] = Value(v->sequence_items()[i]);
        } else {
          body_in[j] = *v;
        }
      }
      KILN_ASSIGN_OR_RETURN(std::vector<Value> r, ctx.subgraphs()->run(*body_, body_in));
      for (size_t k = 0; k < outs.size() && k < r.size(); ++k) {
        if (!r[k].is_tensor()) return invalid_argument("body output ", k, " is not a tensor");
        outs[k].push_back(owned(r[k].tensor()));
      }
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      const ir::ValueType& t = body_->value(body_->outputs[k]).type;
      DType dt = outs[k].empty() ? t.dtype : outs[k][0].dtype();
      ctx.set_output_value(k, Value::sequence(std::move(outs[k]), dt));
    }
    return Status::ok();
  }

 private:
  const ir::Graph* body_ = nullptr;
};

class OptionalOp final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    const Value* v = ctx.input_value(0);
    if (!v || v->is_none()) {
      ctx.set_output_value(0, Value::none());
    } else if (v->is_tensor()) {
      ctx.set_output_value(0, Value(owned(v->tensor())));
    } else {
      ctx.set_output_value(0, *v);
    }
    return Status::ok();
  }
};

class OptionalHasElement final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    const Value* v = ctx.input_value(0);
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kBool, Shape{}));
    out->data<bool>()[0] = v != nullptr && !v->is_none();
    return Status::ok();
  }
};

class OptionalGetElement final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    const Value* v = ctx.input_value(0);
    if (!v || v->is_none()) return invalid_argument("the optional input is empty");
    ctx.set_output_value(0, v->is_tensor() ? Value(owned(v->tensor())) : *v);
    return Status::ok();
  }
};

}  // namespace

void register_sequence_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "SequenceEmpty", .since_version = 11, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<SequenceEmpty>, .flags = 0});
  r.add({.domain = "", .op_type = "SequenceConstruct", .since_version = 11, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<SequenceConstruct>, .flags = 0});
  r.add({.domain = "", .op_type = "SequenceInsert", .since_version = 11, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<SequenceInsert>, .flags = 0});
  r.add({.domain = "", .op_type = "SequenceErase", .since_version = 11, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<SequenceErase>, .flags = 0});
  r.add({.domain = "", .op_type = "SequenceAt", .since_version = 11, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<SequenceAt>, .flags = 0});
  r.add({.domain = "", .op_type = "SequenceLength", .since_version = 11, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<SequenceLength>, .flags = 0});
  r.add({.domain = "", .op_type = "SplitToSequence", .since_version = 11, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<SplitToSequence>, .flags = 0});
  r.add({.domain = "", .op_type = "ConcatFromSequence", .since_version = 11, .until_version = 1000,
         .dtypes = kAllDTypes, .type_input = -1, .factory = make_kernel<ConcatFromSequence>, .flags = 0});
  r.add({.domain = "", .op_type = "SequenceMap", .since_version = 17, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<SequenceMap>, .flags = 0});
  r.add({.domain = "", .op_type = "Optional", .since_version = 15, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<OptionalOp>, .flags = 0});
  r.add({.domain = "", .op_type = "OptionalHasElement", .since_version = 15, .until_version = 1000,
         .dtypes = kAllDTypes, .type_input = -1, .factory = make_kernel<OptionalHasElement>, .flags = 0});
  r.add({.domain = "", .op_type = "OptionalGetElement", .since_version = 15, .until_version = 1000,
         .dtypes = kAllDTypes, .type_input = -1, .factory = make_kernel<OptionalGetElement>, .flags = 0});
}

}  // namespace kiln::kernels
