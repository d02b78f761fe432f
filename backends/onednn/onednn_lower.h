// Lowers a claimed partition (graph view + host-chosen boundary) into a
// Program, then fuses inside it: element-wise ops into the preceding
// Conv/MatMul (post-ops), the residual Add into Conv (sum post-op) or MatMul
// (binary post-op), MatMul + bias Add into MatMul's bias, and the
// ReduceMean/Sub/Pow/Sqrt/Div and Erf GELU patterns of older exports into
// LayerNormalization and gelu_erf.
#pragma once

#include "kiln/c/backend_sdk.hpp"
#include "onednn_program.h"

namespace kiln_onednn {

/// Throws for a node the backend would not claim.
Program lower_partition(const kiln::sdk::Graph& graph, const kiln::sdk::Partition& part);

/// The fusion passes (also used on hand-built programs in tests).
void fuse_program(Program& p);

}  // namespace kiln_onednn
