// simdev's kernels through the runtime (Program with --backends simdev,
// fallback require) against portable kernels: numpy broadcasting for Add,
// numpy MatMul shapes, Relu, and Conv with pads, strides, dilations, groups
// and bias (the im2col workspace).
#include <gtest/gtest.h>

#include "../abi_test_util.h"

namespace kiln::abi_test {
namespace {

std::shared_ptr<BackendRegistry> reg() {
  static std::shared_ptr<BackendRegistry> r = registry_of({KILN_SIMDEV_PLUGIN});
  return r;
}

void expect_matches_portable(const std::string& op, std::vector<std::vector<int64_t>> shapes, std::vector<int64_t> out,
                             std::vector<ir::Attribute> attrs = {}, size_t num_constants = 0) {
  GraphBuilder b;
  std::vector<ir::ValueId> ins;
  std::vector<Value> values;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor t = random_tensor(shapes[i], 7 + static_cast<uint32_t>(i));
    if (i + num_constants >= shapes.size()) {
      ins.push_back(b.constant("c" + std::to_string(i), std::move(t)));
    } else {
      ins.push_back(b.input("in" + std::to_string(i), shapes[i]));
      values.emplace_back(std::move(t));
    }
  }
  b.output(b.node(op, ins, "n", out, DType::kFloat32, "", std::move(attrs)));
  SCOPED_TRACE(op + " first rank " + std::to_string(shapes[0].size()) + " -> " + Shape(out).to_string());
  auto t = build(b.graph(), reg().get(), {"simdev"}, {}, FallbackPolicy::kRequire);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  auto p = build(b.graph(), nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto x = (*t)->run(values, {}, nullptr);
  auto y = (*p)->run(values, {}, nullptr);
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_close(x.value()[0].tensor(), y.value()[0].tensor(), 1e-4f);
}

ir::Attribute ints(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInts;
  a.ints = std::move(v);
  return a;
}
ir::Attribute one(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::AttrType::kInt;
  a.i = v;
  return a;
}

TEST(SimdevKernels, AddBroadcastsLikeNumpy) {
  const std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}, {2, 3, 4}},
      {{1, 3, 1}, {2, 1, 5}, {2, 3, 5}}, {{}, {2, 2}, {2, 2}},        {{0, 3}, {3}, {0, 3}},
      {{3, 1, 2, 1}, {1, 4, 1, 5}, {3, 4, 2, 5}}};
  for (const auto& [a, b, out] : cases) expect_matches_portable("Add", {a, b}, out);
}

TEST(SimdevKernels, MatMulFollowsNumpyShapes) {
  expect_matches_portable("MatMul", {{3}, {3}}, {});
  expect_matches_portable("MatMul", {{3}, {3, 4}}, {4});
  expect_matches_portable("MatMul", {{2, 3}, {3}}, {2});
  expect_matches_portable("MatMul", {{2, 3}, {3, 4}}, {2, 4});
  expect_matches_portable("MatMul", {{2, 5, 3}, {3, 4}}, {2, 5, 4});
  expect_matches_portable("MatMul", {{2, 1, 2, 3}, {4, 3, 5}}, {2, 4, 2, 5});
  expect_matches_portable("MatMul", {{2, 3}, {3, 4}}, {2, 4}, {}, 1);  // a constant weight on the device
}

TEST(SimdevKernels, ReluClampsNegatives) { expect_matches_portable("Relu", {{2, 3, 5}}, {2, 3, 5}); }

TEST(SimdevKernels, ConvMatchesPortable) {
  // x, weight (constant), bias (constant) -> y, with attributes.
  expect_matches_portable("Conv", {{1, 3, 8, 8}, {4, 3, 3, 3}}, {1, 4, 6, 6}, {}, 1);
  expect_matches_portable("Conv", {{2, 3, 8, 8}, {4, 3, 3, 3}, {4}}, {2, 4, 8, 8}, {ints("pads", {1, 1, 1, 1})}, 2);
  expect_matches_portable("Conv", {{1, 4, 9, 7}, {6, 2, 3, 2}, {6}}, {1, 6, 4, 4},
                          {one("group", 2), ints("strides", {2, 2}), ints("pads", {0, 1, 1, 0})}, 2);
  expect_matches_portable("Conv", {{1, 2, 9, 9}, {2, 2, 3, 3}}, {1, 2, 5, 5}, {ints("dilations", {2, 2})}, 1);
  expect_matches_portable("Conv", {{1, 4, 6, 6}, {4, 1, 3, 3}}, {1, 4, 4, 4}, {one("group", 4)}, 1);  // depthwise
}

}  // namespace
}  // namespace kiln::abi_test
