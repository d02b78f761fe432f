#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/testing/static_runner.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using namespace kiln::testing;

TEST(BinaryTest, AddSameShapeFloat) {
  Tensor y = run_ok("Add", {f32({1, 2, 3, 4}, {2, 2}), f32({10, 20, 30, 40}, {2, 2})});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  expect_floats(y, {11, 22, 33, 44});
}

TEST(BinaryTest, AddBroadcastsRowAgainstColumn) {
  Tensor y = run_ok("Add", {f32({1, 2}, {2, 1}), f32({10, 20, 30}, {1, 3})});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  expect_floats(y, {11, 21, 31, 12, 22, 32});
}

TEST(BinaryTest, ScalarOnEitherSide) {
  expect_floats(run_ok("Sub", {f32({5, 6, 7}), Tensor::scalar<float>(1)}), {4, 5, 6});
  expect_floats(run_ok("Sub", {Tensor::scalar<float>(1), f32({5, 6, 7})}), {-4, -5, -6});
  expect_floats(run_ok("Div", {Tensor::scalar<float>(1), f32({2, 4, 8})}), {0.5, 0.25, 0.125});
  expect_floats(run_ok("Mul", {f32({1, 2, 3}), f32({2}, {1})}), {2, 4, 6});
}

TEST(BinaryTest, ScalarWithHigherRankGivesHigherRankOutput) {
  Tensor y = run_ok("Add", {f32({1, 2, 3}), f32({1}, {1, 1})});
  EXPECT_EQ(y.shape(), (Shape{1, 3}));
  expect_floats(y, {2, 3, 4});
}

TEST(BinaryTest, MiddleAxisBroadcast) {
  // [2,3,2] * [3,1]: a per-row scale on the middle axis.
  std::vector<float> a(12);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
  Tensor y = run_ok("Mul", {f32(a, {2, 3, 2}), f32({1, 10, 100}, {3, 1})});
  expect_floats(y, {0, 1, 20, 30, 400, 500, 6, 7, 80, 90, 1000, 1100});
}

TEST(BinaryTest, IntegerDivisionTruncatesTowardZero) {
  Tensor y = run_ok("Div", {make<int32_t>({7, -7, 7, -7}, {4}), make<int32_t>({2, 2, -2, -2}, {4})});
  EXPECT_EQ(vals<int32_t>(y), (std::vector<int32_t>{3, -3, -3, 3}));
}

TEST(BinaryTest, IntegerDivisionByZeroIsAnError) {
  std::string s = run_error("Div", {make<int64_t>({1, 2}, {2}), make<int64_t>({1, 0}, {2})});
  EXPECT_NE(s.find("zero"), std::string::npos) << s;
}

TEST(BinaryTest, IntMinDividedByMinusOneWraps) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  Tensor y = run_ok("Div", {make<int32_t>({mn}, {1}), make<int32_t>({-1}, {1})});
  EXPECT_EQ(vals<int32_t>(y)[0], mn);
}

TEST(BinaryTest, IntegerArithmeticWraps) {
  EXPECT_EQ(vals<int8_t>(run_ok("Add", {make<int8_t>({127}, {1}), make<int8_t>({1}, {1})}))[0], -128);
  EXPECT_EQ(vals<uint8_t>(run_ok("Sub", {make<uint8_t>({0}, {1}), make<uint8_t>({1}, {1})}))[0], 255);
  EXPECT_EQ(vals<uint16_t>(run_ok("Mul", {make<uint16_t>({65535}, {1}), make<uint16_t>({65535}, {1})}))[0], 1);
  const int64_t mx = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(vals<int64_t>(run_ok("Add", {make<int64_t>({mx}, {1}), make<int64_t>({1}, {1})}))[0],
            std::numeric_limits<int64_t>::min());
}

TEST(BinaryTest, HalfAndDoubleTypes) {
  Tensor h = run_ok("Add", {make<Float16>({Float16(1.5f), Float16(2.f)}, {2}), make<Float16>({Float16(0.25f)}, {1})});
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  expect_floats(h, {1.75, 2.25});
  Tensor b = run_ok("Mul", {make<BFloat16>({BFloat16(3.f)}, {1}), make<BFloat16>({BFloat16(-2.f)}, {1})});
  expect_floats(b, {-6});
  Tensor d = run_ok("Div", {make<double>({1.0}, {1}), make<double>({3.0}, {1})});
  EXPECT_DOUBLE_EQ(vals<double>(d)[0], 1.0 / 3.0);
}

TEST(BinaryTest, LongHalfInputsRoundLikeElementByElement) {
  // More than one conversion block, with a scalar and a broadcast operand.
  const int64_t n = 1500;
  std::vector<Float16> a(n), b(n);
  std::vector<BFloat16> c(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = Float16(static_cast<float>(i) * 0.37f - 200.f);
    b[i] = Float16(static_cast<float>(i % 17) * 1.3f + 0.1f);
    c[i] = BFloat16(static_cast<float>(i) * -0.61f);
  }
  Tensor div = run_ok("Div", {make<Float16>(a, {n}), make<Float16>(b, {n})});
  Tensor sub = run_ok("Sub", {make<Float16>({Float16(1.f)}, {}), make<Float16>(a, {n})});
  Tensor mul = run_ok("Mul", {make<BFloat16>(c, {3, 500}), make<BFloat16>({BFloat16(0.3f), BFloat16(-2.f)}, {2, 1, 1})});
  EXPECT_EQ(mul.shape(), (Shape{2, 3, 500}));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(div.data<Float16>()[i].bits, Float16(static_cast<float>(a[i]) / static_cast<float>(b[i])).bits) << i;
    ASSERT_EQ(sub.data<Float16>()[i].bits, Float16(1.f - static_cast<float>(a[i])).bits) << i;
    ASSERT_EQ(mul.data<BFloat16>()[i].bits, BFloat16(static_cast<float>(c[i]) * static_cast<float>(BFloat16(0.3f))).bits) << i;
    ASSERT_EQ(mul.data<BFloat16>()[n + i].bits, BFloat16(static_cast<float>(c[i]) * -2.f).bits) << i;
  }
}

TEST(BinaryTest, ShapesThatDoNotBroadcastAreAnError) {
  std::string s = run_error("Add", {f32({1, 2, 3}, {3}), f32({1, 2}, {2})});
  EXPECT_NE(s.find("[3]"), std::string::npos) << s;
  EXPECT_NE(s.find("[2]"), std::string::npos) << s;
}

TEST(BinaryTest, MismatchedDtypesAreAnError) {
  std::string s = run_error("Add", {f32({1}), make<double>({1}, {1})});
  EXPECT_NE(s.find("input 1"), std::string::npos) << s;
}

TEST(BinaryTest, MissingInputIsAnError) {
  run_error("Add", {f32({1}), Value::none()});
}

TEST(BinaryTest, LegacyBroadcastWithAxis) {
  // Opset 6: B of shape [3] matched to A's dim 1 of [2,3,2].
  std::vector<float> a(12, 0.f);
  Tensor y = run_ok("Add", {f32(a, {2, 3, 2}), f32({1, 2, 3})}, {attr("broadcast", 1), attr("axis", 1)}, 6);
  expect_floats(y, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
}

TEST(BinaryTest, LegacyBroadcastSizeOneDims) {
  // PyTorch's add_size1_broadcast: A [2,3], B [2,1], axis 0.
  Tensor y = run_ok("Add", {f32({0, 0, 0, 0, 0, 0}, {2, 3}), f32({1, 2}, {2, 1})},
                    {attr("broadcast", 1), attr("axis", 0)}, 6);
  expect_floats(y, {1, 1, 1, 2, 2, 2});
}

TEST(BinaryTest, LegacyBroadcastSuffixAndScalar) {
  Tensor y = run_ok("Mul", {f32({1, 2, 3, 4}, {2, 2}), f32({10, 100})}, {attr("broadcast", 1)}, 6);
  expect_floats(y, {10, 200, 30, 400});
  Tensor z = run_ok("Add", {f32({1, 2}), Tensor::scalar<float>(1)}, {attr("broadcast", 1)}, 6);
  expect_floats(z, {2, 3});
}

TEST(BinaryTest, LegacyBroadcastMismatchIsAnError) {
  run_error("Add", {f32({0, 0, 0, 0, 0, 0}, {2, 3}), f32({1, 2})}, {attr("broadcast", 1), attr("axis", 1)}, 6);
  run_error("Add", {f32({0, 0, 0, 0}, {2, 2}), f32({1, 2})}, {attr("broadcast", 1), attr("axis", 5)}, 6);
}

TEST(BinaryTest, LargeBroadcastMatchesSerialResultWithThreads) {
  const int64_t rows = 300, cols = 517;
  std::vector<float> a(static_cast<size_t>(rows * cols)), b(static_cast<size_t>(cols));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 97) * 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) * 0.25f;
  OpCall call;
  call.op_type = "Sub";
  call.inputs = {f32(a, {rows, cols}), f32(b, {cols})};
  call.threads = 4;
  Result<std::vector<Value>> out = run_op(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(y.data<float>()[r * cols + c], a[static_cast<size_t>(r * cols + c)] - b[static_cast<size_t>(c)]);
    }
  }
}

TEST(BinaryTest, PowFloatScalarFastPathsMatchPow) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {-2.5f, -0.0f, 0.0f, 1.5f, 3.0f, inf, -inf, 7.25f};
  for (float e : {2.0f, 0.5f, 3.0f, 1.0f, 1.7f, -1.0f}) {
    Tensor y = run_ok("Pow", {f32(x), Tensor::scalar<float>(e)});
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = std::pow(x[i], e);
      const float got = y.data<float>()[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << x[i] << "^" << e;
      } else {
        EXPECT_EQ(got, want) << x[i] << "^" << e;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << x[i] << "^" << e;
      }
    }
  }
}

TEST(BinaryTest, PowIntegerScalarExponentOnFloat) {
  const std::vector<float> x = {-1.5f, 0.25f, 3.f};
  expect_floats(run_ok("Pow", {f32(x), make<int64_t>({2}, {})}, {}, 15), {2.25, 0.0625, 9}, 0);
  expect_floats(run_ok("Pow", {f32(x), make<int32_t>({3}, {1})}, {}, 15), {-3.375, 0.015625, 27}, 0);
  expect_floats(run_ok("Pow", {f32(x), make<int32_t>({-2}, {1})}, {}, 15), {1 / 2.25, 16, 1.0 / 9}, 1e-7);
  expect_floats(run_ok("Pow", {f32(x), make<double>({0.5}, {})}, {}, 15), {NAN, 0.5, std::sqrt(3.0)}, 1e-7);
}

TEST(BinaryTest, PowMixedDtypes) {
  Tensor a = run_ok("Pow", {make<int32_t>({1, 2, 3}, {3}), f32({4, 5, 6})}, {}, 15);
  EXPECT_EQ(a.dtype(), DType::kInt32);
  EXPECT_EQ(vals<int32_t>(a), (std::vector<int32_t>{1, 32, 729}));
  Tensor b = run_ok("Pow", {f32({1, 2, 3}), make<uint64_t>({4, 5, 6}, {3})}, {}, 15);
  expect_floats(b, {1, 32, 729});
  Tensor c = run_ok("Pow", {make<int64_t>({2, -3, 10}, {3}), make<int64_t>({10, 3, 0}, {3})}, {}, 15);
  EXPECT_EQ(vals<int64_t>(c), (std::vector<int64_t>{1024, -27, 1}));
  Tensor d = run_ok("Pow", {make<int64_t>({2, 1, -1, -1}, {4}), make<int64_t>({-1, -5, -3, -2}, {4})}, {}, 15);
  EXPECT_EQ(vals<int64_t>(d), (std::vector<int64_t>{0, 1, -1, 1}));
  Tensor e = run_ok("Pow", {f32({4, 9}), f32({0.5f, 2.f})});  // no scalar: generic path
  expect_floats(e, {2, 81});
}

TEST(BinaryTest, ModIntegerTakesDivisorSign) {
  Tensor y = run_ok("Mod", {make<int32_t>({-4, 7, 5, 4, -7, 8}, {6}), make<int32_t>({2, -3, 8, -2, 3, 5}, {6})});
  EXPECT_EQ(vals<int32_t>(y), (std::vector<int32_t>{0, -2, 5, 0, 2, 3}));
}

TEST(BinaryTest, ModFmodTakesDividendSign) {
  Tensor y = run_ok("Mod", {make<int64_t>({-4, 7, 5, 4, -7, 8}, {6}), make<int64_t>({2, -3, 8, -2, 3, 5}, {6})},
                    {attr("fmod", 1)});
  EXPECT_EQ(vals<int64_t>(y), (std::vector<int64_t>{0, 1, 5, 0, -1, 3}));
  Tensor f = run_ok("Mod", {f32({-4.3f, 7.2f}), f32({2.1f, -3.4f})}, {attr("fmod", 1)});
  expect_floats(f, {std::fmod(-4.3f, 2.1f), std::fmod(7.2f, -3.4f)});
}

TEST(BinaryTest, ModErrors) {
  run_error("Mod", {f32({1}), f32({2})});  // float needs fmod=1
  run_error("Mod", {make<int32_t>({1}, {1}), make<int32_t>({0}, {1})});
  run_error("Mod", {make<int32_t>({1}, {1}), make<int32_t>({2}, {1})}, {attr("fmod", 2)});
}

TEST(BinaryTest, BitShift) {
  Tensor l = run_ok("BitShift", {make<uint8_t>({16, 4, 1}, {3}), make<uint8_t>({1, 2, 3}, {3})},
                    {attr("direction", "LEFT")});
  EXPECT_EQ(vals<uint8_t>(l), (std::vector<uint8_t>{32, 16, 8}));
  Tensor r = run_ok("BitShift", {make<uint32_t>({16, 4, 1}, {3}), make<uint32_t>({1, 2, 40}, {3})},
                    {attr("direction", "RIGHT")});
  EXPECT_EQ(vals<uint32_t>(r), (std::vector<uint32_t>{8, 1, 0}));
  Tensor big = run_ok("BitShift", {make<uint64_t>({1}, {1}), make<uint64_t>({64}, {1})}, {attr("direction", "LEFT")});
  EXPECT_EQ(vals<uint64_t>(big)[0], 0u);
  run_error("BitShift", {make<uint8_t>({1}, {1}), make<uint8_t>({1}, {1})}, {attr("direction", "UP")});
}

TEST(BinaryTest, PReluBroadcastsSlope) {
  Tensor y = run_ok("PRelu", {f32({-1, 2, -3, 4}, {2, 2}), f32({0.5f, 0.25f})});
  expect_floats(y, {-0.5, 2, -1.5, 4});
}

TEST(BinaryTest, PReluLegacyPerChannelSlope) {
  // Opset 6, as PyTorch exported it: X [1,2,2], slope [C=2] per channel.
  Tensor y = run_ok("PRelu", {f32({-1, -1, -1, 1}, {1, 2, 2}), f32({0.5f, 0.25f})}, {}, 6);
  expect_floats(y, {-0.5, -0.5, -0.25, 1});
}

TEST(BinaryTest, PReluSlopeMustBroadcastToX) {
  run_error("PRelu", {f32({-1, 2}), f32({1, 2, 3}, {3, 1})});
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

using namespace kiln::testing;

// Runs `call` through compute() and through the static call; both must
// succeed and agree bit for bit.
void expect_static_matches(testing::OpCall call, const std::string& what) {
  auto ref = run_op(call);
  ASSERT_TRUE(ref.is_ok()) << what << ": " << ref.status().to_string();
  auto got = run_op_static(call);
  ASSERT_TRUE(got.is_ok()) << what << ": " << got.status().to_string();
  const Tensor &r = (*ref)[0].tensor(), &g = (*got)[0].tensor();
  ASSERT_EQ(r.shape(), g.shape()) << what;
  EXPECT_EQ(std::memcmp(r.raw_data(), g.raw_data(), r.nbytes()), 0) << what;
}

// Static calls of float32 Add/Sub/Mul/Div (the flat case: each input has
// every output element or one) equal compute(), for sizes around the SIMD
// widths and above the parallel grain, on pools of 1, 2 and 3 threads.
TEST(BinaryTest, StaticCallsMatchCompute) {
  std::mt19937 rng(7);
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (int64_t n : {1, 7, 16, 64, 67, 70001}) {
      const Tensor a = random_tensor(Shape{1, n}, rng, 0.5f, 2.f), b = random_tensor(Shape{1, n}, rng, 0.5f, 2.f);
      const Tensor s = random_tensor(Shape{1}, rng, 0.5f, 2.f), s0 = random_tensor(Shape{}, rng, 0.5f, 2.f);
      const std::vector<std::pair<Tensor, Tensor>> pairs = {{a, b}, {a, s}, {s, b}, {s0, a}, {b, s0}};
      for (const auto& [x, y] : pairs) {
        for (int threads : {1, 2, 3}) {
          testing::OpCall call;
          call.op_type = op;
          call.inputs = {Value(x), Value(y)};
          call.threads = threads;
          expect_static_matches(call, std::string(op) + " " + x.shape().to_string() + " " + y.shape().to_string() +
                                          " threads " + std::to_string(threads));
        }
      }
    }
  }
}

// Shapes that need a broadcast plan, other dtypes and legacy broadcasting
// have no static call (those nodes run through compute()).
TEST(BinaryTest, StaticCallsOnlyForTheFlatFloatCase) {
  auto static_status = [](const testing::OpCall& call) { return run_op_static(call).status().code(); };
  testing::OpCall row;
  row.op_type = "Add";
  row.inputs = {Value(f32({1, 2}, {2, 1})), Value(f32({10, 20, 30}, {1, 3}))};
  EXPECT_EQ(static_status(row), StatusCode::kNotFound);
  testing::OpCall ints;
  ints.op_type = "Mul";
  ints.inputs = {Value(testing::ints({1, 2, 3})), Value(testing::ints({4, 5, 6}))};
  EXPECT_EQ(static_status(ints), StatusCode::kNotFound);
  testing::OpCall legacy;
  legacy.op_type = "Add";
  legacy.opset = 6;
  legacy.inputs = {Value(f32({1, 2, 3})), Value(f32({4, 5, 6}))};
  EXPECT_EQ(static_status(legacy), StatusCode::kNotFound);
  testing::OpCall pow;
  pow.op_type = "Pow";
  pow.inputs = {Value(f32({1, 2, 3})), Value(f32({4, 5, 6}))};
  EXPECT_EQ(static_status(pow), StatusCode::kNotFound);
}

}  // namespace
}  // namespace kiln
