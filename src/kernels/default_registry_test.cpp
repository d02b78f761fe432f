// The process-wide registry and kernel libraries (kernels/default_registry.h).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/default_registry.h"

namespace kiln::kernels {
namespace {

struct NoopKernel : Kernel {
  Status compute(KernelContext&) const override { return Status::ok(); }
};

void register_first(KernelRegistry& r) {
  r.add({.domain = "kiln.test", .op_type = "LibraryFirst", .factory = make_kernel<NoopKernel>});
}
void register_second(KernelRegistry& r) {
  r.add({.domain = "kiln.test", .op_type = "LibrarySecond", .factory = make_kernel<NoopKernel>});
}

bool has(const KernelRegistry& r, const char* op) { return r.find("kiln.test", op, 1, {}) != nullptr; }

TEST(DefaultRegistryTest, AddingALibraryMakesANewRegistryAndKeepsTheOldOneIntact) {
  add_kernel_library(&register_first);
  const KernelRegistry& before = default_registry();
  EXPECT_TRUE(has(before, "LibraryFirst"));
  EXPECT_FALSE(has(before, "LibrarySecond"));

  add_kernel_library(&register_second);
  const KernelRegistry& after = default_registry();
  EXPECT_NE(&before, &after);
  EXPECT_TRUE(has(after, "LibraryFirst"));
  EXPECT_TRUE(has(after, "LibrarySecond"));
  // A program built from `before` keeps pointers into it: still valid, unchanged.
  EXPECT_TRUE(has(before, "LibraryFirst"));
  EXPECT_FALSE(has(before, "LibrarySecond"));
}

TEST(DefaultRegistryTest, AddingALibraryTwiceIsANoOp) {
  add_kernel_library(&register_first);
  const KernelRegistry& r = default_registry();
  add_kernel_library(&register_first);
  EXPECT_EQ(&r, &default_registry());
  size_t count = 0;
  for (const KernelDef* d : r.all()) count += d->op_type == "LibraryFirst";
  EXPECT_EQ(count, 1u);
}

TEST(DefaultRegistryTest, PortableRegistryIsTheProcessRegistryWithThePortableKernels) {
  const KernelRegistry& r = portable_registry();
  EXPECT_EQ(&r, &default_registry());
  const std::vector<DType> f32 = {DType::kFloat32};
  EXPECT_NE(r.find("", "Conv", 11, f32), nullptr);
}

}  // namespace
}  // namespace kiln::kernels
