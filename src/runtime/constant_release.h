// Releasing the host's copy of a constant a plugin owns (ABI 1.1
// owned_constants): its bytes go as soon as the partitioner says nothing else
// reads it, so the host's and the plugins' copies of a model's weights are
// never all resident at once.
#pragma once

#include "ir/graph.h"
#include "runtime/node_inputs.h"

namespace kiln::runtime {

/// Frees constant `id`'s bytes: the entries of `constants` and of `g`'s
/// initializers become undefined tensors (they stay, since graph views point
/// at them until partitioning ends). When the bytes lie in a read-only
/// mapping of an ONNX external-data file (the importer's, shared by every
/// tensor of that file), the pages wholly inside them leave the resident set
/// now (madvise MADV_DONTNEED; read from the file again if anything touched
/// them), since the mapping itself lives as long as any tensor of the file.
void release_constant_bytes(ir::Graph& g, ConstantMap& constants, ir::ValueId id);

}  // namespace kiln::runtime
