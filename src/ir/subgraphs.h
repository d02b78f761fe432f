// Whether a node carries subgraphs (If/Loop/Scan bodies).
#pragma once

#include "ir/graph.h"

namespace kiln::ir {

/// True when one of `n`'s attributes is a graph or a list of graphs.
inline bool has_subgraph(const Node& n) {
  for (const Attribute& a : n.attributes)
    if (a.type == AttrType::kGraph || a.type == AttrType::kGraphs) return true;
  return false;
}

}  // namespace kiln::ir
