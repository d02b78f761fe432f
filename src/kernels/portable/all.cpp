// The one list of portable kernel families. Each family file (one op family
// per file, flat in portable/) defines `void register_<family>_ops(KernelRegistry&)`;
// adding a family is adding one line to KILN_PORTABLE_FAMILIES, which both
// declares those functions and calls them, in this order.
//
// A selective build (cmake/KilnSelectKernels.cmake) does not link this file:
// kiln_select_kernels (portable/tools/select_kernels.cpp) reads the families
// from portable_families() and writes a registration file of its own that
// calls only the families a model needs, so the linker leaves the others out.
#include "kernels/portable/families.h"
#include "kiln/kernels.h"

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
  X(deform_conv)                  \
  X(elementwise_chain)            \
  X(conv_channel_scaled)

namespace kiln::kernels {

#define KILN_DECLARE_FAMILY(family) void register_##family##_ops(KernelRegistry& r);
KILN_PORTABLE_FAMILIES(KILN_DECLARE_FAMILY)
#undef KILN_DECLARE_FAMILY

void register_portable_kernels(KernelRegistry& r) {
#define KILN_REGISTER_FAMILY(family) register_##family##_ops(r);
  KILN_PORTABLE_FAMILIES(KILN_REGISTER_FAMILY)
#undef KILN_REGISTER_FAMILY
}

std::span<const PortableFamily> portable_families() {
#define KILN_FAMILY_ENTRY(family) PortableFamily{#family, &register_##family##_ops},
  static const PortableFamily kFamilies[] = {KILN_PORTABLE_FAMILIES(KILN_FAMILY_ENTRY)};
#undef KILN_FAMILY_ENTRY
  return kFamilies;
}

const KernelRegistry& portable_registry() {
  static const bool added = (add_kernel_library(&register_portable_kernels), true);
  (void)added;
  return default_registry();
}

}  // namespace kiln::kernels

void kiln::register_portable_kernels() { kernels::add_kernel_library(&kernels::register_portable_kernels); }

#undef KILN_PORTABLE_FAMILIES
