#include "optimizer/channel_scale_fusion.h"

#include <algorithm>

namespace kiln::optimizer {

namespace {

// The static dims of a float32 value, or false.
bool static_f32_dims(const ir::Graph& g, ir::ValueId v, std::vector<int64_t>* dims) {
  if (v < 0 || static_cast<size_t>(v) >= g.values.size()) return false;
  const ir::ValueType& t = g.value(v).type;
  if (!t.is_tensor() || t.dtype != DType::kFloat32 || !t.has_shape) return false;
  dims->clear();
  for (const ir::Dim& d : t.dims) {
    if (!d.known()) return false;
    dims->push_back(d.value);
  }
  return true;
}

// Whether `s` scales x [N, C, H, W] per channel (and image) without growing
// it: [C, 1, 1] or [N', C, 1, 1] with N' 1 or N.
bool per_channel(const std::vector<int64_t>& x, const std::vector<int64_t>& s) {
  if (x.size() != 4 || (s.size() != 3 && s.size() != 4)) return false;
  const size_t o = s.size() - 3;
  if (s[o] != x[1] || s[o + 1] != 1 || s[o + 2] != 1) return false;
  return o == 0 || s[0] == 1 || s[0] == x[0];
}

// A Conv that is a plain 1x1 GEMM: group 1, strides 1, no padding.
bool pointwise_conv(const ir::Node& conv) {
  auto group = conv.attr_int("group", 1);
  auto strides = conv.attr_ints("strides");
  auto pads = conv.attr_ints("pads");
  if (!group.is_ok() || *group != 1 || !strides.is_ok() || !pads.is_ok()) return false;
  const auto one = [](int64_t v) { return v == 1; };
  const auto zero = [](int64_t v) { return v == 0; };
  return std::all_of(strides->begin(), strides->end(), one) && std::all_of(pads->begin(), pads->end(), zero);
}

}  // namespace

bool match_channel_scaled_conv(const ir::Graph& g, const ConstantMap& constants, const GraphUses& uses,
                               const std::vector<uint8_t>& eligible, const std::vector<uint8_t>& used, size_t ni,
                               Fusion* out) {
  const ir::Node& mul = g.nodes[ni];
  if (!mul.domain.empty() || mul.op_type != "Mul" || mul.inputs.size() != 2 || !mul.has_input(0) ||
      !mul.has_input(1) || !mul.has_output(0) || mul.outputs.size() != 1)
    return false;
  const ir::ValueId y = mul.outputs[0];
  if (!uses.only_read_once(y)) return false;
  const auto ci = static_cast<size_t>(uses.readers(y)[0]);
  if (!eligible[ci] || used[ci]) return false;
  const ir::Node& conv = g.nodes[ci];
  if (!conv.domain.empty() || conv.op_type != "Conv" || conv.inputs.size() < 2 || conv.inputs[0] != y ||
      conv.inputs[1] == y || (conv.has_input(2) && conv.inputs[2] == y) || !conv.has_output(0) ||
      conv.outputs.size() != 1 || !pointwise_conv(conv))
    return false;
  const Tensor* w = find_constant(constants, conv.inputs[1]);
  if (!w || w->dtype() != DType::kFloat32 || w->rank() != 4 || w->dim(2) != 1 || w->dim(3) != 1) return false;
  std::vector<int64_t> a, b;
  if (!static_f32_dims(g, mul.inputs[0], &a) || !static_f32_dims(g, mul.inputs[1], &b)) return false;
  ir::ValueId x = mul.inputs[0], s = mul.inputs[1];
  if (!per_channel(a, b)) {
    if (!per_channel(b, a)) return false;
    std::swap(x, s);
    std::swap(a, b);
  }
  if (x == s || a[1] != w->dim(1)) return false;
  Fusion f;
  f.name = "channel scale+conv";
  f.node.name = conv.name;
  f.node.domain = kChannelScaledConvDomain;
  f.node.op_type = kChannelScaledConvOp;
  f.node.opset = 1;
  f.node.inputs = {x, conv.inputs[1], conv.has_input(2) ? conv.inputs[2] : ir::kNoValue, s};
  f.node.outputs = conv.outputs;
  f.replaces = {ni, ci};
  std::sort(f.replaces.begin(), f.replaces.end());
  *out = std::move(f);
  return true;
}

}  // namespace kiln::optimizer
