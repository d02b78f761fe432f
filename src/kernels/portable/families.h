// The portable kernel families (one per file in portable/) by name, for the
// selective build's generator (portable/tools/select_kernels.cpp).
#pragma once

#include <span>

#include "kernels/default_registry.h"

namespace kiln::kernels {

struct PortableFamily {
  const char* name;             // "conv" for register_conv_ops
  KernelLibrary register_ops;   // register_<name>_ops
};

/// Every family, in registration order (portable/all.cpp).
std::span<const PortableFamily> portable_families();

}  // namespace kiln::kernels
