#include <gtest/gtest.h>

#include "core/tensor_access.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

TEST(TensorTest, StringsAreConstructedAndCloned) {
  Tensor t = Tensor::allocate(DType::kString, Shape{3});
  t.data<std::string>()[1] = "kiln";
  Tensor c = t.clone();
  t.data<std::string>()[1] = "changed";
  EXPECT_EQ(c.data<std::string>()[1], "kiln");
  EXPECT_EQ(c.data<std::string>()[0], "");
}

TEST(TensorBytesTest, RejectsNegativeOverflowAndLimit) {
  EXPECT_EQ(*checked_tensor_bytes(DType::kFloat32, Shape{2, 3}), 24u);
  EXPECT_EQ(*checked_tensor_bytes(DType::kFloat32, Shape{int64_t{1} << 62, 0}), 0u);
  EXPECT_FALSE(checked_tensor_bytes(DType::kFloat32, Shape{-1, 3}).is_ok());
  EXPECT_FALSE(checked_tensor_bytes(DType::kInt64, Shape{int64_t{1} << 31, int64_t{1} << 31}).is_ok());
  size_t old = tensor_byte_limit();
  core::set_tensor_byte_limit(1000);
  auto r = checked_tensor_bytes(DType::kFloat32, Shape{251});
  core::set_tensor_byte_limit(old);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("1000-byte tensor limit"), std::string::npos);
}

}  // namespace
}  // namespace kiln
