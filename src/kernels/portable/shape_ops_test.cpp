#include <gtest/gtest.h>

#include <climits>
#include <cmath>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::OpCall;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

TEST(ReshapeTest, ZeroCopiesDimAndMinusOneInfers) {
  auto r = run_op1("Reshape", {iota_f({2, 3, 4}), ints({0, -1})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 12}));
  EXPECT_EQ(vals<float>(*r)[13], 13.f);
}

TEST(ReshapeTest, AllowZeroKeepsZeroDims) {
  Tensor empty = Tensor::allocate(DType::kFloat32, Shape{0, 3, 4});
  auto r = run_op1("Reshape", {empty, ints({3, 4, 0})}, {attr("allowzero", 1)}, 14);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{3, 4, 0}));
}

TEST(ReshapeTest, OpsetOneReadsShapeAttribute) {
  auto r = run_op1("Reshape", {iota_f({6})}, {attr("shape", std::vector<int64_t>{3, 2})}, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{3, 2}));
}

TEST(ReshapeTest, MismatchedSizeIsAnError) {
  auto r = run_op1("Reshape", {iota_f({2, 3}), ints({4, 2})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Reshape"), std::string::npos);
  EXPECT_FALSE(run_op1("Reshape", {iota_f({2, 3}), ints({-1, -1})}).ok());
  EXPECT_FALSE(run_op1("Reshape", {iota_f({2, 3}), ints({-2, 3})}).ok());
  EXPECT_FALSE(run_op1("Reshape", {iota_f({6}), ints({0, 0, 6})}).ok());
}

TEST(FlattenTest, AxisSplitsDims) {
  auto r = run_op1("Flatten", {iota_f({2, 3, 4, 5})}, {attr("axis", 2)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{6, 20}));
  r = run_op1("Flatten", {iota_f({2, 3, 4})}, {attr("axis", 0)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{1, 24}));
  r = run_op1("Flatten", {iota_f({2, 3, 4})}, {attr("axis", -1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{6, 4}));
  EXPECT_FALSE(run_op1("Flatten", {iota_f({2, 3})}, {attr("axis", 3)}).ok());
}

TEST(SqueezeTest, AxesInputAndAttribute) {
  auto r = run_op1("Squeeze", {iota_f({1, 3, 1, 2}), ints({0, -2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{3, 2}));
  r = run_op1("Squeeze", {iota_f({1, 3, 1, 2})}, {attr("axes", std::vector<int64_t>{2})}, 11);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{1, 3, 2}));
  r = run_op1("Squeeze", {iota_f({1, 3, 1, 2})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{3, 2}));
}

TEST(SqueezeTest, NonUnitAxisIsAnError) {
  auto r = run_op1("Squeeze", {iota_f({1, 3}), ints({1})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("axis 1"), std::string::npos);
}

TEST(UnsqueezeTest, InsertsUnsortedAxes) {
  auto r = run_op1("Unsqueeze", {iota_f({3, 4}), ints({3, 0})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{1, 3, 4, 1}));
  r = run_op1("Unsqueeze", {iota_f({3})}, {attr("axes", std::vector<int64_t>{-1})}, 11);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->shape(), (Shape{3, 1}));
  EXPECT_FALSE(run_op1("Unsqueeze", {iota_f({3}), ints({0, 0})}).ok());
  EXPECT_FALSE(run_op1("Unsqueeze", {iota_f({3}), ints({5})}).ok());
}

TEST(ShapeTest, StartEndClamp) {
  auto r = run_op1("Shape", {iota_f({2, 3, 4, 5})}, {attr("start", 1), attr("end", -1)}, 15);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<int64_t>(*r), (std::vector<int64_t>{3, 4}));
  r = run_op1("Shape", {iota_f({2, 3})}, {attr("start", -10), attr("end", 10)}, 15);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<int64_t>(*r), (std::vector<int64_t>{2, 3}));
  r = run_op1("Shape", {iota_f({2, 3})}, {attr("start", 2), attr("end", 1)}, 15);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->numel(), 0);
}

TEST(SizeTest, CountsElements) {
  auto r = run_op1("Size", {iota_f({2, 3, 4})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank(), 0u);
  EXPECT_EQ(*r->data<int64_t>(), 24);
}

TEST(IdentityTest, PassesTensorsAndSequences) {
  auto r = run_op1("Identity", {iota_f({2})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 1}));
  OpCall call;
  call.op_type = "Identity";
  call.inputs = {Value::sequence({iota_f({2}), iota_f({3})}, DType::kFloat32)};
  auto out = run_op(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_TRUE((*out)[0].is_sequence());
  EXPECT_EQ((*out)[0].sequence_items().size(), 2u);
}

TEST(DropoutTest, InferenceIsIdentityWithTrueMask) {
  OpCall call;
  call.op_type = "Dropout";
  call.inputs = {iota_f({2, 2}), Tensor::scalar(0.3f)};
  call.num_outputs = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(vals<float>((*out)[0].tensor()), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ((*out)[1].tensor().dtype(), DType::kBool);
  for (bool b : std::vector<bool>((*out)[1].tensor().data<bool>(), (*out)[1].tensor().data<bool>() + 4)) EXPECT_TRUE(b);
}

TEST(DropoutTest, TrainingModeZeroRatioIsIdentity) {
  OpCall call;
  call.op_type = "Dropout";
  call.inputs = {iota_f({3}), Tensor::scalar(0.f), Tensor::scalar(true)};
  call.num_outputs = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(vals<float>((*out)[0].tensor()), (std::vector<float>{0, 1, 2}));
}

TEST(DropoutTest, TrainingModeScalesKeptValues) {
  OpCall call;
  call.op_type = "Dropout";
  Tensor ones = Tensor::allocate(DType::kFloat32, Shape{1000});
  std::fill_n(ones.data<float>(), 1000, 1.f);
  call.inputs = {ones, Tensor::scalar(0.5f), Tensor::scalar(true)};
  call.attrs = {attr("seed", 7)};
  call.num_outputs = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok());
  int kept = 0;
  for (int i = 0; i < 1000; ++i) {
    const float y = (*out)[0].tensor().data<float>()[i];
    const bool m = (*out)[1].tensor().data<bool>()[i];
    EXPECT_EQ(y, m ? 2.f : 0.f);
    kept += m;
  }
  EXPECT_GT(kept, 300);
  EXPECT_LT(kept, 700);
}

TEST(DropoutTest, OldOpsetMaskHasInputType) {
  OpCall call;
  call.op_type = "Dropout";
  call.opset = 7;
  call.inputs = {iota_f({2})};
  call.num_outputs = 2;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[1].tensor().dtype(), DType::kFloat32);
}

TEST(ExpandTest, BroadcastsBothWays) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, Shape{3, 1});
  auto r = run_op1("Expand", {x, ints({2, 1, 2})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_FALSE(run_op1("Expand", {x, ints({2, 2})}).ok());
}

TEST(ExpandTest, StringsAreCopied) {
  Tensor x = Tensor::from_vector<std::string>({"a", "b"}, Shape{2});
  auto r = run_op1("Expand", {x, ints({2, 2})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<std::string>(*r), (std::vector<std::string>{"a", "b", "a", "b"}));
}

TEST(ConstantOfShapeTest, FillsWithValue) {
  auto r = run_op1("ConstantOfShape", {ints({2, 3})}, {attr("value", Tensor::from_vector<int32_t>({7}, Shape{1}))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->dtype(), DType::kInt32);
  EXPECT_EQ(vals<int32_t>(*r), std::vector<int32_t>(6, 7));
  r = run_op1("ConstantOfShape", {ints({0})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dtype(), DType::kFloat32);
  EXPECT_EQ(r->numel(), 0);
  EXPECT_FALSE(run_op1("ConstantOfShape", {ints({-1})}).ok());
}

TEST(ConstantTest, EveryValueAttribute) {
  auto r = run_op1("Constant", {}, {attr("value", Tensor::from_vector<float>({1, 2}, Shape{2}))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{1, 2}));
  r = run_op1("Constant", {}, {attr("value_ints", std::vector<int64_t>{4, 5})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<int64_t>(*r), (std::vector<int64_t>{4, 5}));
  r = run_op1("Constant", {}, {attr("value_float", 2.5f)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank(), 0u);
  EXPECT_EQ(*r->data<float>(), 2.5f);
  r = run_op1("Constant", {}, {attr("value_strings", std::vector<std::string>{"x", "y"})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<std::string>(*r), (std::vector<std::string>{"x", "y"}));
  EXPECT_FALSE(run_op1("Constant", {}, {}).ok());
}

TEST(RangeTest, FloatAndNegativeIntDelta) {
  auto r = run_op1("Range", {Tensor::scalar(1.f), Tensor::scalar(2.f), Tensor::scalar(0.3f)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->numel(), 4);
  EXPECT_FLOAT_EQ(vals<float>(*r)[3], 1.9f);
  r = run_op1("Range", {Tensor::scalar<int32_t>(10), Tensor::scalar<int32_t>(6), Tensor::scalar<int32_t>(-3)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(vals<int32_t>(*r), (std::vector<int32_t>{10, 7}));
  r = run_op1("Range", {Tensor::scalar<int64_t>(5), Tensor::scalar<int64_t>(1), Tensor::scalar<int64_t>(2)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->numel(), 0);
  EXPECT_FALSE(run_op1("Range", {Tensor::scalar<int64_t>(0), Tensor::scalar<int64_t>(1), Tensor::scalar<int64_t>(0)}).ok());
}

TEST(EyeLikeTest, OffDiagonalAndDtype) {
  auto r = run_op1("EyeLike", {Tensor::zeros(DType::kInt32, Shape{3, 4})},
                   {attr("k", 1), attr("dtype", static_cast<int64_t>(DType::kFloat32))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->dtype(), DType::kFloat32);
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  EXPECT_FALSE(run_op1("EyeLike", {iota_f({3})}).ok());
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(ShapeOpsTest, MissingOrNonTensorInputsAreErrors) {
  Tensor x = Tensor::from_vector<float>({1, 2}, Shape{2});
  auto r = testing::run_op1("Reshape", {x, Value::none()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input 1"), std::string::npos);
  EXPECT_FALSE(testing::run_op1("Expand", {Value::sequence({x}, DType::kFloat32), Tensor::from_vector<int64_t>({2})}).ok());
  EXPECT_FALSE(testing::run_op1("Shape", {Value::none()}).ok());
  EXPECT_FALSE(testing::run_op1("Range", {Tensor::scalar(1.f), Tensor::scalar(2.f)}).ok());
}

TEST(ShapeOpsTest, AbsurdShapesAreErrorsNotCrashes) {
  Tensor x = Tensor::from_vector<float>({1}, Shape{1});
  const int64_t big = int64_t{1} << 40;
  EXPECT_FALSE(testing::run_op1("Expand", {x, Tensor::from_vector<int64_t>({big, big})}).ok());
  EXPECT_FALSE(testing::run_op1("ConstantOfShape", {Tensor::from_vector<int64_t>({big, big, big})}).ok());
  EXPECT_FALSE(testing::run_op1("Reshape", {x, Tensor::from_vector<int64_t>({big, big, big, 0})},
                                {testing::attr("allowzero", 1)}).ok());
  EXPECT_FALSE(testing::run_op1("Range", {Tensor::scalar<int64_t>(INT64_MIN), Tensor::scalar<int64_t>(INT64_MAX),
                                          Tensor::scalar<int64_t>(1)}).ok());
  EXPECT_FALSE(testing::run_op1("Range", {Tensor::scalar(0.f), Tensor::scalar(INFINITY), Tensor::scalar(1.f)}).ok());
}

TEST(RangeTest, ExtremeIntegersDoNotOverflow) {
  auto r = testing::run_op1("Range", {Tensor::scalar<int64_t>(INT64_MIN), Tensor::scalar<int64_t>(INT64_MAX),
                                      Tensor::scalar<int64_t>(INT64_MAX)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<int64_t>(*r), (std::vector<int64_t>{INT64_MIN, -1, INT64_MAX - 1}));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(ConstantTest, SparseValueArrivesDensified) {
  // The importer turns a SparseTensorProto into a dense tensor in `t`.
  ir::Attribute a = testing::attr("sparse_value", Tensor::from_vector<float>({0, 3, 0}, Shape{3}));
  a.type = ir::AttrType::kSparseTensor;
  auto r = testing::run_op1("Constant", {}, {a});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(vals<float>(*r), (std::vector<float>{0, 3, 0}));
  ir::Attribute empty;
  empty.name = "sparse_value";
  empty.type = ir::AttrType::kSparseTensor;
  EXPECT_FALSE(testing::run_op1("Constant", {}, {empty}).ok());
}

}  // namespace
}  // namespace kiln
