// Kernel libraries. The full library (libkiln) always has every portable
// kernel of its build (calling register_portable_kernels() there is
// harmless). libkiln_runtime has the kernel interface and registry
// but no kernels: an application linked against it also links a kernel
// library (kiln_portable_kernels, or a selective build of it that holds only
// the kernels some models use; docs/architecture.md) and calls
// register_portable_kernels() once before loading programs. Without any,
// only programs whose nodes all run in backend partitions load.
#pragma once

namespace kiln {

/// Adds the portable kernels this kernel library holds (all of them, or a
/// selective build's) to the registry that sessions pick kernels from.
/// Idempotent and thread-safe; sessions loaded earlier keep the kernels they
/// were built with.
void register_portable_kernels();

}  // namespace kiln
