// Phase B: Conv + Add (+ activation) as FusedConv with a sum input (fusion_patterns.h).
#include <algorithm>

#include "optimizer/fusion_patterns.h"

namespace kiln::optimizer {

namespace {

// A float32 tensor type whose dims are all known.
bool static_f32(const ir::Graph& g, ir::ValueId v) {
  if (v < 0 || static_cast<size_t>(v) >= g.values.size()) return false;
  const ir::ValueType& t = g.value(v).type;
  return t.is_tensor() && t.dtype == DType::kFloat32 && t.is_static();
}

bool same_dims(const ir::Graph& g, ir::ValueId a, ir::ValueId b) {
  const std::vector<ir::Dim>& da = g.value(a).type.dims;
  const std::vector<ir::Dim>& db = g.value(b).type.dims;
  return std::equal(da.begin(), da.end(), db.begin(), db.end(),
                    [](const ir::Dim& x, const ir::Dim& y) { return x.value == y.value; });
}

}  // namespace

void match_conv_add(const ir::Graph& g, const ConstantMap& constants, const GraphUses& uses,
                    const std::vector<uint8_t>& eligible, const std::vector<uint8_t>& used, size_t ni,
                    std::vector<Fusion>* out) {
  const ir::Node& conv = g.nodes[ni];
  if (!conv.domain.empty() || conv.op_type != "Conv" || !conv.has_output(0) || conv.outputs.size() != 1 ||
      conv.inputs.size() < 2 || conv.inputs.size() > 3)
    return;
  const ir::ValueId y = conv.outputs[0];
  if (!uses.only_read_once(y) || !static_f32(g, y)) return;
  auto free = [&](int32_t r) { return r >= 0 && eligible[static_cast<size_t>(r)] && !used[static_cast<size_t>(r)]; };
  const int32_t ai = uses.readers(y)[0];
  if (!free(ai)) return;
  const ir::Node& add = g.nodes[static_cast<size_t>(ai)];
  if (!add.domain.empty() || add.op_type != "Add" || add.inputs.size() != 2 || !add.has_output(0)) return;
  const ir::ValueId z = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  // Z must be another value of Y's exact shape (FusedConv's Z does not broadcast).
  if (z == y || !static_f32(g, z) || !same_dims(g, y, z) || !static_f32(g, add.outputs[0]) ||
      !same_dims(g, y, add.outputs[0]))
    return;
  Fusion f;
  f.name = "conv+add";
  f.replaces = {ni, static_cast<size_t>(ai)};
  ir::ValueId result = add.outputs[0];
  f.node = conv;
  f.node.domain = "com.microsoft";
  f.node.op_type = "FusedConv";
  f.node.opset = 1;
  f.node.inputs.resize(3, ir::kNoValue);  // B may be absent
  f.node.inputs.push_back(z);
  take_conv_activation(g, constants, uses, eligible, used, &result, &f);
  f.node.outputs = {result};
  std::sort(f.replaces.begin(), f.replaces.end());
  out->push_back(std::move(f));
}

}  // namespace kiln::optimizer
