// The xnnpack plugin against portable kernels, one parametrized case per
// point of each claimed op's attribute space: every case builds a one-node
// graph (a second Relu node checks the fused output clamp where it applies),
// requires the plugin to claim it (fallback require), and compares the
// outputs with portable kernels'. Also: nodes the plugin must decline, with
// their reasons, and export/import of a compiled partition.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "xnnpack_test_util.h"

namespace kiln::abi_test {
namespace {

ir::Attribute a_str(const char* n, std::string v) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::AttrType::kString;
  a.s = std::move(v);
  return a;
}

// One operand of the node under test.
struct Operand {
  enum Kind { kInput, kPositiveInput, kConst, kPositive, kFloats, kInts, kOmitted } kind = kInput;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;  // kInts: the int64 values; dims = {size}
  std::vector<float> floats;  // kFloats: the values
};
Operand in(std::vector<int64_t> d) { return {Operand::kInput, std::move(d), {}, {}}; }
Operand cst(std::vector<int64_t> d) { return {Operand::kConst, std::move(d), {}, {}}; }
Operand pos(std::vector<int64_t> d) { return {Operand::kPositive, std::move(d), {}, {}}; }
Operand ints(std::vector<int64_t> v) { return {Operand::kInts, {static_cast<int64_t>(v.size())}, std::move(v), {}}; }
Operand omitted() { return {Operand::kOmitted, {}, {}, {}}; }
Operand pin(std::vector<int64_t> d) { return {Operand::kPositiveInput, std::move(d), {}, {}}; }
Operand scalar(float x) { return {Operand::kFloats, {}, {}, {x}}; }

struct Case {
  std::string name;
  std::string op;
  std::vector<Operand> operands;
  std::vector<ir::Attribute> attrs;
  std::vector<int64_t> out;
  bool then_relu = false;  // a Relu after the node (fused into its output clamp)
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

// The graph of a case, and random values for its run-time inputs.
std::shared_ptr<ir::Graph> graph_of(const Case& c, std::vector<Value>* values) {
  GraphBuilder b;
  std::vector<ir::ValueId> ids;
  uint32_t seed = 7;
  for (size_t i = 0; i < c.operands.size(); ++i) {
    const Operand& o = c.operands[i];
    const std::string name = "x" + std::to_string(i);
    if (o.kind == Operand::kOmitted) {
      ids.push_back(ir::kNoValue);
    } else if (o.kind == Operand::kInput || o.kind == Operand::kPositiveInput) {
      ids.push_back(b.input(name, o.dims));
      Tensor t = random_tensor(o.dims, seed++);
      if (o.kind == Operand::kPositiveInput)
        for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = std::fabs(t.data<float>()[k]);
      values->emplace_back(std::move(t));
    } else if (o.kind == Operand::kFloats) {
      Tensor t = Tensor::allocate(DType::kFloat32, Shape(o.dims));
      t.data<float>()[0] = o.floats[0];
      ids.push_back(b.constant(name, std::move(t)));
    } else if (o.kind == Operand::kInts) {
      ids.push_back(b.constant(name, Tensor::from_vector<int64_t>(o.ints)));
    } else {
      Tensor t = random_tensor(o.dims, seed++);
      if (o.kind == Operand::kPositive)
        for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = std::fabs(t.data<float>()[k]) + 0.1f;
      ids.push_back(b.constant(name, std::move(t)));
    }
  }
  ir::ValueId y = b.node(c.op, ids, "n", c.out, DType::kFloat32, "", c.attrs);
  if (c.then_relu) y = b.node("Relu", {y}, "relu", c.out);
  b.output(y);
  return b.graph();
}

class XnnpackOp : public ::testing::TestWithParam<Case> {};

TEST_P(XnnpackOp, MatchesPortableKernels) {
  const Case& c = GetParam();
  std::vector<Value> values;
  std::shared_ptr<ir::Graph> g = graph_of(c, &values);
  // Light and dense groups (element-wise, fully connected) are claimed too,
  // so each op is tested alone.
  auto x = build(g, reg().get(), {"xnnpack"},
                 {{"xnnpack", "skip_light_groups", "false"}, {"xnnpack", "dense_groups", "true"}, claim_all()},
                 FallbackPolicy::kRequire);
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  auto p = build(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  for (int run = 0; run < 2; ++run) {  // the second run reuses every buffer
    auto a = (*x)->run(values, {}, nullptr);
    auto e = (*p)->run(values, {}, nullptr);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    expect_close(a.value()[0].tensor(), e.value()[0].tensor(), 1e-4f);
  }
}

int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1;
}

std::vector<Case> conv_cases() {
  std::vector<Case> v;
  struct G { int64_t c, m, group; const char* tag; };
  for (G g : {G{4, 8, 1, "regular"}, G{8, 8, 8, "depthwise"}, G{4, 8, 4, "depthwise_x2"}, G{8, 12, 2, "grouped"}}) {
    for (int64_t k : {1, 3, 5}) {
      for (int64_t s : {1, 2}) {
        for (int64_t d : {1, 2}) {
          if (k == 1 && d == 2) continue;
          for (int64_t p : {0, 1}) {
            const int64_t h = 11, w = 9;
            const int64_t oh = conv_out(h, k, s, d, p, p + (k > 1 ? 1 : 0)), ow = conv_out(w, k, s, d, p, p);
            const std::string name = std::string("Conv_") + g.tag + "_k" + std::to_string(k) + "_s" + std::to_string(s) +
                                     "_d" + std::to_string(d) + "_p" + std::to_string(p);
            v.push_back({name, "Conv", {in({1, g.c, h, w}), cst({g.m, g.c / g.group, k, k}), cst({g.m})},
                         {a_int("group", g.group), a_ints("strides", {s, s}), a_ints("dilations", {d, d}),
                          a_ints("pads", {p, p, p + (k > 1 ? 1 : 0), p}), a_ints("kernel_shape", {k, k})},
                         {1, g.m, oh, ow}, p == 1});
          }
        }
      }
    }
  }
  for (const char* ap : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    for (int64_t s : {1, 2}) {
      const int64_t o = std::string(ap) == "VALID" ? conv_out(10, 4, s, 1, 0, 0) : (10 + s - 1) / s;
      v.push_back({std::string("Conv_auto_") + ap + "_s" + std::to_string(s), "Conv",
                   {in({2, 3, 10, 10}), cst({5, 3, 4, 4})}, {a_str("auto_pad", ap), a_ints("strides", {s, s})},
                   {2, 5, o, o}});
    }
  }
  v.push_back({"Conv_rect_kernel_no_bias", "Conv", {in({1, 3, 8, 12}), cst({6, 3, 3, 1})},
               {a_ints("pads", {1, 0, 1, 0})}, {1, 6, 8, 12}});
  return v;
}

std::vector<Case> dense_cases() {
  std::vector<Case> v;
  v.push_back({"Gemm_plain", "Gemm", {in({3, 20}), cst({20, 7}), cst({7})}, {}, {3, 7}});
  v.push_back({"Gemm_transB_relu", "Gemm", {in({2, 16}), cst({9, 16}), cst({1, 9})}, {a_int("transB", 1)}, {2, 9}, true});
  v.push_back({"Gemm_alpha_beta", "Gemm", {in({4, 5}), cst({5, 6}), cst({6})},
               {a_float("alpha", 0.5f), a_float("beta", 2.0f)}, {4, 6}});
  v.push_back({"Gemm_scalar_bias", "Gemm", {in({4, 5}), cst({5, 6}), cst({1})}, {}, {4, 6}});
  v.push_back({"Gemm_no_bias", "Gemm", {in({1, 64}), cst({64, 10})}, {}, {1, 10}});
  v.push_back({"MatMul_2d", "MatMul", {in({5, 12}), cst({12, 3})}, {}, {5, 3}});
  v.push_back({"MatMul_3d", "MatMul", {in({2, 7, 12}), cst({12, 9})}, {}, {2, 7, 9}});
  return v;
}

std::vector<Case> pool_cases() {
  std::vector<Case> v;
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (int64_t k : {2, 3}) {
      for (int64_t s : {1, 2}) {
        for (int64_t p : {0, 1}) {
          if (p >= k) continue;
          const int64_t o = conv_out(9, k, s, 1, p, p);
          v.push_back({std::string(op) + "_k" + std::to_string(k) + "_s" + std::to_string(s) + "_p" + std::to_string(p), op,
                       {in({1, 5, 9, 9})}, {a_ints("kernel_shape", {k, k}), a_ints("strides", {s, s}), a_ints("pads", {p, p, p, p})},
                       {1, 5, o, o}, std::string(op) == "MaxPool" && p == 1});
        }
      }
    }
  }
  v.push_back({"MaxPool_ceil", "MaxPool", {in({1, 4, 10, 10})},
               {a_ints("kernel_shape", {3, 3}), a_ints("strides", {2, 2}), a_int("ceil_mode", 1)}, {1, 4, 5, 5}});
  v.push_back({"MaxPool_dilated", "MaxPool", {in({1, 4, 10, 10})},
               {a_ints("kernel_shape", {2, 2}), a_ints("dilations", {2, 2})}, {1, 4, 8, 8}});
  v.push_back({"MaxPool_same_upper", "MaxPool", {in({1, 4, 7, 7})},
               {a_ints("kernel_shape", {3, 3}), a_ints("strides", {2, 2}), a_str("auto_pad", "SAME_UPPER")}, {1, 4, 4, 4}});
  v.push_back({"GlobalAveragePool", "GlobalAveragePool", {in({2, 6, 5, 7})}, {}, {2, 6, 1, 1}, true});
  return v;
}

std::vector<Case> elementwise_cases() {
  std::vector<Case> v;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    const std::string o = op;
    v.push_back({o + "_same_4d", op, {in({1, 3, 4, 5}), in({1, 3, 4, 5})}, {}, {1, 3, 4, 5}, o == "Add"});
    v.push_back({o + "_channel_const", op, {in({2, 3, 4, 5}), pos({3, 1, 1})}, {}, {2, 3, 4, 5}});
    v.push_back({o + "_const_first", op, {pos({1, 3, 1, 5}), in({2, 3, 4, 5})}, {}, {2, 3, 4, 5}});
    v.push_back({o + "_2d_row", op, {in({4, 6}), pos({6})}, {}, {4, 6}});
    v.push_back({o + "_3d_broadcast", op, {in({2, 1, 6}), in({3, 1})}, {}, {2, 3, 6}});
  }
  for (const char* op : {"Sigmoid", "HardSwish", "Abs", "Neg", "Floor", "Ceil", "Relu", "Elu", "LeakyRelu", "HardSigmoid"})
    v.push_back({std::string(op) + "_4d", op, {in({1, 3, 4, 5})}, {}, {1, 3, 4, 5}});
  v.push_back({"Sqrt_2d", "Sqrt", {pin({4, 5})}, {}, {4, 5}});
  v.push_back({"Elu_alpha", "Elu", {in({2, 7})}, {a_float("alpha", 0.3f)}, {2, 7}});
  v.push_back({"LeakyRelu_alpha", "LeakyRelu", {in({2, 7})}, {a_float("alpha", 0.2f)}, {2, 7}});
  v.push_back({"HardSigmoid_alpha_beta", "HardSigmoid", {in({2, 7})}, {a_float("alpha", 0.3f), a_float("beta", 0.4f)}, {2, 7}});
  v.push_back({"Clip_min_max", "Clip", {in({1, 3, 4, 5}), scalar(-0.5f), scalar(1.25f)}, {}, {1, 3, 4, 5}});
  v.push_back({"Clip_min_only", "Clip", {in({3, 5}), scalar(0.1f), omitted()}, {}, {3, 5}});
  v.push_back({"Clip_max_only", "Clip", {in({3, 5}), omitted(), scalar(0.7f)}, {}, {3, 5}});
  v.push_back({"PRelu_channel", "PRelu", {in({1, 4, 3, 3}), cst({4, 1, 1})}, {}, {1, 4, 3, 3}});
  v.push_back({"PRelu_2d", "PRelu", {in({3, 4}), cst({4})}, {}, {3, 4}});
  return v;
}

std::vector<Case> shape_cases() {
  std::vector<Case> v;
  v.push_back({"Softmax_2d", "Softmax", {in({3, 10})}, {}, {3, 10}});
  v.push_back({"Softmax_3d_last", "Softmax", {in({2, 3, 10})}, {a_int("axis", -1)}, {2, 3, 10}});
  v.push_back({"Flatten_1x1", "Flatten", {in({2, 8, 1, 1})}, {}, {2, 8}});
  v.push_back({"Reshape_2d", "Reshape", {in({4, 6}), ints({3, 8})}, {}, {3, 8}});
  v.push_back({"Reshape_to_4d", "Reshape", {in({2, 8}), ints({2, 8, 1, 1})}, {}, {2, 8, 1, 1}});
  v.push_back({"Squeeze", "Squeeze", {in({2, 8, 1, 1}), ints({2, 3})}, {}, {2, 8}});
  v.push_back({"Unsqueeze", "Unsqueeze", {in({2, 8}), ints({0})}, {}, {1, 2, 8}});
  v.push_back({"Identity", "Identity", {in({2, 3, 4, 5})}, {}, {2, 3, 4, 5}});
  v.push_back({"BatchNormalization_4d", "BatchNormalization", {in({2, 3, 4, 5}), cst({3}), cst({3}), cst({3}), pos({3})},
               {a_float("epsilon", 1e-3f)}, {2, 3, 4, 5}, true});
  v.push_back({"BatchNormalization_2d", "BatchNormalization", {in({4, 3}), cst({3}), cst({3}), cst({3}), pos({3})}, {}, {4, 3}});
  v.push_back({"Pad_4d", "Pad", {in({1, 2, 3, 4}), ints({0, 0, 1, 2, 0, 0, 2, 1}), scalar(0.5f)}, {}, {1, 2, 6, 7}});
  v.push_back({"Pad_2d_zero", "Pad", {in({3, 4}), ints({1, 0, 0, 2})}, {}, {4, 6}});
  v.push_back({"Concat_channels", "Concat", {in({1, 3, 4, 5}), in({1, 2, 4, 5})}, {a_int("axis", 1)}, {1, 5, 4, 5}});
  v.push_back({"Concat_height", "Concat", {in({1, 3, 2, 5}), in({1, 3, 4, 5})}, {a_int("axis", 2)}, {1, 3, 6, 5}});
  v.push_back({"Concat_2d", "Concat", {in({2, 3}), in({2, 4}), in({2, 1})}, {a_int("axis", -1)}, {2, 8}});
  v.push_back({"DepthToSpace_DCR", "DepthToSpace", {in({1, 8, 2, 3})}, {a_int("blocksize", 2)}, {1, 2, 4, 6}});
  for (const char* ct : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
    v.push_back({std::string("Resize_") + ct, "Resize", {in({1, 3, 4, 5}), omitted(), omitted(), ints({1, 3, 7, 10})},
                 {a_str("mode", "linear"), a_str("coordinate_transformation_mode", ct)}, {1, 3, 7, 10}});
  }
  return v;
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (auto f : {conv_cases, dense_cases, pool_cases, elementwise_cases, shape_cases})
    for (Case& c : f()) v.push_back(std::move(c));
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ops, XnnpackOp, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });


// 3x3 depthwise convolutions the plugin runs on its own kernel
// (xnn_dwconv.h) rather than XNNPACK's: channel counts of 16n, strides 1
// and 2, symmetric and lopsided pads, widths that leave 0..3 pixels after the
// blocks of four, batches, with and without bias and fused clamp; each
// variant of the kernel the CPU runs (AVX-512F, AVX2+FMA: capped with
// KILN_XNNPACK_ISA). Each runs against portable kernels, and the partition's
// compile diagnostics must say the kernel ran it with that variant (on a CPU
// with neither, that XNNPACK did).
struct DwCase {
  int64_t n, c, h, w, stride;
  std::vector<int64_t> pads;  // top, left, bottom, right
  bool bias, relu;
  const char* isa;  // KILN_XNNPACK_ISA
};

std::string dw_name(const DwCase& d) {
  std::string s = "n" + std::to_string(d.n) + "_c" + std::to_string(d.c) + "_" + std::to_string(d.h) + "x" +
                  std::to_string(d.w) + "_s" + std::to_string(d.stride) + "_p";
  for (int64_t p : d.pads) s += std::to_string(p);
  return s + (d.bias ? "_bias" : "") + (d.relu ? "_relu" : "") + "_" + d.isa;
}

std::vector<DwCase> dw_cases() {
  std::vector<DwCase> v;
  for (int64_t c : {16, 48})
    for (int64_t s : {1, 2})
      for (std::vector<int64_t> p : {std::vector<int64_t>{1, 1, 1, 1}, {0, 0, 0, 0}, {1, 0, 2, 1}, {2, 2, 0, 1}})
        for (int64_t w : {5, 12, 15})
          for (const char* isa : {"avx512", "avx2"})  // avx512 runs as avx2 on an AVX2-only CPU
            if (isa != std::string("avx512") || plugin_kernel_isa(isa) == "avx512")
              v.push_back({w == 12 ? 2 : 1, c, 7, w, s, p, w != 15, w == 5, isa});
  return v;
}

class XnnpackNativeDepthwise : public ::testing::TestWithParam<DwCase> {};

TEST_P(XnnpackNativeDepthwise, MatchesPortableKernels) {
  const DwCase& d = GetParam();
  const int64_t oh = conv_out(d.h, 3, d.stride, 1, d.pads[0], d.pads[2]);
  const int64_t ow = conv_out(d.w, 3, d.stride, 1, d.pads[1], d.pads[3]);
  Case c{"dw", "Conv", {in({d.n, d.c, d.h, d.w}), cst({d.c, 1, 3, 3})},
         {a_int("group", d.c), a_ints("strides", {d.stride, d.stride}), a_ints("kernel_shape", {3, 3}), a_ints("pads", d.pads)},
         {d.n, d.c, oh, ow}, d.relu};
  if (d.bias) c.operands.push_back(cst({d.c}));
  std::vector<Value> values;
  std::shared_ptr<ir::Graph> g = graph_of(c, &values);
  ScopedEnv isa("KILN_XNNPACK_ISA", d.isa);
  auto x = build(g, reg().get(), {"xnnpack"}, {claim_all()}, FallbackPolicy::kRequire);
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  const PlacementReport& r = (*x)->placement();
  ASSERT_EQ(r.partitions.size(), 1u);
  ASSERT_EQ(r.partitions[0].diagnostics.size(), 1u);
  const std::string want = plugin_kernel_isa(d.isa);
  const std::string& log = r.partitions[0].diagnostics[0];
  EXPECT_NE(log.find(want != "none" ? "1 depthwise run by the plugin's kernel" : "0 depthwise run by the plugin's kernel"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("; plugin kernels: " + want), std::string::npos) << log;
  auto p = build(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  for (int run = 0; run < 2; ++run) {
    auto a = (*x)->run(values, {}, nullptr);
    auto e = (*p)->run(values, {}, nullptr);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    expect_close(a.value()[0].tensor(), e.value()[0].tensor(), 1e-4f);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, XnnpackNativeDepthwise, ::testing::ValuesIn(dw_cases()),
                         [](const ::testing::TestParamInfo<DwCase>& i) { return dw_name(i.param); });

}  // namespace
}  // namespace kiln::abi_test
