#include <cmath>
#include <limits>

#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using namespace kiln::testing;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(CompareLogicTest, EqualBroadcastsIntegers) {
  Tensor y = run_ok("Equal", {make<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}), make<int32_t>({1, 5, 6}, {3})});
  EXPECT_EQ(y.dtype(), DType::kBool);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(bool_values(y), (std::vector<bool>{true, false, false, false, true, true}));
}

TEST(CompareLogicTest, EqualOnStringsAndBools) {
  Tensor s = run_ok("Equal", {strs({"a", "bc", ""}, {3}), strs({"bc"}, {1})}, {}, 19);
  EXPECT_EQ(bool_values(s), (std::vector<bool>{false, true, false}));
  Tensor b = run_ok("Equal", {bools({true, false}, {2}), bools({false, false}, {2})});
  EXPECT_EQ(bool_values(b), (std::vector<bool>{false, true}));
}

TEST(CompareLogicTest, OrderingWithNaN) {
  const Tensor a = f32({1, 2, 3, kNaN}), b = f32({2, 2, 2, 1});
  EXPECT_EQ(bool_values(run_ok("Less", {a, b})), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(bool_values(run_ok("LessOrEqual", {a, b})), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(bool_values(run_ok("Greater", {a, b})), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(bool_values(run_ok("GreaterOrEqual", {a, b})), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(bool_values(run_ok("Equal", {f32({kNaN, kInf}), f32({kNaN, kInf})})), (std::vector<bool>{false, true}));
}

TEST(CompareLogicTest, HalfAndUnsignedComparisons) {
  Tensor h = run_ok("Less", {make<Float16>({Float16(1.f), Float16(3.f)}, {2}), make<Float16>({Float16(2.f)}, {1})});
  EXPECT_EQ(bool_values(h), (std::vector<bool>{true, false}));
  Tensor u = run_ok("Greater", {make<uint64_t>({0, ~uint64_t{0}}, {2}), make<uint64_t>({1}, {1})});
  EXPECT_EQ(bool_values(u), (std::vector<bool>{false, true}));
}

TEST(CompareLogicTest, LegacyComparisonBroadcast) {
  Tensor y = run_ok("Greater", {f32({1, 5, 1, 5}, {2, 2}), f32({2, 4}, {2})}, {attr("broadcast", 1), attr("axis", 0)}, 1);
  EXPECT_EQ(bool_values(y), (std::vector<bool>{false, true, false, true}));
}

TEST(CompareLogicTest, LogicOps) {
  const Tensor a = bools({true, true, false, false}, {2, 2}), b = bools({true, false}, {2});
  EXPECT_EQ(bool_values(run_ok("And", {a, b})), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(bool_values(run_ok("Or", {a, b})), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(bool_values(run_ok("Xor", {a, b})), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(bool_values(run_ok("Not", {a})), (std::vector<bool>{false, false, true, true}));
}

TEST(CompareLogicTest, LogicRejectsNonBool) {
  run_error("And", {make<int32_t>({1}, {1}), make<int32_t>({1}, {1})});
  run_error("Not", {f32({1})});
  run_error("Less", {f32({1}), make<int32_t>({1}, {1})});
  run_error("Equal", {f32({1, 2}), f32({1, 2, 3})});
}

TEST(CompareLogicTest, IsNaNAndIsInf) {
  const Tensor x = f32({-1.7f, kNaN, kInf, -3.6f, -kInf, kInf});
  EXPECT_EQ(bool_values(run_ok("IsNaN", {x})), (std::vector<bool>{false, true, false, false, false, false}));
  EXPECT_EQ(bool_values(run_ok("IsInf", {x})), (std::vector<bool>{false, false, true, false, true, true}));
  EXPECT_EQ(bool_values(run_ok("IsInf", {x}, {attr("detect_positive", 0)})),
            (std::vector<bool>{false, false, false, false, true, false}));
  EXPECT_EQ(bool_values(run_ok("IsInf", {x}, {attr("detect_negative", 0)})),
            (std::vector<bool>{false, false, true, false, false, true}));
  Tensor d = run_ok("IsNaN", {make<double>({std::nan(""), 1.0}, {2})});
  EXPECT_EQ(bool_values(d), (std::vector<bool>{true, false}));
  run_error("IsNaN", {make<int32_t>({1}, {1})});
}

TEST(CompareLogicTest, WhereSameShape) {
  Tensor y = run_ok("Where", {bools({true, false, true, true}, {2, 2}), make<int64_t>({1, 2, 3, 4}, {2, 2}),
                              make<int64_t>({9, 8, 7, 6}, {2, 2})});
  EXPECT_EQ(vals<int64_t>(y), (std::vector<int64_t>{1, 8, 3, 4}));
}

TEST(CompareLogicTest, WhereBroadcastsThreeWays) {
  // cond [2,1,1], x [1,3,1], y [1,1,2] -> [2,3,2]
  Tensor y = run_ok("Where", {bools({true, false}, {2, 1, 1}), f32({1, 2, 3}, {1, 3, 1}), f32({-1, -2}, {1, 1, 2})});
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  expect_floats(y, {1, 1, 2, 2, 3, 3, -1, -2, -1, -2, -1, -2});
}

TEST(CompareLogicTest, WhereOnStringsAndScalars) {
  Tensor y = run_ok("Where", {bools({true, false, true}, {3}), strs({"yes"}, {}), strs({"n1", "n2", "n3"}, {3})});
  EXPECT_EQ(vals<std::string>(y), (std::vector<std::string>{"yes", "n2", "yes"}));
}

TEST(CompareLogicTest, WhereErrors) {
  std::string e = run_error("Where", {f32({1}), f32({1}), f32({2})});
  EXPECT_NE(e.find("condition"), std::string::npos) << e;
  run_error("Where", {bools({true}, {1}), f32({1}), make<double>({2}, {1})});
  run_error("Where", {bools({true, false}, {2}), f32({1, 2, 3}), f32({2})});
  run_error("Where", {bools({true, false}, {2}), f32({1, 2}), f32({2, 3, 4})});
}

}  // namespace
}  // namespace kiln
