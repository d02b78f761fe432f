// The one list of portable kernel families. Each family file defines its
// register_* function; adding a family means adding one line in each list.
#include "kernels/registry.h"

namespace kiln::kernels {

void register_control_flow_ops(KernelRegistry& r);
void register_sequence_ops(KernelRegistry& r);
void register_matmul_ops(KernelRegistry& r);
void register_conv_ops(KernelRegistry& r);

void register_portable_kernels(KernelRegistry& r) {
  register_control_flow_ops(r);
  register_sequence_ops(r);
  register_matmul_ops(r);
  register_conv_ops(r);
}

}  // namespace kiln::kernels
