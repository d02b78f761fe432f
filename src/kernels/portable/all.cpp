// The one list of portable kernel families. Each family file (one op family
// per file, flat in portable/) defines `void register_<family>_ops(KernelRegistry&)`;
// adding a family is adding one line to KILN_PORTABLE_FAMILIES, which both
// declares those functions and calls them, in this order.
#include "kernels/registry.h"

#define KILN_PORTABLE_FAMILIES(X) \
  X(resize)                       \
  X(rnn)                          \
  X(loss)                         \
  X(signal)                       \
  X(detection)                    \
  X(text)                         \
  X(grid_sample)                  \
  X(training)                     \
  X(random)                       \
  X(shape)                        \
  X(transform)                    \
  X(slice)                        \
  X(gather_scatter)               \
  X(reduce)                       \
  X(softmax)                      \
  X(sort)                         \
  X(binary)                       \
  X(unary)                        \
  X(activation)                   \
  X(compare_logic)                \
  X(variadic)                     \
  X(cast)                         \
  X(string)                       \
  X(control_flow)                 \
  X(sequence)                     \
  X(matmul)                       \
  X(conv)                         \
  X(conv_transpose)               \
  X(pool)                         \
  X(normalization)                \
  X(quantize)                     \
  X(einsum)                       \
  X(det)                          \
  X(roi_align)                    \
  X(opset18)                      \
  X(attention)                    \
  X(quantize_linear)              \
  X(opset18_spatial)              \
  X(string_20)                    \
  X(ml)                           \
  X(causal_conv)                  \
  X(linear_attention)             \
  X(regex)                        \
  X(image_decoder)                \
  X(deform_conv)

namespace kiln::kernels {

#define KILN_DECLARE_FAMILY(family) void register_##family##_ops(KernelRegistry& r);
KILN_PORTABLE_FAMILIES(KILN_DECLARE_FAMILY)
#undef KILN_DECLARE_FAMILY

void register_portable_kernels(KernelRegistry& r) {
#define KILN_REGISTER_FAMILY(family) register_##family##_ops(r);
  KILN_PORTABLE_FAMILIES(KILN_REGISTER_FAMILY)
#undef KILN_REGISTER_FAMILY
}

}  // namespace kiln::kernels

#undef KILN_PORTABLE_FAMILIES
