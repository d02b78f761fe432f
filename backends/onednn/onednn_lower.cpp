#include "onednn_lower.h"

#include <oneapi/dnnl/dnnl_types.h>

#include <cmath>
#include <map>

#include "onednn_claims.h"

namespace kiln_onednn {

using kiln::sdk::fail;
using kiln::sdk::Node;
using kiln::sdk::Value;

namespace {

class Lowerer {
 public:
  explicit Lowerer(Program& p) : p_(p) {}

  int32_t new_value(const std::vector<int64_t>& dims) {
    p_.dims.push_back(dims);
    return static_cast<int32_t>(p_.num_values++);
  }
  int32_t define(const Value& v) {
    int32_t id = new_value(v.dims());
    ids_[v.raw()] = id;
    return id;
  }
  int32_t constant(std::vector<int64_t> dims, std::vector<float> data) {
    Constant c;
    c.value = new_value(dims);
    c.dims = std::move(dims);
    c.data = std::move(data);
    p_.constants.push_back(std::move(c));
    return p_.constants.back().value;
  }
  // A value the node reads: computed in the partition, a partition input or a constant.
  int32_t use(const Node& n, const Value& v) {
    auto it = ids_.find(v.raw());
    if (it != ids_.end()) return it->second;
    if (!v.is_constant())
      fail(KILN_STATUS_INVALID_ARGUMENT, "node " + n.label() + " reads '" + v.name() + "', which is neither a partition input, a constant nor computed in the group");
    kiln::sdk::TensorView t = v.constant();
    if (t.dtype != KILN_DTYPE_FLOAT32) fail(KILN_STATUS_INVALID_ARGUMENT, "node " + n.label() + ": constant '" + v.name() + "' is not float32");
    int32_t id = constant(t.shape(), std::vector<float>(t.as<float>(), t.as<float>() + t.numel()));
    ids_[v.raw()] = id;
    return id;
  }
  std::vector<float> constant_data(const Node& n, const Value& v) {
    if (!v.is_constant()) fail(KILN_STATUS_INVALID_ARGUMENT, "node " + n.label() + ": '" + v.name() + "' must be constant");
    kiln::sdk::TensorView t = v.constant();
    return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
  }

  void lower(const Node& n);
  Program& p_;

 private:
  Op& emit(const Node& n, OpKind kind, int32_t alg, std::vector<int32_t> in) {
    Op op;
    op.kind = kind;
    op.alg = alg;
    op.in = std::move(in);
    op.out = define(n.output(0));
    p_.ops.push_back(std::move(op));
    return p_.ops.back();
  }
  void lower_conv(const Node& n, bool transpose);
  void lower_pool(const Node& n);
  void lower_gemm(const Node& n);
  void lower_binary(const Node& n);
  void lower_eltwise(const Node& n);
  void lower_reduce(const Node& n);
  std::map<const kiln_value_t*, int32_t> ids_;
};

int64_t norm_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

std::vector<int64_t> ints_or(const Node& n, const char* name, std::vector<int64_t> dflt) {
  kiln::sdk::Attribute a = n.find_attribute(name);
  return a && a.type() == KILN_ATTR_INTS ? a.as_ints() : dflt;
}

// Right/bottom padding that makes a window op produce the graph's output size
// (covers ceil_mode and auto_pad VALID).
int64_t end_pad(int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t begin, bool transposed) {
  if (transposed) return (in - 1) * s + (k - 1) * d + 1 - begin - out;
  return (out - 1) * s + (k - 1) * d + 1 - in - begin;
}

void Lowerer::lower_conv(const Node& n, bool transpose) {
  std::vector<int32_t> in = {use(n, n.input(0)), use(n, n.input(1))};
  if (n.num_inputs() > 2 && n.input(2)) in.push_back(use(n, n.input(2)));
  Op& op = emit(n, transpose ? OpKind::kDeconv : OpKind::kConv, dnnl_convolution_direct, in);
  const std::vector<int64_t> x = n.input(0).dims(), w = n.input(1).dims(), y = n.output(0).dims();
  auto s = ints_or(n, "strides", {1, 1}), d = ints_or(n, "dilations", {1, 1}), pads = ints_or(n, "pads", {0, 0, 0, 0});
  if (n.attr_string("auto_pad", "NOTSET") == "VALID") pads = {0, 0, 0, 0};
  std::vector<int64_t> k = {w[2], w[3]};
  op.ints = {n.attr_int("group", 1), s[0], s[1], d[0], d[1], pads[0], pads[1]};
  for (int i = 0; i < 2; ++i) op.ints.push_back(end_pad(x[2 + i], y[2 + i], k[i], s[i], d[i], pads[i], transpose));
}

void Lowerer::lower_pool(const Node& n) {
  const std::string t = n.op_type();
  const bool max = t.find("Max") != std::string::npos;
  int32_t alg = max ? dnnl_pooling_max : n.attr_int("count_include_pad", 0) ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
  Op& op = emit(n, OpKind::kPool, alg, {use(n, n.input(0))});
  const std::vector<int64_t> x = n.input(0).dims(), y = n.output(0).dims();
  std::vector<int64_t> k, s = {1, 1}, d = {1, 1}, pads = {0, 0, 0, 0};
  if (t.rfind("Global", 0) == 0) {
    k = {x[2], x[3]};
  } else {
    k = ints_or(n, "kernel_shape", {1, 1});
    s = ints_or(n, "strides", {1, 1});
    d = ints_or(n, "dilations", {1, 1});
    pads = ints_or(n, "pads", {0, 0, 0, 0});
    if (n.attr_string("auto_pad", "NOTSET") == "VALID") pads = {0, 0, 0, 0};
  }
  op.ints = {k[0], k[1], s[0], s[1], d[0], d[1], pads[0], pads[1]};
  for (int i = 0; i < 2; ++i) op.ints.push_back(end_pad(x[2 + i], y[2 + i], k[i], s[i], d[i], pads[i], false));
}

void Lowerer::lower_gemm(const Node& n) {
  const int64_t ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
  std::vector<int32_t> in = {use(n, n.input(0)), use(n, n.input(1))};
  const std::vector<int64_t> y = n.output(0).dims();
  std::vector<int32_t> post_value;
  if (n.num_inputs() > 2 && n.input(2)) {
    std::vector<float> c = constant_data(n, n.input(2));
    const float beta = n.attr_float("beta", 1.f);
    for (float& f : c) f *= beta;
    if (c.size() == 1) c.assign(static_cast<size_t>(y[1]), c[0]);
    if (static_cast<int64_t>(c.size()) == y[1]) in.push_back(constant({1, y[1]}, std::move(c)));
    else post_value.push_back(constant(n.input(2).dims(), std::move(c)));
  }
  Op& op = emit(n, OpKind::kMatMul, 0, in);
  op.ints = {ta, tb};
  for (int32_t v : post_value) op.post.push_back({PostKind::kBinary, dnnl_binary_add, 0.f, 0.f, v});
}

void Lowerer::lower_binary(const Node& n) {
  const std::string t = n.op_type();
  float c;
  if (t == "Pow") {
    constant_scalar(n.input(1), &c);
    if (c == 2.f) emit(n, OpKind::kEltwise, dnnl_eltwise_square, {use(n, n.input(0))}).floats = {0.f, 0.f};
    else if (c == 0.5f) emit(n, OpKind::kEltwise, dnnl_eltwise_sqrt, {use(n, n.input(0))}).floats = {0.f, 0.f};
    else emit(n, OpKind::kEltwise, dnnl_eltwise_pow, {use(n, n.input(0))}).floats = {1.f, c};
    return;
  }
  const bool c1 = constant_scalar(n.input(1), &c) && n.input(0).dims() == n.output(0).dims();
  if (c1 && t != "Max" && t != "Min") {
    float a = 1.f, b = 0.f;
    if (t == "Add") b = c;
    else if (t == "Sub") b = -c;
    else if (t == "Mul") a = c;
    else a = 1.f / c;
    emit(n, OpKind::kEltwise, dnnl_eltwise_linear, {use(n, n.input(0))}).floats = {a, b};
    return;
  }
  const bool c0 = constant_scalar(n.input(0), &c) && n.input(1).dims() == n.output(0).dims();
  if (c0 && (t == "Add" || t == "Mul" || t == "Sub")) {
    float a = t == "Mul" ? c : t == "Sub" ? -1.f : 1.f, b = t == "Mul" ? 0.f : c;
    emit(n, OpKind::kEltwise, dnnl_eltwise_linear, {use(n, n.input(1))}).floats = {a, b};
    return;
  }
  int32_t alg = t == "Add" ? dnnl_binary_add : t == "Sub" ? dnnl_binary_sub : t == "Mul" ? dnnl_binary_mul
              : t == "Div" ? dnnl_binary_div : t == "Max" ? dnnl_binary_max : dnnl_binary_min;
  std::vector<int32_t> in = {use(n, n.input(0)), use(n, n.input(1))};
  if (n.input(0).dims() != n.output(0).dims()) std::swap(in[0], in[1]);  // commutative (checked at claim)
  emit(n, OpKind::kBinary, alg, in);
}

void Lowerer::lower_eltwise(const Node& n) {
  const std::string t = n.op_type();
  int32_t x = use(n, n.input(0));
  if (t == "Identity") {
    emit(n, OpKind::kReshape, 0, {x});
    return;
  }
  if (t == "Erf") {
    emit(n, OpKind::kErf, 0, {x});
    return;
  }
  float a = 0.f, b = 0.f;
  int32_t alg = dnnl_eltwise_relu;
  if (t == "LeakyRelu") a = n.attr_float("alpha", 0.01f);
  else if (t == "Elu") alg = dnnl_eltwise_elu, a = n.attr_float("alpha", 1.f);
  else if (t == "Sigmoid") alg = dnnl_eltwise_logistic;
  else if (t == "Tanh") alg = dnnl_eltwise_tanh;
  else if (t == "Exp") alg = dnnl_eltwise_exp;
  else if (t == "Sqrt") alg = dnnl_eltwise_sqrt;
  else if (t == "Abs") alg = dnnl_eltwise_abs;
  else if (t == "Neg") alg = dnnl_eltwise_linear, a = -1.f;
  else if (t == "Softplus") alg = dnnl_eltwise_soft_relu;
  else if (t == "HardSwish") alg = dnnl_eltwise_hardswish;
  else if (t == "Clip") {
    alg = dnnl_eltwise_clip_v2;
    a = -INFINITY, b = INFINITY;
    if (n.opset() < 11) {
      a = n.attr_float("min", -INFINITY), b = n.attr_float("max", INFINITY);
    } else {
      if (n.num_inputs() > 1 && n.input(1)) constant_scalar(n.input(1), &a);
      if (n.num_inputs() > 2 && n.input(2)) constant_scalar(n.input(2), &b);
    }
    a = std::max(a, -3.0e38f);
    b = std::min(b, 3.0e38f);
  }
  emit(n, OpKind::kEltwise, alg, {x}).floats = {a, b};
}

void Lowerer::lower_reduce(const Node& n) {
  const std::string t = n.op_type();
  int32_t alg = t == "ReduceMean" ? dnnl_reduction_mean : t == "ReduceSum" ? dnnl_reduction_sum
              : t == "ReduceMax" ? dnnl_reduction_max : dnnl_reduction_min;
  Op& op = emit(n, OpKind::kReduce, alg, {use(n, n.input(0))});
  const int64_t r = n.input(0).rank();
  std::vector<int64_t> axes = ints_or(n, "axes", {});
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  op.ints = {n.attr_int("keepdims", 1)};
  for (int64_t a : axes) op.ints.push_back(norm_axis(a, r));
}

void Lowerer::lower(const Node& n) {
  const std::string t = n.op_type();
  const int64_t r = n.input(0).rank();
  if (t == "Conv" || t == "ConvTranspose") return lower_conv(n, t == "ConvTranspose");
  if (t.find("Pool") != std::string::npos) return lower_pool(n);
  if (t == "Gemm") return lower_gemm(n);
  if (t == "MatMul") {
    emit(n, OpKind::kMatMul, 0, {use(n, n.input(0)), use(n, n.input(1))}).ints = {0, 0};
  } else if (t == "BatchNormalization") {
    std::vector<int32_t> in;
    for (size_t i = 0; i < 5; ++i) in.push_back(use(n, n.input(i)));
    emit(n, OpKind::kBatchNorm, 0, in).floats = {n.attr_float("epsilon", 1e-5f)};
  } else if (t == "Softmax") {
    emit(n, OpKind::kSoftmax, 0, {use(n, n.input(0))}).ints = {norm_axis(n.attr_int("axis", n.opset() >= 13 ? -1 : 1), r)};
  } else if (t == "Transpose") {
    std::vector<int64_t> perm;
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
    emit(n, OpKind::kTranspose, 0, {use(n, n.input(0))}).ints = ints_or(n, "perm", perm);
  } else if (t == "Reshape" || t == "Flatten" || t == "Squeeze" || t == "Unsqueeze") {
    emit(n, OpKind::kReshape, 0, {use(n, n.input(0))});
  } else if (t == "Concat") {
    std::vector<int32_t> in;
    for (size_t i = 0; i < n.num_inputs(); ++i) in.push_back(use(n, n.input(i)));
    emit(n, OpKind::kConcat, 0, in).ints = {norm_axis(n.attr_int("axis", 0), r)};
  } else if (t == "LayerNormalization") {
    std::vector<int32_t> in = {use(n, n.input(0)), -1, -1};
    for (size_t i = 1; i < 3 && i < n.num_inputs(); ++i)
      if (n.input(i)) in[i] = use(n, n.input(i));
    emit(n, OpKind::kLayerNorm, 0, in).floats = {n.attr_float("epsilon", 1e-5f)};
  } else if (t.rfind("Reduce", 0) == 0) {
    lower_reduce(n);
  } else if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Max" || t == "Min" || t == "Pow") {
    lower_binary(n);
  } else {
    lower_eltwise(n);
  }
}

}  // namespace

Program lower_partition(const kiln::sdk::Graph& graph, const kiln::sdk::Partition& part) {
  Program p;
  Lowerer l(p);
  for (const Value& v : part.inputs) {
    if (v.dtype() != KILN_DTYPE_FLOAT32 || !v.is_static())
      fail(KILN_STATUS_INVALID_ARGUMENT, "partition input '" + v.name() + "' must be a float32 tensor of static shape");
    p.inputs.push_back(l.define(v));
  }
  for (size_t idx : part.nodes) {
    Node n = graph.node(idx);
    if (!n) fail(KILN_STATUS_OUT_OF_RANGE, "partition node " + std::to_string(idx) + " is not in the graph");
    std::string why = decline_reason(n);
    if (!why.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, "node " + n.label() + " is not one oneDNN runs: " + why);
    l.lower(n);
  }
  for (const Value& v : part.outputs) {
    if (v.is_constant() || !v.producer()) fail(KILN_STATUS_INVALID_ARGUMENT, "partition output '" + v.name() + "' is not computed by the group");
    p.outputs.push_back(l.use(v.producer(), v));
  }
  p.validate();
  fuse_program(p);
  p.validate();
  return p;
}

}  // namespace kiln_onednn
