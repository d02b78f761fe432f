// Gradient (ai.onnx.preview.training, opset 1): the partial derivatives of
// the graph value `y` with respect to the values named in `xs`, at the
// values given as the node's inputs (xs, then zs).
//
// At load, the nodes that compute y from xs, zs and constants are copied
// out of the graph and a portable kernel is made for each. At run time
// they are run forward on the node's inputs (so an input may differ from
// the graph's value of the same name, as the spec allows), then reverse-mode
// differentiation propagates dy (ones) back to xs with the rules below.
// Intermediate values are heap tensors: this kernel evaluates a subgraph,
// which the memory planner does not see.
//
// Differentiable ops: Add, Sub, Mul, Div (numpy broadcasting), Neg,
// Identity, Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Sum, and 2-D MatMul. A node
// on a path from an x to y with another op is rejected at load.
#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "kernels/default_registry.h"
#include "kernels/heap_allocator.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

const std::set<std::string>& differentiable_ops() {
  static const std::set<std::string> ops = {"Add",     "Sub",  "Mul", "Div", "Neg",  "Identity", "Relu",
                                            "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Sum",      "MatMul"};
  return ops;
}

// Calls f(out_index, a_index) for every element of `out`, with a_index the
// element of `a` (broadcast to out) it reads.
void for_each_broadcast(const Shape& out, const Shape& a, const std::function<void(int64_t, int64_t)>& f) {
  const std::vector<int64_t> sa = broadcast_strides(a, out);
  const size_t r = out.rank();
  std::vector<int64_t> idx(r, 0);
  const int64_t n = out.numel();
  int64_t ia = 0;
  for (int64_t o = 0; o < n; ++o) {
    f(o, ia);
    for (size_t d = r; d-- > 0;) {
      ia += sa[d];
      if (++idx[d] < out[d]) break;
      ia -= sa[d] * out[d];
      idx[d] = 0;
    }
  }
}

// Sums `g` (shaped like out) into the shape of `a` (numpy broadcasting backwards).
std::vector<double> unbroadcast(const std::vector<double>& g, const Shape& out, const Shape& a) {
  std::vector<double> r(static_cast<size_t>(a.numel()), 0.0);
  for_each_broadcast(out, a, [&](int64_t o, int64_t i) { r[static_cast<size_t>(i)] += g[static_cast<size_t>(o)]; });
  return r;
}

// One forward node: a copy of the graph node and its kernel.
struct Step {
  ir::Node node;
  std::unique_ptr<Kernel> kernel;
  bool on_path = false;  // depends on some x: gradients flow through it
};

class Gradient final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const ir::Node& node = init.node;
    const ir::Graph& graph = init.graph;
    const std::vector<std::string> xs = init.attr_strings("xs");
    const std::vector<std::string> zs = init.attr_strings("zs");
    const std::string y = init.attr_string("y", "");
    if (xs.empty() || y.empty()) return invalid_argument("needs attributes xs and y");
    if (node.inputs.size() != xs.size() + zs.size()) {
      return invalid_argument("has ", node.inputs.size(), " inputs, expected one per name in xs and zs (",
                              xs.size() + zs.size(), ")");
    }
    auto find = [&](const std::string& name, const char* what) -> Result<ir::ValueId> {
      const ir::ValueId id = graph.find_value(name);
      if (id == ir::kNoValue) return invalid_argument(what, " names '", name, "', not a value of the graph");
      return id;
    };
    for (const std::string& n : xs) {
      KILN_ASSIGN_OR_RETURN(ir::ValueId id, find(n, "xs"));
      leaves_.push_back(id);
    }
    num_xs_ = xs.size();
    for (const std::string& n : zs) {
      KILN_ASSIGN_OR_RETURN(ir::ValueId id, find(n, "zs"));
      leaves_.push_back(id);
    }
    KILN_ASSIGN_OR_RETURN(y_, find(y, "y"));

    // Depth-first from y to the leaves and constants; post-order is a
    // topological order of the nodes that compute y.
    const std::vector<int32_t> producer = graph.producers();
    std::vector<uint8_t> state(graph.nodes.size(), 0);  // 1 visiting, 2 done
    std::vector<int32_t> order;
    std::function<Status(ir::ValueId)> visit = [&](ir::ValueId v) -> Status {
      if (std::find(leaves_.begin(), leaves_.end(), v) != leaves_.end()) return Status::ok();
      if (const Tensor* c = graph.initializer(v)) {
        constants_.emplace(v, *c);
        return Status::ok();
      }
      const int32_t p = producer[static_cast<size_t>(v)];
      if (p < 0) {
        return invalid_argument("y '", y, "' depends on '", graph.value_name(v),
                                "', which is neither in xs or zs nor a constant");
      }
      if (state[static_cast<size_t>(p)] == 2) return Status::ok();
      if (state[static_cast<size_t>(p)] == 1) return invalid_argument("the graph has a cycle");
      state[static_cast<size_t>(p)] = 1;
      for (ir::ValueId in : graph.nodes[static_cast<size_t>(p)].inputs) {
        if (in != ir::kNoValue) KILN_RETURN_IF_ERROR(visit(in));
      }
      state[static_cast<size_t>(p)] = 2;
      order.push_back(p);
      return Status::ok();
    };
    KILN_RETURN_IF_ERROR(visit(y_));

    std::set<ir::ValueId> depends(leaves_.begin(), leaves_.begin() + static_cast<std::ptrdiff_t>(num_xs_));
    for (int32_t p : order) {
      const ir::Node& n = graph.nodes[static_cast<size_t>(p)];
      // The kernel may keep a reference to its node: build it in place.
      Step& step = steps_.emplace_back();
      step.node = n;
      for (ir::ValueId in : n.inputs) step.on_path |= in != ir::kNoValue && depends.count(in) != 0;
      if (step.on_path) {
        if (!differentiable_ops().count(n.op_type) || !n.domain.empty() || n.outputs.size() != 1) {
          return unimplemented("cannot differentiate through ", n.label(),
                               " (supported: Add, Sub, Mul, Div, Neg, Identity, Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Sum,"
                               " 2-D MatMul)");
        }
        depends.insert(n.outputs[0]);
      }
      for (const ir::Attribute& a : n.attributes) {
        if (a.g || !a.graphs.empty())
          return unimplemented("cannot evaluate ", n.label(), ", which has a subgraph");
      }
      std::vector<InputInfo> infos(n.inputs.size());
      std::vector<DType> dtypes(n.inputs.size(), DType::kUndefined);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (n.inputs[i] == ir::kNoValue) continue;
        infos[i].type = &graph.value(n.inputs[i]).type;
        infos[i].constant = graph.initializer(n.inputs[i]);
        dtypes[i] = infos[i].type->dtype;
      }
      int opset = n.opset;
      if (opset <= 0) {
        auto it = graph.opsets.find(n.domain);
        opset = it == graph.opsets.end() ? 0 : it->second;
      }
      std::string why;
      const KernelDef* def = default_registry().find(n.domain, n.op_type, opset, dtypes, &why);
      if (!def) return unimplemented("no kernel for ", n.label(), ": ", why);
      KernelInit sub{step.node, graph, infos, opset};
      KILN_ASSIGN_OR_RETURN(step.kernel, def->factory(sub));
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    std::unordered_map<ir::ValueId, Tensor> values = constants_;
    for (size_t i = 0; i < leaves_.size(); ++i) {
      if (!ctx.has_input(i) || !ctx.input_value(i)->is_tensor())
        return invalid_argument("input ", i, " must be a tensor");
      values[leaves_[i]] = ctx.input(i);
    }
    // Forward.
    HeapAllocator heap;
    for (const Step& s : steps_) {
      std::vector<Value> in(s.node.inputs.size()), out(s.node.outputs.size());
      std::vector<const Value*> in_ptrs(in.size(), nullptr);
      std::vector<Value*> out_ptrs(out.size(), nullptr);
      for (size_t i = 0; i < in.size(); ++i) {
        if (s.node.inputs[i] == ir::kNoValue) continue;
        auto it = values.find(s.node.inputs[i]);
        if (it == values.end()) return internal_error(s.node.label(), " has an input not computed");
        in[i] = Value(it->second);
        in_ptrs[i] = &in[i];
      }
      for (size_t i = 0; i < out.size(); ++i)
        if (s.node.outputs[i] != ir::kNoValue) out_ptrs[i] = &out[i];
      KernelContext sub(s.node, in_ptrs.data(), in_ptrs.size(), out_ptrs.data(), out_ptrs.size(), &heap, ctx.pool(),
                        ctx.subgraphs());
      Status st = s.kernel->compute(sub);
      if (!st.is_ok()) return std::move(st).with_context(s.node.label());
      for (size_t i = 0; i < out.size(); ++i) {
        if (!out_ptrs[i]) continue;
        if (!out[i].is_tensor()) return invalid_argument(s.node.label(), " did not produce a tensor");
        values[s.node.outputs[i]] = out[i].tensor();
      }
    }
    // Backward.
    std::unordered_map<ir::ValueId, std::vector<double>> grads;
    auto yit = values.find(y_);
    if (yit == values.end()) return internal_error("y was not computed");
    const Tensor& yt = yit->second;
    if (!dtype_is_float(yt.dtype())) return invalid_argument("y must be float, got ", dtype_name(yt.dtype()));
    grads[y_] = std::vector<double>(static_cast<size_t>(yt.numel()), 1.0);
    for (size_t k = steps_.size(); k-- > 0;) {
      const Step& s = steps_[k];
      if (!s.on_path) continue;
      auto it = grads.find(s.node.outputs[0]);
      if (it == grads.end()) continue;
      const std::vector<double> g = it->second;
      KILN_RETURN_IF_ERROR(backward(s.node, g, values, &grads));
    }
    for (size_t i = 0; i < num_xs_; ++i) {
      const Tensor& x = values.find(leaves_[i])->second;  // every leaf was bound above
      auto it = grads.find(leaves_[i]);
      std::vector<double> g = it == grads.end() ? std::vector<double>(static_cast<size_t>(x.numel()), 0.0) : it->second;
      DType dt = dtype_is_float(x.dtype()) ? x.dtype() : DType::kFloat32;
      KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(i, dt, x.shape()));
      visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, double>) {
          std::copy(g.begin(), g.end(), out->data<double>());
        } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
          for (size_t j = 0; j < g.size(); ++j) out->data<T>()[j] = static_cast<T>(static_cast<float>(g[j]));
        }
      });
    }
    return Status::ok();
  }

 private:
  // Adds dL/d(input) of one node to `grads`, given g = dL/d(output).
  Status backward(const ir::Node& n, const std::vector<double>& g,
                  const std::unordered_map<ir::ValueId, Tensor>& values,
                  std::unordered_map<ir::ValueId, std::vector<double>>* grads) const {
    // Every input and the output of a step were bound by the forward pass.
    std::vector<const Tensor*> ins;
    for (ir::ValueId id : n.inputs) {
      auto it = values.find(id);
      if (it == values.end()) return internal_error(n.label(), ": Gradient lost an input value");
      ins.push_back(&it->second);
    }
    auto out_it = values.find(n.outputs[0]);
    if (out_it == values.end()) return internal_error(n.label(), ": Gradient lost an output value");
    const Tensor& yt = out_it->second;
    const Shape& ys = yt.shape();
    KILN_ASSIGN_OR_RETURN(std::vector<double> yv, to_double_vector(yt));
    auto accumulate = [&](ir::ValueId id, std::vector<double> d) {
      auto it = grads->find(id);
      if (it == grads->end()) {
        grads->emplace(id, std::move(d));
        return;
      }
      std::vector<double>& acc = it->second;
      for (size_t i = 0; i < acc.size() && i < d.size(); ++i) acc[i] += d[i];
    };
    auto input = [&](size_t i) -> Result<std::vector<double>> { return to_double_vector(*ins[i]); };
    auto shape = [&](size_t i) -> const Shape& { return ins[i]->shape(); };
    const std::string& op = n.op_type;
    const size_t ng = g.size();

    if (op == "Add" || op == "Sub" || op == "Sum") {
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        std::vector<double> d = unbroadcast(g, ys, shape(i));
        if (op == "Sub" && i == 1)
          for (double& v : d) v = -v;
        accumulate(n.inputs[i], std::move(d));
      }
      return Status::ok();
    }
    if (op == "Mul" || op == "Div") {
      KILN_ASSIGN_OR_RETURN(auto a, input(0));
      KILN_ASSIGN_OR_RETURN(auto b, input(1));
      std::vector<double> ga(ng), gb(ng);
      std::vector<double> av(ng), bv(ng);
      for_each_broadcast(ys, shape(0), [&](int64_t o, int64_t i) { av[static_cast<size_t>(o)] = a[static_cast<size_t>(i)]; });
      for_each_broadcast(ys, shape(1), [&](int64_t o, int64_t i) { bv[static_cast<size_t>(o)] = b[static_cast<size_t>(i)]; });
      for (size_t o = 0; o < ng; ++o) {
        if (op == "Mul") {
          ga[o] = g[o] * bv[o];
          gb[o] = g[o] * av[o];
        } else {
          ga[o] = g[o] / bv[o];
          gb[o] = -g[o] * av[o] / (bv[o] * bv[o]);
        }
      }
      accumulate(n.inputs[0], unbroadcast(ga, ys, shape(0)));
      accumulate(n.inputs[1], unbroadcast(gb, ys, shape(1)));
      return Status::ok();
    }
    if (op == "MatMul") {
      if (shape(0).rank() != 2 || shape(1).rank() != 2)
        return unimplemented(n.label(), ": Gradient supports MatMul of 2-D operands only");
      KILN_ASSIGN_OR_RETURN(auto a, input(0));
      KILN_ASSIGN_OR_RETURN(auto b, input(1));
      const int64_t m = shape(0)[0], kk = shape(0)[1], nn = shape(1)[1];
      std::vector<double> ga(static_cast<size_t>(m * kk), 0.0), gb(static_cast<size_t>(kk * nn), 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < kk; ++p)
          for (int64_t j = 0; j < nn; ++j) {
            const double gij = g[static_cast<size_t>(i * nn + j)];
            ga[static_cast<size_t>(i * kk + p)] += gij * b[static_cast<size_t>(p * nn + j)];
            gb[static_cast<size_t>(p * nn + j)] += a[static_cast<size_t>(i * kk + p)] * gij;
          }
      accumulate(n.inputs[0], std::move(ga));
      accumulate(n.inputs[1], std::move(gb));
      return Status::ok();
    }
    // Unary ops: dx = g * f'(x), written with x or y = f(x).
    KILN_ASSIGN_OR_RETURN(auto x, input(0));
    std::vector<double> d(ng);
    for (size_t i = 0; i < ng; ++i) {
      double f = 1;
      if (op == "Neg") f = -1;
      else if (op == "Identity") f = 1;
      else if (op == "Relu") f = x[i] > 0 ? 1 : 0;
      else if (op == "Sigmoid") f = yv[i] * (1 - yv[i]);
      else if (op == "Tanh") f = 1 - yv[i] * yv[i];
      else if (op == "Exp") f = yv[i];
      else if (op == "Log") f = 1 / x[i];
      else if (op == "Sqrt") f = 0.5 / yv[i];
      else return unimplemented(n.label(), ": no gradient rule for ", op);
      d[i] = g[i] * f;
    }
    accumulate(n.inputs[0], std::move(d));
    return Status::ok();
  }

  std::vector<ir::ValueId> leaves_;  // xs then zs
  size_t num_xs_ = 0;
  ir::ValueId y_ = ir::kNoValue;
  std::unordered_map<ir::ValueId, Tensor> constants_;
  std::deque<Step> steps_;  // deque: kernels may keep references to their node
};

}  // namespace

void register_gradient_op(KernelRegistry& r) {
  r.add({.domain = "ai.onnx.preview.training", .op_type = "Gradient", .since_version = 1, .until_version = 1000,
         .dtypes = kAllDTypes, .type_input = -1, .factory = make_kernel<Gradient>, .flags = 0});
}

}  // namespace kiln::kernels
