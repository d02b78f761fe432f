// The one list of portable kernel families. Each family file defines its
// register_* function; adding a family means adding one line here.
#include "kernels/registry.h"

namespace kiln::kernels {

void register_portable_kernels(KernelRegistry& r) {
  (void)r;
}

}  // namespace kiln::kernels
