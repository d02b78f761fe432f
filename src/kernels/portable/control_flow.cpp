// Control flow: If, Loop, Scan (opset 8 and 9+). Bodies run through the
// context's SubgraphRunner, which binds outer-scope values.
#include <algorithm>
#include <cstring>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

// Copies `n` elements of `dtype` (strings by assignment).
void copy_elements(DType dtype, const void* src, void* dst, int64_t n) {
  if (n <= 0) return;
  if (dtype == DType::kString) {
    const auto* s = static_cast<const std::string*>(src);
    auto* d = static_cast<std::string*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(dtype));
  }
}

// The slice t[..., index, ...] along `axis` (that axis removed), as an owned tensor.
Tensor slice_along(const Tensor& t, int64_t axis, int64_t index) {
  Shape out_shape;
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < t.rank(); ++i) {
    if (static_cast<int64_t>(i) < axis) outer *= t.dim(i);
    if (static_cast<int64_t>(i) > axis) inner *= t.dim(i);
    if (static_cast<int64_t>(i) != axis) out_shape.push_back(t.dim(i));
  }
  Tensor out = Tensor::allocate(t.dtype(), out_shape);
  const int64_t d = t.dim(static_cast<size_t>(axis));
  const size_t es = dtype_size(t.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    const auto* src = static_cast<const uint8_t*>(t.raw_data()) + static_cast<size_t>((o * d + index) * inner) * es;
    auto* dst = static_cast<uint8_t*>(out.raw_data()) + static_cast<size_t>(o * inner) * es;
    copy_elements(t.dtype(), src, dst, inner);
  }
  return out;
}

// Writes `item` as position `index` along a new `axis` of `out` (K slots there).
void place_along(const Tensor& item, int64_t axis, int64_t index, Tensor* out) {
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < item.rank(); ++i) {
    if (static_cast<int64_t>(i) < axis) outer *= item.dim(i);
    else inner *= item.dim(i);
  }
  const int64_t k = out->dim(static_cast<size_t>(axis));
  const size_t es = dtype_size(item.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    const auto* src = static_cast<const uint8_t*>(item.raw_data()) + static_cast<size_t>(o * inner) * es;
    auto* dst = static_cast<uint8_t*>(out->raw_data()) + static_cast<size_t>((o * k + index) * inner) * es;
    copy_elements(item.dtype(), src, dst, inner);
  }
}

Shape insert_dim(const Shape& s, int64_t axis, int64_t d) {
  Shape out;
  for (size_t i = 0; i <= s.rank(); ++i) {
    if (static_cast<int64_t>(i) == axis) out.push_back(d);
    if (i < s.rank()) out.push_back(s[i]);
  }
  return out;
}

// Stacks same-shaped tensors along a new `axis` (order reversed if asked).
Result<Tensor> stack(const std::vector<Tensor>& items, int64_t axis, bool reverse) {
  const Tensor& first = items.front();
  for (const Tensor& t : items) {
    if (t.shape() != first.shape() || t.dtype() != first.dtype()) {
      return invalid_argument("scan output slices differ in shape or dtype (",
                              first.shape().to_string(), " vs ", t.shape().to_string(), ")");
    }
  }
  const auto k = static_cast<int64_t>(items.size());
  Tensor out = Tensor::allocate(first.dtype(), insert_dim(first.shape(), axis, k));
  for (int64_t i = 0; i < k; ++i) place_along(items[static_cast<size_t>(i)], axis, reverse ? k - 1 - i : i, &out);
  return out;
}

// An empty [0, ...] tensor typed from a body output declaration.
Tensor empty_scan_output(const ir::ValueType& t) {
  Shape s{0};
  if (t.is_tensor() && t.has_shape)
    for (const ir::Dim& d : t.dims) s.push_back(d.known() ? d.value : 0);
  DType dt = t.dtype == DType::kUndefined ? DType::kFloat32 : t.dtype;
  return Tensor::allocate(dt, s);
}

bool truthy(const Tensor& t) {
  if (t.numel() < 1) return false;
  if (t.dtype() == DType::kBool) return t.data<bool>()[0];
  auto v = to_int64_vector(t);
  return v.ok() && (*v)[0] != 0;
}

class IfKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    then_ = init.attr_graph("then_branch");
    else_ = init.attr_graph("else_branch");
    if (!then_ || !else_) return invalid_argument("needs then_branch and else_branch graphs");
    return Status::ok();
  }
  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.input_value(0)->is_tensor())
      return invalid_argument("input 0 (cond) is missing");
    const ir::Graph* branch = truthy(ctx.input(0)) ? then_ : else_;
    KILN_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.subgraphs()->run(*branch, {}));
    if (outs.size() < ctx.num_outputs()) {
      return invalid_argument("branch produced ", outs.size(), " outputs, the node has ",
                              ctx.num_outputs());
    }
    for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output_value(i, std::move(outs[i]));
    return Status::ok();
  }

 private:
  const ir::Graph* then_ = nullptr;
  const ir::Graph* else_ = nullptr;
};

class LoopKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    body_ = init.attr_graph("body");
    if (!body_) return invalid_argument("needs a body graph");
    const size_t n_carried = init.node.inputs.size() >= 2 ? init.node.inputs.size() - 2 : 0;
    if (body_->inputs.size() != n_carried + 2 || body_->outputs.size() < n_carried + 1) {
      return invalid_argument("body has ", body_->inputs.size(), " inputs and ",
                              body_->outputs.size(), " outputs for ", n_carried, " loop-carried values");
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    int64_t max_trips = INT64_MAX;
    if (ctx.has_input(0)) {
      KILN_ASSIGN_OR_RETURN(auto m, to_int64_vector(ctx.input(0)));
      if (m.empty()) return invalid_argument("input M is empty");
      max_trips = m[0];
    }
    bool cond = ctx.has_input(1) ? truthy(ctx.input(1)) : true;
    const size_t n_carried = ctx.num_inputs() >= 2 ? ctx.num_inputs() - 2 : 0;
    const size_t n_scan = body_->outputs.size() - 1 - n_carried;

    std::vector<Value> body_in(2 + n_carried);
    for (size_t i = 0; i < n_carried; ++i) {
      const Value* v = ctx.input_value(2 + i);
      body_in[2 + i] = v ? *v : Value::none();
    }
    std::vector<std::vector<Tensor>> scans(n_scan);
    for (int64_t iter = 0; iter < max_trips && cond; ++iter) {
      body_in[0] = Value(Tensor::scalar<int64_t>(iter));
      body_in[1] = Value(Tensor::scalar<bool>(cond));
      KILN_ASSIGN_OR_RETURN(std::vector<Value> out, ctx.subgraphs()->run(*body_, body_in));
      if (!out[0].is_tensor()) return invalid_argument("body condition output is not a tensor");
      cond = truthy(out[0].tensor());
      for (size_t i = 0; i < n_carried; ++i) body_in[2 + i] = std::move(out[1 + i]);
      for (size_t k = 0; k < n_scan; ++k) {
        Value& s = out[1 + n_carried + k];
        if (!s.is_tensor()) return invalid_argument("scan output ", k, " is not a tensor");
        scans[k].push_back(std::move(s.tensor()));
      }
    }
    for (size_t i = 0; i < n_carried; ++i) ctx.set_output_value(i, std::move(body_in[2 + i]));
    for (size_t k = 0; k < n_scan; ++k) {
      if (scans[k].empty()) {
        ctx.set_output_value(n_carried + k,
                             Value(empty_scan_output(body_->value(body_->outputs[1 + n_carried + k]).type)));
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Tensor t, stack(scans[k], 0, false));
      ctx.set_output_value(n_carried + k, Value(std::move(t)));
    }
    return Status::ok();
  }

 private:
  const ir::Graph* body_ = nullptr;
};

// Scan over tensors already sliced to one batch entry (opset 9+ semantics).
struct ScanSpec {
  const ir::Graph* body = nullptr;
  int64_t num_scan_inputs = 0;
  std::vector<int64_t> input_axes, input_dirs, output_axes, output_dirs;
};

Status run_scan(KernelContext& ctx, const ScanSpec& spec, const std::vector<Value>& states_in,
                const std::vector<Tensor>& scan_in, int64_t seq_len_limit, std::vector<Value>* states_out,
                std::vector<Tensor>* scan_out) {
  const size_t n_state = states_in.size();
  const size_t m = scan_in.size();
  const size_t k_out = spec.body->outputs.size() - n_state;
  int64_t len = -1;
  std::vector<int64_t> axes(m);
  for (size_t j = 0; j < m; ++j) {
    int64_t a = j < spec.input_axes.size() ? spec.input_axes[j] : 0;
    KILN_ASSIGN_OR_RETURN(axes[j], normalize_axis(a, static_cast<int64_t>(scan_in[j].rank())));
    int64_t l = scan_in[j].dim(static_cast<size_t>(axes[j]));
    if (len >= 0 && l != len) return invalid_argument("scan inputs have different lengths");
    len = l;
  }
  if (len < 0) len = 0;
  if (seq_len_limit >= 0) len = std::min(len, seq_len_limit);
  std::vector<Value> body_in(n_state + m);
  for (size_t i = 0; i < n_state; ++i) body_in[i] = states_in[i];
  std::vector<std::vector<Tensor>> slices(k_out);
  for (int64_t t = 0; t < len; ++t) {
    for (size_t j = 0; j < m; ++j) {
      bool rev = j < spec.input_dirs.size() && spec.input_dirs[j] == 1;
      body_in[n_state + j] = Value(slice_along(scan_in[j], axes[j], rev ? len - 1 - t : t));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Value> out, ctx.subgraphs()->run(*spec.body, body_in));
    for (size_t i = 0; i < n_state; ++i) body_in[i] = std::move(out[i]);
    for (size_t k = 0; k < k_out; ++k) {
      if (!out[n_state + k].is_tensor()) return invalid_argument("scan output is not a tensor");
      slices[k].push_back(std::move(out[n_state + k].tensor()));
    }
  }
  states_out->assign(body_in.begin(), body_in.begin() + static_cast<std::ptrdiff_t>(n_state));
  scan_out->clear();
  for (size_t k = 0; k < k_out; ++k) {
    if (slices[k].empty()) {
      scan_out->push_back(empty_scan_output(spec.body->value(spec.body->outputs[n_state + k]).type));
      continue;
    }
    int64_t a = k < spec.output_axes.size() ? spec.output_axes[k] : 0;
    KILN_ASSIGN_OR_RETURN(a, normalize_axis(a, static_cast<int64_t>(slices[k][0].rank()) + 1));
    bool rev = k < spec.output_dirs.size() && spec.output_dirs[k] == 1;
    KILN_ASSIGN_OR_RETURN(Tensor s, stack(slices[k], a, rev));
    scan_out->push_back(std::move(s));
  }
  return Status::ok();
}

class ScanKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    spec_.body = init.attr_graph("body");
    if (!spec_.body) return invalid_argument("needs a body graph");
    spec_.num_scan_inputs = init.attr_int("num_scan_inputs", -1);
    if (spec_.num_scan_inputs < 0) return invalid_argument("needs num_scan_inputs");
    opset8_ = init.opset < 9;
    spec_.input_axes = init.attr_ints("scan_input_axes");
    spec_.input_dirs = opset8_ ? init.attr_ints("directions") : init.attr_ints("scan_input_directions");
    spec_.output_axes = init.attr_ints("scan_output_axes");
    spec_.output_dirs = init.attr_ints("scan_output_directions");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const size_t first = opset8_ ? 1 : 0;  // opset 8: input 0 is sequence_lens
    const size_t n_in = ctx.num_inputs() - first;
    const auto m = static_cast<size_t>(spec_.num_scan_inputs);
    if (m > n_in) return invalid_argument("num_scan_inputs exceeds the inputs");
    const size_t n_state = n_in - m;
    if (spec_.body->outputs.size() < n_state)
      return invalid_argument("the body has ", spec_.body->outputs.size(), " outputs, fewer than the ", n_state, " states");
    for (size_t i = first; i < ctx.num_inputs(); ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
    if (!opset8_) {
      std::vector<Value> states;
      std::vector<Tensor> scans;
      for (size_t i = 0; i < n_state; ++i) states.push_back(*ctx.input_value(i));
      for (size_t j = 0; j < m; ++j) scans.push_back(ctx.input(n_state + j));
      std::vector<Value> st_out;
      std::vector<Tensor> sc_out;
      KILN_RETURN_IF_ERROR(run_scan(ctx, spec_, states, scans, -1, &st_out, &sc_out));
      for (size_t i = 0; i < st_out.size(); ++i) ctx.set_output_value(i, std::move(st_out[i]));
      for (size_t k = 0; k < sc_out.size(); ++k) ctx.set_output_value(n_state + k, Value(std::move(sc_out[k])));
      return Status::ok();
    }
    // Opset 8: every input has a leading batch dim; scan axis is 1 (0 after slicing the batch).
    for (size_t i = first; i < ctx.num_inputs(); ++i)
      if (ctx.input(i).rank() == 0) return invalid_argument("input ", i, " has no batch dimension");
    const int64_t batch = ctx.input(first).dim(0);
    for (size_t i = first + 1; i < ctx.num_inputs(); ++i)  // each is sliced per batch entry
      if (ctx.input(i).dim(0) != batch)
        return invalid_argument("input ", i, " has batch ", ctx.input(i).dim(0), ", input ", first, " has ", batch);
    if (batch == 0) {  // nothing to run: states pass through, scan outputs are [0, len, ...]
      const int64_t len = m > 0 && ctx.input(first + n_state).rank() > 1 ? ctx.input(first + n_state).dim(1) : 0;
      for (size_t i = 0; i < n_state; ++i) ctx.set_output_value(i, *ctx.input_value(first + i));
      for (size_t k = n_state; k < spec_.body->outputs.size(); ++k) {
        const Tensor e = empty_scan_output(spec_.body->value(spec_.body->outputs[k]).type);  // [0, ...]
        Shape s{0, len};
        for (size_t d = 1; d < e.rank(); ++d) s.push_back(e.dim(d));
        ctx.set_output_value(k, Value(Tensor::allocate(e.dtype(), s)));
      }
      return Status::ok();
    }
    std::vector<int64_t> lens;
    if (ctx.has_input(0)) {
      KILN_ASSIGN_OR_RETURN(lens, to_int64_vector(ctx.input(0)));
    }
    std::vector<std::vector<Tensor>> state_items(n_state), scan_items;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Value> states;
      std::vector<Tensor> scans;
      for (size_t i = 0; i < n_state; ++i) states.emplace_back(slice_along(ctx.input(first + i), 0, b));
      for (size_t j = 0; j < m; ++j) scans.push_back(slice_along(ctx.input(first + n_state + j), 0, b));
      std::vector<Value> st_out;
      std::vector<Tensor> sc_out;
      int64_t limit = static_cast<size_t>(b) < lens.size() ? lens[static_cast<size_t>(b)] : -1;
      KILN_RETURN_IF_ERROR(run_scan(ctx, spec_, states, scans, limit, &st_out, &sc_out));
      for (size_t i = 0; i < n_state; ++i) state_items[i].push_back(st_out[i].tensor());
      if (scan_items.empty()) scan_items.resize(sc_out.size());
      for (size_t k = 0; k < sc_out.size(); ++k) scan_items[k].push_back(std::move(sc_out[k]));
    }
    for (size_t i = 0; i < n_state; ++i) {
      KILN_ASSIGN_OR_RETURN(Tensor t, stack(state_items[i], 0, false));
      ctx.set_output_value(i, Value(std::move(t)));
    }
    for (size_t k = 0; k < scan_items.size(); ++k) {
      KILN_ASSIGN_OR_RETURN(Tensor t, stack(scan_items[k], 0, false));
      ctx.set_output_value(n_state + k, Value(std::move(t)));
    }
    return Status::ok();
  }

 private:
  ScanSpec spec_;
  bool opset8_ = false;
};

}  // namespace

void register_control_flow_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "If", .since_version = 1, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<IfKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Loop", .since_version = 1, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<LoopKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Scan", .since_version = 8, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = -1, .factory = make_kernel<ScanKernel>, .flags = 0});
}

}  // namespace kiln::kernels
