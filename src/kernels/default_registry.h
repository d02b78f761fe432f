// Kernel libraries and the process-wide registry. The registry belongs to the
// runtime (it links into libkiln_runtime); kernels come from kernel
// libraries that register into it: the portable kernels
// (register_portable_kernels, portable/all.cpp, or a selective build's
// generated list) are one. A library is added explicitly (no static
// initializers); `portable_registry()` adds the portable kernels and returns
// the process-wide registry.
#pragma once

#include "kernels/registry.h"

namespace kiln::kernels {

/// A kernel library: a function that adds its kernels to a registry.
using KernelLibrary = void (*)(KernelRegistry&);

/// Adds `library` to the process-wide registry (default_registry()); adding
/// one twice is a no-op. Thread-safe. A registry handed out before stays
/// valid (registries are kept until exit), so programs built earlier keep theirs;
/// later ones see the new kernels.
void add_kernel_library(KernelLibrary library);

/// The process-wide registry: every library added so far (empty if none).
/// Program::build picks kernels from it unless given another.
const KernelRegistry& default_registry();

}  // namespace kiln::kernels
