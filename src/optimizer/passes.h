// The individual rewrites of phase A (optimizer.h). Each makes one sweep
// over the graph and returns how many times it applied; rewrite_graph runs
// them until none applies.
#pragma once

#include "optimizer/optimizer.h"

namespace kiln::optimizer {

/// Identity, and Dropout in inference mode whose mask nobody reads.
int remove_identities(GraphRewrite& rw);
/// Conv or ConvTranspose (constant W, B) followed by BatchNormalization
/// with constant parameters: W and B scaled, the BatchNormalization removed.
int fold_conv_batchnorm(GraphRewrite& rw);
/// Transpose of a Transpose: one Transpose, or none when they cancel.
int merge_transposes(GraphRewrite& rw);
/// Reshape/Squeeze/Unsqueeze/Flatten of another one: one Reshape to the
/// (static) final shape; a Reshape to the input's own static shape: none.
int merge_reshapes(GraphRewrite& rw);

}  // namespace kiln::optimizer
