#include "runtime/node_inputs.h"

namespace kiln::runtime {

NodeInputs describe_inputs(const ir::Node& node, const ir::Graph& g, const ConstantMap& constants) {
  NodeInputs in;
  in.infos.assign(node.inputs.size(), {});
  in.dtypes.assign(node.inputs.size(), DType::kUndefined);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ir::ValueId id = node.inputs[i];
    if (id == ir::kNoValue) continue;
    in.infos[i].type = &g.value(id).type;
    auto c = constants.find(id);
    if (c != constants.end()) {
      in.infos[i].constant = &c->second;
      in.dtypes[i] = c->second.dtype();
    } else {
      in.dtypes[i] = g.value(id).type.dtype;
      in.all_constant = false;
    }
  }
  return in;
}

}  // namespace kiln::runtime
