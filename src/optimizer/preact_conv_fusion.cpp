// Phase B: BatchNormalization + Relu + pointwise Conv as kiln::PreActivationConv
// (fusion_patterns.h; the kernel: src/kernels/portable/conv_preact.h).
#include <algorithm>

#include "optimizer/fusion_patterns.h"
#include "optimizer/matcher.h"

namespace kiln::optimizer {

namespace {

// A float32 vector constant of `n` values.
bool channel_constant(const ConstantMap& constants, ir::ValueId v, int64_t n) {
  const Tensor* t = find_constant(constants, v);
  return t && t->dtype() == DType::kFloat32 && t->rank() == 1 && t->dim(0) == n;
}

// All of an int-list attribute equal to `want` (absent counts as equal).
bool ints_all(const ir::Node& n, const char* name, int64_t want) {
  auto v = n.attr_ints(name);
  return v.is_ok() && std::all_of(v->begin(), v->end(), [&](int64_t x) { return x == want; });
}

// A Conv that is 1x1, stride 1, unpadded, group 1, with constant W of C inputs.
bool pointwise_conv(const ConstantMap& constants, const ir::Node& conv, int64_t c) {
  if (!conv.domain.empty() || conv.op_type != "Conv" || !conv.has_output(0) || conv.outputs.size() != 1 ||
      conv.inputs.size() < 2 || conv.inputs.size() > 3)
    return false;
  const Tensor* w = find_constant(constants, conv.inputs[1]);
  if (!w || w->dtype() != DType::kFloat32 || w->rank() < 3 || w->dim(1) != c) return false;
  for (size_t d = 2; d < w->rank(); ++d)
    if (w->dim(d) != 1) return false;
  auto group = conv.attr_int("group", 1);
  auto pad = conv.attr_string("auto_pad", "NOTSET");
  return group.is_ok() && *group == 1 && pad.is_ok() && (*pad == "NOTSET" || *pad == "VALID") &&
         ints_all(conv, "strides", 1) && ints_all(conv, "pads", 0);
}

}  // namespace

void match_preact_conv(const ir::Graph& g, const ConstantMap& constants, const GraphUses& uses,
                       const std::vector<uint8_t>& eligible, const std::vector<uint8_t>& used, size_t ni,
                       std::vector<Fusion>* out) {
  const ir::Node& bn = g.nodes[ni];
  if (!bn.domain.empty() || bn.op_type != "BatchNormalization" || bn.inputs.size() != 5 || !bn.has_output(0)) return;
  for (size_t o = 1; o < bn.outputs.size(); ++o)
    if (bn.has_output(o)) return;  // training outputs
  auto training = bn.attr_int("training_mode", 0);
  auto spatial = bn.attr_int("spatial", 1);
  if (!training.is_ok() || *training != 0 || !spatial.is_ok() || *spatial != 1) return;
  const ir::ValueId x = bn.inputs[0];
  if (x < 0 || !g.value(x).type.is_tensor() || g.value(x).type.dtype != DType::kFloat32) return;
  const ir::ValueType& xt = g.value(x).type;
  if (!xt.has_shape || xt.dims.size() < 3 || !xt.dims[1].known()) return;
  const int64_t c = xt.dims[1].value;
  for (size_t i = 1; i < 5; ++i)
    if (!channel_constant(constants, bn.inputs[i], c)) return;
  auto free = [&](int32_t r) { return r >= 0 && eligible[static_cast<size_t>(r)] && !used[static_cast<size_t>(r)]; };
  if (!uses.only_read_once(bn.outputs[0]) || !free(uses.readers(bn.outputs[0])[0])) return;
  const int32_t ri = uses.readers(bn.outputs[0])[0];
  const ir::Node& relu = g.nodes[static_cast<size_t>(ri)];
  if (!relu.domain.empty() || relu.op_type != "Relu" || !relu.has_output(0)) return;
  if (!uses.only_read_once(relu.outputs[0]) || !free(uses.readers(relu.outputs[0])[0])) return;
  const int32_t ci = uses.readers(relu.outputs[0])[0];
  const ir::Node& conv = g.nodes[static_cast<size_t>(ci)];
  if (!pointwise_conv(constants, conv, c) || conv.inputs[0] != relu.outputs[0]) return;
  Fusion f;
  f.name = "batchnorm+relu+conv";
  f.replaces = {ni, static_cast<size_t>(ri), static_cast<size_t>(ci)};
  ir::ValueId result = conv.outputs[0];
  auto e = bn.attr_float("epsilon", 1e-5f);
  if (!e.is_ok()) return;
  f.node = conv;
  f.node.domain = "kiln";
  f.node.op_type = "PreActivationConv";
  f.node.opset = 1;
  f.node.inputs = {x, conv.inputs[1], conv.inputs.size() > 2 ? conv.inputs[2] : ir::kNoValue,
                   bn.inputs[1], bn.inputs[2], bn.inputs[3], bn.inputs[4]};
  f.node.attributes.push_back(float_attr("epsilon", *e));
  take_conv_activation(g, constants, uses, eligible, used, &result, &f);
  f.node.outputs = {result};
  std::sort(f.replaces.begin(), f.replaces.end());
  out->push_back(std::move(f));
}

}  // namespace kiln::optimizer
