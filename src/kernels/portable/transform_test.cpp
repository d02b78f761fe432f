#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

TEST(ConcatTest, MiddleAxisWithEmptyInput) {
  auto r = run_op1("Concat", {iota_f({2, 1, 2}), iota_f({2, 0, 2}), iota_f({2, 2, 2})}, {attr("axis", -2)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 6, 7}));
}

TEST(ConcatTest, MismatchedShapesAreAnError) {
  auto r = run_op1("Concat", {iota_f({2, 2}), iota_f({3, 3})}, {attr("axis", 0)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 1"), std::string::npos);
  EXPECT_FALSE(run_op1("Concat", {iota_f({2}), iota_f({2})}, {attr("axis", 1)}).ok());
}

TEST(ConcatTest, ParallelMatchesSerial) {
  OpCall call;
  call.op_type = "Concat";
  call.inputs = {iota_f({64, 300}), iota_f({64, 200})};
  call.attrs = {attr("axis", 1)};
  call.threads = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok());
  const float* y = (*out)[0].tensor().data<float>();
  EXPECT_EQ(y[63 * 500 + 299], 63 * 300 + 299);
  EXPECT_EQ(y[63 * 500 + 300], 63 * 200);
}

// Channel concat with batch 1 (one block per input), split over threads by
// output range: every element lands where the serial copy puts it, for
// uneven inputs whose boundaries fall inside chunks.
class ConcatOneBlockTest : public ::testing::TestWithParam<int> {};

TEST_P(ConcatOneBlockTest, MatchesSerialLayout) {
  const std::vector<std::vector<int64_t>> shapes = {{1, 3, 97, 101}, {1, 1, 97, 101}, {1, 5, 97, 101}};
  OpCall call;
  call.op_type = "Concat";
  for (const auto& sh : shapes) call.inputs.push_back(iota_f(Shape(sh)));
  call.attrs = {attr("axis", 1)};
  call.threads = GetParam();
  auto out = run_op(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.shape(), (Shape{1, 9, 97, 101}));
  int64_t at = 0;
  for (const auto& sh : shapes) {
    const int64_t n = sh[1] * 97 * 101;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.data<float>()[at + i], static_cast<float>(i)) << at + i;
    at += n;
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ConcatOneBlockTest, ::testing::Values(1, 2, 3, 4));

TEST(SplitTest, SplitInputAndEqualParts) {
  OpCall call;
  call.op_type = "Split";
  call.inputs = {iota_f({2, 6}), ints({2, 4})};
  call.attrs = {attr("axis", 1)};
  call.num_outputs = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(vals<float>((*out)[0].tensor()), (std::vector<float>{0, 1, 6, 7}));
  EXPECT_EQ(vals<float>((*out)[1].tensor()), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));

  call.inputs = {iota_f({6})};
  call.attrs = {};
  call.num_outputs = 3;
  out = run_op(call);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(vals<float>((*out)[2].tensor()), (std::vector<float>{4, 5}));

  call.opset = 11;
  call.attrs = {attr("split", std::vector<int64_t>{1, 0, 5})};
  out = run_op(call);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[1].tensor().numel(), 0);
  EXPECT_EQ((*out)[2].tensor().numel(), 5);
}

TEST(SplitTest, BadSplitIsAnError) {
  OpCall call;
  call.op_type = "Split";
  call.inputs = {iota_f({5})};
  call.num_outputs = 2;
  EXPECT_FALSE(run_op(call).ok());  // 5 does not split in 2
  call.inputs = {iota_f({5}), ints({2, 2})};
  EXPECT_FALSE(run_op(call).ok());  // sums to 4
}

// Transposes against naive index math, for every permutation of a 4-D
// tensor with sizes that hit the tiled, the memcpy and the element paths.
TEST(TransposeTest, AllPermutationsMatchReference) {
  const Shape s{2, 9, 3, 13};
  Tensor x = iota_f(s);
  std::vector<int64_t> perm{0, 1, 2, 3};
  do {
    for (int threads : {1, 2}) {
      OpCall call;
      call.op_type = "Transpose";
      call.inputs = {x};
      call.attrs = {attr("perm", perm)};
      call.threads = threads;
      auto out = run_op(call);
      ASSERT_TRUE(out.ok());
      const Tensor& y = (*out)[0].tensor();
      int64_t in_strides[4] = {351, 39, 13, 1};
      int64_t idx[4];
      for (int64_t lin = 0; lin < y.numel(); ++lin) {
        int64_t rem = lin;
        for (int d = 3; d >= 0; --d) {
          idx[d] = rem % y.dim(static_cast<size_t>(d));
          rem /= y.dim(static_cast<size_t>(d));
        }
        int64_t src = 0;
        for (int d = 0; d < 4; ++d) src += idx[d] * in_strides[perm[static_cast<size_t>(d)]];
        ASSERT_EQ(y.data<float>()[lin], static_cast<float>(src)) << "perm " << perm[0] << perm[1] << perm[2] << perm[3];
      }
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(TransposeTest, DefaultReversesAndLargeMatrixTiles) {
  auto r = run_op1("Transpose", {iota_f({2, 3})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  OpCall call;
  call.op_type = "Transpose";
  call.inputs = {iota_f({300, 257})};
  call.threads = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok());
  const Tensor& y = (*out)[0].tensor();
  EXPECT_EQ(y.shape(), (Shape{257, 300}));
  for (int64_t i = 0; i < 257; ++i)
    for (int64_t j = 0; j < 300; ++j) ASSERT_EQ(y.data<float>()[i * 300 + j], static_cast<float>(j * 257 + i));
}

TEST(TransposeTest, BadPermIsAnError) {
  EXPECT_FALSE(run_op1("Transpose", {iota_f({2, 3})}, {attr("perm", std::vector<int64_t>{0, 0})}).ok());
  EXPECT_FALSE(run_op1("Transpose", {iota_f({2, 3})}, {attr("perm", std::vector<int64_t>{0})}).ok());
}

TEST(TileTest, RepeatsEachAxis) {
  auto r = run_op1("Tile", {iota_f({2, 2}), ints({2, 3})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{4, 6}));
  EXPECT_EQ(vals<float>(*r)[0 * 6 + 0], 0);
  EXPECT_EQ(vals<float>(*r)[0 * 6 + 3], 1);
  EXPECT_EQ(vals<float>(*r)[3 * 6 + 5], 3);
  EXPECT_EQ(vals<float>(*r)[2 * 6 + 2], 0);
  EXPECT_FALSE(run_op1("Tile", {iota_f({2, 2}), ints({2})}).ok());
}

TEST(PadTest, ConstantReflectEdgeWrap) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, Shape{1, 3});
  auto pad = [&](const char* mode) {
    OpCall call;
    call.op_type = "Pad";
    call.inputs = {x, ints({0, 2, 0, 3}), Tensor::scalar(9.f)};
    call.attrs = {attr("mode", mode)};
    auto out = run_op(call);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? vals<float>((*out)[0].tensor()) : std::vector<float>{};
  };
  EXPECT_EQ(pad("constant"), (std::vector<float>{9, 9, 1, 2, 3, 9, 9, 9}));
  EXPECT_EQ(pad("reflect"), (std::vector<float>{3, 2, 1, 2, 3, 2, 1, 2}));
  EXPECT_EQ(pad("edge"), (std::vector<float>{1, 1, 1, 2, 3, 3, 3, 3}));
  EXPECT_EQ(pad("wrap"), (std::vector<float>{2, 3, 1, 2, 3, 1, 2, 3}));
}

TEST(PadTest, NegativePadsCropAndOldOpsetAttributes) {
  auto r = run_op1("Pad", {iota_f({3, 3}), ints({-1, 1, 0, 0})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 4}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 3, 4, 5, 0, 6, 7, 8}));
  r = run_op1("Pad", {iota_f({2})}, {attr("pads", std::vector<int64_t>{1, 1}), attr("value", 1.5f)}, 2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1.5f, 0, 1, 1.5f}));
  EXPECT_FALSE(run_op1("Pad", {iota_f({2}), ints({-2, -1})}).ok());
  EXPECT_FALSE(run_op1("Pad", {iota_f({2}), ints({1})}).ok());
}

TEST(PadTest, AxesInputPadsOnlyThoseAxes) {
  OpCall call;
  call.op_type = "Pad";
  call.inputs = {iota_f({2, 2}), ints({1, 0}), Value::none(), ints({-1})};
  auto out = run_op(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(vals<float>((*out)[0].tensor()), (std::vector<float>{0, 0, 1, 0, 2, 3}));
}

TEST(DepthToSpaceTest, DcrAndCrdModes) {
  // Spec example shapes: [1, 8, 1, 1] -> [1, 2, 2, 2].
  auto dcr = run_op1("DepthToSpace", {iota_f({1, 8, 1, 1})}, {attr("blocksize", 2)});
  ASSERT_TRUE(dcr.ok()) << dcr.status().to_string();
  EXPECT_EQ(dcr->shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(vals<float>(*dcr), (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
  auto crd = run_op1("DepthToSpace", {iota_f({1, 8, 1, 1})}, {attr("blocksize", 2), attr("mode", "CRD")});
  ASSERT_TRUE(crd.ok());
  EXPECT_EQ(vals<float>(*crd), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_FALSE(run_op1("DepthToSpace", {iota_f({1, 6, 1, 1})}, {attr("blocksize", 2)}).ok());
}

TEST(SpaceToDepthTest, InvertsDepthToSpace) {
  Tensor x = iota_f({2, 8, 3, 2});
  auto d2s = run_op1("DepthToSpace", {x}, {attr("blocksize", 2)});
  ASSERT_TRUE(d2s.ok());
  auto s2d = run_op1("SpaceToDepth", {*d2s}, {attr("blocksize", 2)});
  ASSERT_TRUE(s2d.ok()) << s2d.status().to_string();
  EXPECT_EQ(s2d->shape(), x.shape());
  EXPECT_EQ(vals<float>(*s2d), vals<float>(x));
  EXPECT_FALSE(run_op1("SpaceToDepth", {iota_f({1, 1, 3, 2})}, {attr("blocksize", 2)}).ok());
}

TEST(TriluTest, UpperAndLowerWithK) {
  auto up = run_op1("Trilu", {iota_f({3, 3}), Tensor::scalar<int64_t>(1)});
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  EXPECT_EQ(vals<float>(*up), (std::vector<float>{0, 1, 2, 0, 0, 5, 0, 0, 0}));
  auto low = run_op1("Trilu", {iota_f({2, 3}), Tensor::scalar<int64_t>(-1)}, {attr("upper", 0)});
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(vals<float>(*low), (std::vector<float>{0, 0, 0, 3, 0, 0}));
  EXPECT_FALSE(run_op1("Trilu", {iota_f({3})}).ok());
}

TEST(ReverseSequenceTest, TimeMajorAndBatchMajor) {
  auto t = run_op1("ReverseSequence", {iota_f({3, 2}), ints({3, 1})}, {attr("time_axis", 0), attr("batch_axis", 1)});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(vals<float>(*t), (std::vector<float>{4, 1, 2, 3, 0, 5}));
  auto b = run_op1("ReverseSequence", {iota_f({2, 3}), ints({2, 3})}, {attr("time_axis", 1), attr("batch_axis", 0)});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(vals<float>(*b), (std::vector<float>{1, 0, 2, 5, 4, 3}));
  EXPECT_FALSE(run_op1("ReverseSequence", {iota_f({2, 3}), ints({4, 1})},
                       {attr("time_axis", 1), attr("batch_axis", 0)}).ok());
}

}  // namespace
}  // namespace kiln
