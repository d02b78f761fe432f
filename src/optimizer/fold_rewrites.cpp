// Phase A rewrite that folds constant arithmetic into the node before it:
// BatchNormalization into Conv or ConvTranspose.
#include <cmath>

#include "optimizer/graph_uses.h"
#include "optimizer/passes.h"

namespace kiln::optimizer {

namespace {

bool is_onnx(const ir::Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

// A float32 constant of shape [m], or null.
const float* channel_vector(const ConstantMap& constants, ir::ValueId v, int64_t m) {
  const Tensor* t = find_constant(constants, v);
  if (!t || t->dtype() != DType::kFloat32 || t->rank() != 1 || t->dim(0) != m) return nullptr;
  return t->data<float>();
}

// The live, eligible node producing `v`, when it is `op` and `v` has no other reader.
ir::Node* single_use_producer(GraphRewrite& rw, const GraphUses& uses, ir::ValueId v, const char* op) {
  const int32_t pi = uses.producer(v);
  if (pi < 0 || rw.removed[static_cast<size_t>(pi)] || !rw.eligible[static_cast<size_t>(pi)]) return nullptr;
  ir::Node& p = rw.g.nodes[static_cast<size_t>(pi)];
  if (!is_onnx(p, op) || !uses.only_read_once(v)) return nullptr;
  return &p;
}

// BatchNormalization in inference form with one output.
bool inference_batchnorm(const ir::Node& bn) {
  if (bn.opset < 7 || bn.inputs.size() != 5 || !bn.has_output(0)) return false;
  for (size_t i = 1; i < bn.outputs.size(); ++i)
    if (bn.outputs[i] != ir::kNoValue) return false;
  auto training = bn.attr_int("training_mode", 0);
  auto spatial = bn.attr_int("spatial", 1);
  return training.is_ok() && *training == 0 && spatial.is_ok() && (*spatial == 1 || bn.opset >= 9);
}

}  // namespace

int fold_conv_batchnorm(GraphRewrite& rw) {
  ir::Graph& g = rw.g;
  const GraphUses uses(g, rw.removed);
  int count = 0;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (!rw.eligible[ni] || rw.removed[ni] || !is_onnx(g.nodes[ni], "BatchNormalization")) continue;
    const ir::Node& bn = g.nodes[ni];
    if (!inference_batchnorm(bn)) continue;
    ir::Node* conv = single_use_producer(rw, uses, bn.inputs[0], "Conv");
    if (!conv) conv = single_use_producer(rw, uses, bn.inputs[0], "ConvTranspose");
    if (!conv || !conv->has_input(1)) continue;
    const Tensor* w = find_constant(rw.constants, conv->inputs[1]);
    if (!w || w->dtype() != DType::kFloat32 || w->rank() < 3 || w->dim(0) == 0 || w->dim(1) == 0) continue;
    // Output channel c's weights: Conv W[c, ...]; ConvTranspose W[g * C/g + i, j, ...]
    // for c = g * (M/g) + j (its W is [C, M/group, k...]).
    const bool transposed = conv->op_type == "ConvTranspose";
    auto group = conv->attr_int("group", 1);
    if (!group.is_ok() || *group < 1 || (transposed && w->dim(0) % *group != 0)) continue;
    const int64_t m = transposed ? w->dim(1) * *group : w->dim(0);
    const int64_t ksize = w->numel() / (w->dim(0) * w->dim(1));
    auto channel_of = [&](int64_t flat) {  // the output channel a flat W index belongs to
      if (!transposed) return flat / (w->numel() / m);
      const int64_t row = flat / (w->dim(1) * ksize), j = (flat / ksize) % w->dim(1);
      return row / (w->dim(0) / *group) * w->dim(1) + j;
    };
    const float* b = nullptr;
    if (conv->has_input(2) && !(b = channel_vector(rw.constants, conv->inputs[2], m))) continue;
    const float* scale = channel_vector(rw.constants, bn.inputs[1], m);
    const float* shift = channel_vector(rw.constants, bn.inputs[2], m);
    const float* mean = channel_vector(rw.constants, bn.inputs[3], m);
    const float* var = channel_vector(rw.constants, bn.inputs[4], m);
    auto eps = bn.attr_float("epsilon", 1e-5f);
    if (!scale || !shift || !mean || !var || !eps.is_ok()) continue;
    // y = (conv(x, W) + B - mean) * s + shift, s = scale / sqrt(var + eps).
    Tensor w2 = Tensor::allocate(DType::kFloat32, w->shape());
    Tensor b2 = Tensor::allocate(DType::kFloat32, Shape{m});
    const float* wd = w->data<float>();
    float* w2d = w2.data<float>();
    float* b2d = b2.data<float>();
    std::vector<double> s(static_cast<size_t>(m));
    for (int64_t c = 0; c < m; ++c) {
      s[static_cast<size_t>(c)] = static_cast<double>(scale[c]) / std::sqrt(static_cast<double>(var[c]) + static_cast<double>(*eps));
      b2d[c] = static_cast<float>(((b ? b[c] : 0.0) - mean[c]) * s[static_cast<size_t>(c)] + shift[c]);
    }
    for (int64_t i = 0; i < w->numel(); ++i) w2d[i] = static_cast<float>(wd[i] * s[static_cast<size_t>(channel_of(i))]);
    const std::string base = conv->name.empty() ? g.value_name(bn.outputs[0]) : conv->name;
    const ir::ValueId wid = add_constant(g, rw.constants, base + "_W_bn", std::move(w2));
    const ir::ValueId bid = add_constant(g, rw.constants, base + "_B_bn", std::move(b2));
    conv->inputs = {conv->inputs[0], wid, bid};
    conv->outputs = {bn.outputs[0]};
    rw.removed[ni] = 1;
    ++count;
  }
  return count;
}

}  // namespace kiln::optimizer
