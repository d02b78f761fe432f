// Random (often invalid) shapes and attributes for the sliding-window ops:
// every call must either succeed with the output shape it promised or fail
// with an error naming the node. Run under ASan/UBSan to catch what a bad
// model could do to memory.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/testing/kernel_runner.h"

namespace kiln {
namespace {

using testing::attr;

std::vector<int64_t> random_ints(std::mt19937& rng, size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int64_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

Shape random_shape(std::mt19937& rng, size_t rank, int lo, int hi) { return Shape(random_ints(rng, rank, lo, hi)); }

TEST(WindowOpsFuzzTest, BadInputsFailCleanly) {
  std::mt19937 rng(71);
  std::uniform_int_distribution<int> u(0, 1 << 20);
  const char* ops[] = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "MaxUnpool", "ConvInteger"};
  int ok = 0, failed = 0;
  for (int t = 0; t < 3000; ++t) {
    const std::string op = ops[u(rng) % std::size(ops)];
    const size_t spatial = 1 + u(rng) % 3;
    const size_t rank = u(rng) % 8 == 0 ? u(rng) % 6 : spatial + 2;  // sometimes a wrong rank
    const bool integer = op == "ConvInteger";
    const DType dt = integer ? DType::kUInt8 : DType::kFloat32;
    Tensor x = Tensor::zeros(dt, random_shape(rng, rank, 0, 6));
    std::vector<Value> inputs{x};
    if (op.rfind("Conv", 0) == 0) {
      inputs.push_back(Tensor::zeros(dt, random_shape(rng, u(rng) % 8 == 0 ? rank + 1 : rank, 0, 4)));
      if (!integer && u(rng) % 2) inputs.push_back(Tensor::zeros(dt, random_shape(rng, 1, 0, 5)));
    }
    if (op == "MaxUnpool") inputs.push_back(Tensor::zeros(DType::kInt64, u(rng) % 4 ? x.shape() : Shape{2}));
    std::vector<ir::Attribute> attrs;
    const size_t alen = u(rng) % 6 == 0 ? spatial + 1 : spatial;  // sometimes the wrong length
    if (op != "Conv" && op != "ConvTranspose" && op != "ConvInteger") {
      if (u(rng) % 10) attrs.push_back(attr("kernel_shape", random_ints(rng, alen, 0, 4)));
    } else if (u(rng) % 3 == 0) {
      attrs.push_back(attr("kernel_shape", random_ints(rng, alen, 0, 4)));
    }
    if (u(rng) % 2) attrs.push_back(attr("strides", random_ints(rng, alen, -1, 3)));
    if (u(rng) % 2) attrs.push_back(attr("pads", random_ints(rng, 2 * alen, -1, 4)));
    if (u(rng) % 3 == 0) attrs.push_back(attr("dilations", random_ints(rng, alen, 0, 3)));
    if (u(rng) % 4 == 0) attrs.push_back(attr("auto_pad", u(rng) % 2 ? "SAME_LOWER" : "VALID"));
    if (u(rng) % 4 == 0) attrs.push_back(attr("ceil_mode", int64_t{1}));
    if (u(rng) % 3 == 0) attrs.push_back(attr("group", int64_t{u(rng) % 4}));
    if (op == "ConvTranspose" && u(rng) % 3 == 0) attrs.push_back(attr("output_padding", random_ints(rng, alen, -1, 2)));
    if (op == "ConvTranspose" && u(rng) % 4 == 0) attrs.push_back(attr("output_shape", random_ints(rng, alen, 0, 12)));
    testing::OpCall call;
    call.op_type = op;
    call.inputs = inputs;
    call.attrs = attrs;
    call.opset = integer ? 10 : (op == "MaxUnpool" ? 11 : 13);
    call.num_outputs = op == "MaxPool" && u(rng) % 2 ? 2 : 1;
    call.threads = u(rng) % 4 == 0 ? 2 : 1;
    auto r = testing::run_op(call);
    if (r.ok()) {
      ++ok;
      for (const Value& v : *r) ASSERT_TRUE(v.is_tensor()) << op;
    } else {
      ++failed;
      EXPECT_NE(r.status().message().find(op), std::string::npos) << r.status().message();
    }
  }
  // Both outcomes must actually occur for the sweep to mean anything.
  EXPECT_GT(ok, 100);
  EXPECT_GT(failed, 100);
}

}  // namespace
}  // namespace kiln
