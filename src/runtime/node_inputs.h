// What the runtime knows about a node's inputs before it runs: their types,
// which are constants, and the dtype a kernel is chosen by. Program::build
// (constant folding, portable kernels) and the partitioner (the portable
// pseudo-backend's answer) both ask this one function.
#pragma once

#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "kernels/kernel.h"

namespace kiln::runtime {

/// Initializers and folded values by value id.
using ConstantMap = std::unordered_map<ir::ValueId, Tensor>;

struct NodeInputs {
  std::vector<kernels::InputInfo> infos;  // per input; absent inputs have no type
  std::vector<DType> dtypes;              // per input; kUndefined when absent
  bool all_constant = true;               // every present input is a constant
};

/// Describes the inputs of `node` of `g`: a constant input reports its own
/// dtype (folding may have changed it from the declared type), any other
/// input its value's declared dtype.
NodeInputs describe_inputs(const ir::Node& node, const ir::Graph& g, const ConstantMap& constants);

}  // namespace kiln::runtime
