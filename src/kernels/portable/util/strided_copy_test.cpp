#include "kernels/portable/util/strided_copy.h"
#include "kernels/util/kernel_args.h"

#include <gtest/gtest.h>

#include <complex>
#include <numeric>
#include <string>

namespace kiln::kernels::layout {
namespace {

// Reference: walk `dims` with explicit indices.
template <class T>
std::vector<T> naive(const std::vector<T>& src, int64_t base, const std::vector<int64_t>& src_strides,
                     const std::vector<int64_t>& dims) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<T> out(static_cast<size_t>(total));
  for (int64_t lin = 0; lin < total; ++lin) {
    int64_t rem = lin, off = base;
    for (size_t k = dims.size(); k-- > 0;) {
      off += (rem % dims[k]) * src_strides[k];
      rem /= dims[k];
    }
    out[static_cast<size_t>(lin)] = src[static_cast<size_t>(off)];
  }
  return out;
}

std::vector<int64_t> contiguous(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  int64_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

TEST(StridedCopyTest, NegativeStridesReverse) {
  std::vector<float> src(24);
  std::iota(src.begin(), src.end(), 0.f);
  // [2, 3, 4] read backwards along the last two axes.
  const std::vector<int64_t> dims{2, 3, 4}, strides{12, -4, -1};
  std::vector<float> out(24);
  strided_copy(DType::kFloat32, out.data(), contiguous(dims), src.data() + 11, strides, dims, nullptr);
  EXPECT_EQ(out, naive(src, 11, strides, dims));
  EXPECT_EQ(out[0], 11.f);
  EXPECT_EQ(out[23], 12.f);
}

TEST(StridedCopyTest, ZeroStrideBroadcastsEveryElementSize) {
  const std::vector<int64_t> dims{3, 5}, strides{1, 0};
  std::vector<uint8_t> b{7, 8, 9}, bo(15);
  strided_copy(DType::kUInt8, bo.data(), contiguous(dims), b.data(), strides, dims, nullptr);
  EXPECT_EQ(bo, naive(b, 0, strides, dims));
  std::vector<std::complex<double>> c{{1, 2}, {3, 4}, {5, 6}}, co(15);
  strided_copy(DType::kComplex128, co.data(), contiguous(dims), c.data(), strides, dims, nullptr);
  EXPECT_EQ(co, naive(c, 0, strides, dims));
  std::vector<std::string> s{"a", "bb", "ccc"}, so(15);
  strided_copy(DType::kString, so.data(), contiguous(dims), s.data(), strides, dims, nullptr);
  EXPECT_EQ(so, naive(s, 0, strides, dims));
}

TEST(StridedCopyTest, DestinationStridesWriteASubRegion) {
  // Copy a [2, 3] block into column 1..3 of a [2, 5] buffer.
  std::vector<int16_t> src{1, 2, 3, 4, 5, 6}, dst(10, 0);
  const std::vector<int64_t> dims{2, 3}, dst_strides{5, 1}, src_strides{3, 1};
  strided_copy(DType::kInt16, dst.data() + 1, dst_strides, src.data(), src_strides, dims, nullptr);
  EXPECT_EQ(dst, (std::vector<int16_t>{0, 1, 2, 3, 0, 0, 4, 5, 6, 0}));
}

TEST(StridedCopyTest, LargeTransposeInParallelEveryElementSize) {
  ThreadPool pool(2);
  const std::vector<int64_t> dims{67, 129}, strides{1, 67};  // transpose of [129, 67]
  std::vector<int64_t> i64(67 * 129);
  std::iota(i64.begin(), i64.end(), 0);
  std::vector<int64_t> o64(i64.size());
  strided_copy(DType::kInt64, o64.data(), contiguous(dims), i64.data(), strides, dims, &pool);
  EXPECT_EQ(o64, naive(i64, 0, strides, dims));
  std::vector<uint32_t> i32(i64.begin(), i64.end()), o32(i32.size());
  strided_copy(DType::kUInt32, o32.data(), contiguous(dims), i32.data(), strides, dims, &pool);
  EXPECT_EQ(o32, naive(i32, 0, strides, dims));
  std::vector<uint8_t> i8(i64.size()), o8(i64.size());
  for (size_t i = 0; i < i8.size(); ++i) i8[i] = static_cast<uint8_t>(i * 31);
  strided_copy(DType::kUInt8, o8.data(), contiguous(dims), i8.data(), strides, dims, &pool);
  EXPECT_EQ(o8, naive(i8, 0, strides, dims));
}

TEST(StridedCopyTest, EmptyAndScalarShapes) {
  float src = 5.f, dst = 0.f;
  strided_copy(DType::kFloat32, &dst, {}, &src, {}, {}, nullptr);
  EXPECT_EQ(dst, 5.f);
  const std::vector<int64_t> dims{3, 0}, strides{1, 1};
  strided_copy(DType::kFloat32, nullptr, strides, nullptr, strides, dims, nullptr);  // touches nothing
}

TEST(LayoutTest, CheckedNumelRejectsOverflow) {
  ir::Node node;
  node.op_type = "Expand";
  EXPECT_EQ(*checked_numel(Shape{2, 3}), 6);
  EXPECT_EQ(*checked_numel(Shape{int64_t{1} << 62, 0}), 0);
  EXPECT_FALSE(checked_numel(Shape{int64_t{1} << 32, int64_t{1} << 32}).ok());
  EXPECT_FALSE(checked_numel(Shape{-1}).ok());
}

TEST(LayoutTest, NormalizeAxesRejectsRepeatsAndRange) {
  ir::Node node;
  EXPECT_EQ(*normalize_axes(std::vector<int64_t>{-1, 0}, 3), (std::vector<int64_t>{2, 0}));
  EXPECT_FALSE(normalize_axes(std::vector<int64_t>{1, -2}, 3).ok());
  EXPECT_FALSE(normalize_axes(std::vector<int64_t>{3}, 3).ok());
}

}  // namespace
}  // namespace kiln::kernels::layout
