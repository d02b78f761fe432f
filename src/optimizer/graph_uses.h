// GraphUses: who produces and who reads each value of a graph, for the
// rewrites' safety checks. Nodes marked removed count as absent. A value is
// pinned when a graph output or read by a subgraph of one of the nodes: a
// rewrite may not make it disappear.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "optimizer/optimizer.h"

namespace kiln::optimizer {

class GraphUses {
 public:
  /// `removed` (per node, may be empty) lists nodes to ignore.
  GraphUses(const ir::Graph& g, const std::vector<uint8_t>& removed);

  /// The index of the live node producing `v`, or -1.
  int32_t producer(ir::ValueId v) const { return valid(v) ? producer_[static_cast<size_t>(v)] : -1; }
  /// The live nodes reading `v`, one entry per input slot.
  const std::vector<int32_t>& readers(ir::ValueId v) const;
  bool pinned(ir::ValueId v) const { return valid(v) && pinned_[static_cast<size_t>(v)] != 0; }
  /// Read by exactly one input slot of one node and not pinned: a pattern may consume it.
  bool only_read_once(ir::ValueId v) const { return !pinned(v) && readers(v).size() == 1; }
  /// Every reader is in `nodes` and `v` is not pinned.
  bool read_only_by(ir::ValueId v, const std::vector<int32_t>& nodes) const;

 private:
  bool valid(ir::ValueId v) const { return v >= 0 && static_cast<size_t>(v) < producer_.size(); }
  std::vector<int32_t> producer_;
  std::vector<std::vector<int32_t>> readers_;
  std::vector<uint8_t> pinned_;
  std::vector<int32_t> none_;
};

/// Makes every live node that reads `from` read `to` instead.
void replace_uses(ir::Graph& g, const std::vector<uint8_t>& removed, ir::ValueId from, ir::ValueId to);

/// The constant tensor of `v`, or null.
const Tensor* find_constant(const ConstantMap& constants, ir::ValueId v);

/// A float32 scalar (any shape of one element) constant, when `v` is one.
bool constant_scalar(const ConstantMap& constants, ir::ValueId v, float* out);

/// Adds a constant value named after `base` (made unique) and returns its id.
ir::ValueId add_constant(ir::Graph& g, ConstantMap& constants, const std::string& base, Tensor t);

}  // namespace kiln::optimizer
