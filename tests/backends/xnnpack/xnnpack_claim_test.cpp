// The xnnpack plugin's claim policy (backends/xnnpack/xnn_claim.h and the
// declines of the lowering): what it takes and what it leaves to portable
// kernels, and why. Each rule has a case where it fires and one where it
// does not, and whatever is claimed matches portable kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "xnnpack_test_util.h"

namespace kiln::abi_test {
namespace {

using Options = std::vector<BackendOption>;

// The reason xnnpack gave for node `name` ("" when the plugin runs it).
std::string reason_of(const PlacementReport& r, const std::string& name) {
  for (const NodePlacement& n : r.nodes) {
    if (n.node.find("'" + name + "'") == std::string::npos) continue;
    if (n.placement == "xnnpack") return "";
    for (const auto& [backend, why] : n.reasons)
      if (backend == "xnnpack") return why;
    return "(no xnnpack reason)";
  }
  return "(no such node)";
}

Tensor scaled(std::vector<int64_t> dims, uint32_t seed, float s) {
  Tensor t = random_tensor(std::move(dims), seed);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] *= s;
  return t;
}

ir::ValueId conv(GraphBuilder& b, ir::ValueId x, const std::string& name, int64_t cin, int64_t cout, int64_t k,
                 int64_t h, int64_t w, int64_t group = 1) {
  const int64_t p = (k - 1) / 2;
  return b.node("Conv",
                {x, b.constant(name + "_w", scaled({cout, cin / group, k, k}, static_cast<uint32_t>(name.size() * 7 + cout), 0.2f)),
                 b.constant(name + "_b", scaled({cout}, static_cast<uint32_t>(cout + 3), 0.5f))},
                name, {1, cout, h, w}, DType::kFloat32, "",
                {a_int("group", group), a_ints("kernel_shape", {k, k}), a_ints("pads", {p, p, p, p})});
}

// Builds `g` on xnnpack (fallback allowed) and on portable kernels, runs
// both on the same input and compares; returns the xnnpack placement.
PlacementReport run_both(std::shared_ptr<ir::Graph> g, const std::vector<int64_t>& in_dims, const Options& opts) {
  auto x = build(g, reg().get(), {"xnnpack"}, opts, FallbackPolicy::kAllow);
  EXPECT_TRUE(x.ok()) << x.status().to_string();
  if (!x.ok()) return {};
  auto p = build(g, nullptr, {});
  EXPECT_TRUE(p.ok());
  std::vector<Value> in{Value(random_tensor(in_dims, 5))};
  auto a = (*x)->run(in, {}, nullptr);
  auto e = (*p)->run(in, {}, nullptr);
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_TRUE(e.ok());
  if (a.ok() && e.ok()) expect_close(a.value()[0].tensor(), e.value()[0].tensor(), 1e-4f);
  return (*x)->placement();
}

// Conv -> HardSigmoid(alpha, beta) -> Mul(conv, gate) [-> second reader of the gate].
struct GateCase {
  float alpha, beta;
  bool gate_first;    // Mul(gate, x) instead of Mul(x, gate)
  bool gate_read_twice;
  const char* expect;  // in the compile line
};

TEST(XnnpackClaim, SelfGatedHardSigmoidRunsAsOneHardSwish) {
  for (const GateCase& c : {GateCase{1.f / 6.f, 0.5f, false, false, "4 nodes -> 3 XNNPACK ops"},
                            GateCase{1.f / 6.f, 0.5f, true, false, "4 nodes -> 3 XNNPACK ops"},
                            GateCase{0.2f, 0.5f, false, false, "4 nodes -> 4 XNNPACK ops"},
                            GateCase{1.f / 6.f, 0.5f, false, true, "5 nodes -> 5 XNNPACK ops"}}) {
    SCOPED_TRACE(std::string(c.expect) + (c.gate_first ? " gate first" : ""));
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 16, 12, 12});
    ir::ValueId y = conv(b, x, "conv", 16, 16, 3, 12, 12);
    ir::ValueId g = b.node("HardSigmoid", {y}, "gate", {1, 16, 12, 12}, DType::kFloat32, "",
                           {a_float("alpha", c.alpha), a_float("beta", c.beta)});
    ir::ValueId m = b.node("Mul", c.gate_first ? std::vector<ir::ValueId>{g, y} : std::vector<ir::ValueId>{y, g}, "mul",
                           {1, 16, 12, 12});
    if (c.gate_read_twice) m = b.node("Add", {m, g}, "add", {1, 16, 12, 12});
    b.output(b.node("Relu", {m}, "relu", {1, 16, 12, 12}));
    const PlacementReport r = run_both(b.graph(), {1, 16, 12, 12}, {{"xnnpack", "min_macs_per_byte", "0"}});
    ASSERT_EQ(r.partitions.size(), 1u);
    ASSERT_EQ(r.partitions[0].diagnostics.size(), 1u);
    EXPECT_NE(r.partitions[0].diagnostics[0].find(c.expect), std::string::npos) << r.partitions[0].diagnostics[0];
  }
}

TEST(XnnpackClaim, DepthwiseOutsideXnnpacksKernelSizesStaysOnPortable) {
  for (int64_t k : {3, 5, 7}) {
    SCOPED_TRACE("depthwise " + std::to_string(k) + "x" + std::to_string(k));
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 32, 10, 10});
    b.output(b.node("Relu", {conv(b, x, "dw", 32, 32, k, 10, 10, 32)}, "relu", {1, 32, 10, 10}));
    const PlacementReport r = run_both(b.graph(), {1, 32, 10, 10}, {{"xnnpack", "min_macs_per_byte", "0"}});
    const std::string why = reason_of(r, "dw");
    if (k == 7) EXPECT_NE(why.find("depthwise Conv 7x7"), std::string::npos) << why;
    else EXPECT_EQ(why, "");
  }
}

// One convolution between two boundary transposes: a 1x1 on a 32x32 map
// (4 MACs per transposed byte) does not pay for them, a 3x3 64 -> 64 on 8x8
// (72 per byte) does; option 0 claims both.
TEST(XnnpackClaim, PartitionsTooSmallForTheirTransposesAreDeclined) {
  struct SizeCase {
    int64_t cin, cout, k, hw;
    const char* threshold;
    bool claimed;
  };
  for (const SizeCase& c : {SizeCase{16, 16, 1, 32, "40", false}, SizeCase{16, 16, 1, 32, "0", true},
                            SizeCase{64, 64, 3, 8, "40", true}, SizeCase{64, 64, 3, 8, "100", false}}) {
    SCOPED_TRACE(std::to_string(c.k) + "x" + std::to_string(c.k) + " on " + std::to_string(c.hw) + ", min " + c.threshold);
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, c.cin, c.hw, c.hw});
    b.output(b.node("Relu", {conv(b, x, "conv", c.cin, c.cout, c.k, c.hw, c.hw)}, "relu", {1, c.cout, c.hw, c.hw}));
    const PlacementReport r = run_both(b.graph(), {1, c.cin, c.hw, c.hw}, {{"xnnpack", "min_macs_per_byte", c.threshold}});
    const std::string why = reason_of(r, "conv");
    if (c.claimed) {
      EXPECT_EQ(why, "");
    } else {
      EXPECT_NE(why.find("partition too small to pay its layout transposes"), std::string::npos) << why;
      EXPECT_EQ(reason_of(r, "relu"), why);  // the whole part goes
    }
  }
}

// A 1x1 Conv is a GEMM portable kernels run as fast: alone (512 -> 512 on
// 4x4: 64 MACs per transposed byte) it is declined; next to a depthwise
// Conv (an inverted-residual block the plugin fuses: 1x1 -> Relu -> 3x3
// depthwise -> 1x1, 256 channels on 4x4, also 64 per byte) it counts.
TEST(XnnpackClaim, PointwiseConvsCountOnlyInInvertedResidualBlocks) {
  {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 512, 4, 4});
    b.output(conv(b, x, "pw", 512, 512, 1, 4, 4));
    const PlacementReport r = run_both(b.graph(), {1, 512, 4, 4}, {});
    EXPECT_NE(reason_of(r, "pw").find("0 MACs of convolutions XNNPACK runs faster"), std::string::npos) << reason_of(r, "pw");
  }
  {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 256, 4, 4});
    ir::ValueId e = b.node("Relu", {conv(b, x, "expand", 256, 256, 1, 4, 4)}, "relu", {1, 256, 4, 4});
    ir::ValueId d = conv(b, e, "dw", 256, 256, 3, 4, 4, 256);
    b.output(conv(b, d, "project", 256, 256, 1, 4, 4));
    const PlacementReport r = run_both(b.graph(), {1, 256, 4, 4}, {});
    EXPECT_EQ(reason_of(r, "expand"), "");
    EXPECT_EQ(reason_of(r, "project"), "");
  }
}

// convA -> Tanh (not claimable) -> Add(convA, tanh) -> convB: the group
// {convA, add, convB} is not convex, so the host would split it; each part
// is judged with its own boundary: convA (3x3 64 -> 64 on 8x8) pays, the
// part {add, convB 1x1} does not.
TEST(XnnpackClaim, EachConvexPartIsJudgedOnItsOwnBoundary) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 64, 8, 8});
  ir::ValueId a = conv(b, x, "convA", 64, 64, 3, 8, 8);
  ir::ValueId t = b.node("Tanh", {a}, "tanh", {1, 64, 8, 8});
  ir::ValueId s = b.node("Add", {a, t}, "add", {1, 64, 8, 8});
  b.output(conv(b, s, "convB", 64, 64, 1, 8, 8));
  const PlacementReport r = run_both(b.graph(), {1, 64, 8, 8}, {});
  EXPECT_EQ(reason_of(r, "convA"), "");
  EXPECT_NE(reason_of(r, "convB").find("partition too small"), std::string::npos) << reason_of(r, "convB");
  EXPECT_EQ(reason_of(r, "add"), reason_of(r, "convB"));
  EXPECT_EQ(r.partitions.size(), 1u);
}

// A 3x3 Conv with dilation 6 (pads 6) on an 8x8 map reads padding with 3/4
// of its (output, tap) pairs: left to portable kernels, which skip those
// taps; with dilation 1 it is claimed, and with the cost rules off too.
TEST(XnnpackClaim, ConvsThatMostlyReadPaddingStayOnPortable) {
  for (int64_t dil : {1, 6}) {
    for (const char* threshold : {"40", "0"}) {
      SCOPED_TRACE("dilation " + std::to_string(dil) + ", min " + threshold);
      GraphBuilder b;
      ir::ValueId x = b.input("x", {1, 64, 8, 8});
      b.output(b.node("Conv", {x, b.constant("w", scaled({64, 64, 3, 3}, 3, 0.1f))}, "conv", {1, 64, 8, 8},
                      DType::kFloat32, "",
                      {a_ints("kernel_shape", {3, 3}), a_ints("dilations", {dil, dil}), a_ints("pads", {dil, dil, dil, dil})}));
      const PlacementReport r = run_both(b.graph(), {1, 64, 8, 8}, {{"xnnpack", "min_macs_per_byte", threshold}});
      const std::string why = reason_of(r, "conv");
      if (dil == 6 && std::string(threshold) != "0") EXPECT_NE(why.find("(25% live)"), std::string::npos) << why;
      else EXPECT_EQ(why, "");
    }
  }
}

TEST(XnnpackClaim, MinMacsPerByteIsChecked) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 8, 4, 4});
  b.output(conv(b, x, "conv", 8, 8, 3, 4, 4));
  EXPECT_FALSE(build(b.graph(), reg().get(), {"xnnpack"}, {{"xnnpack", "min_macs_per_byte", "-1"}}, FallbackPolicy::kAllow).ok());
}

}  // namespace
}  // namespace kiln::abi_test

namespace kiln::abi_test {
namespace {

// x * Sigmoid(x) runs as the plugin's one-pass SiLU kernel (xnn_silu.h), on
// every variant this CPU has, against SiLU in double: values over
// [-100, 100] (both clamps of e^-x), sizes with and without a vector tail,
// more than one chunk of 16K floats, 1 and 2 threads.
TEST(XnnpackClaim, SelfGatedSigmoidRunsAsTheSiluKernel) {
#if defined(__x86_64__) || defined(__i386__)
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool avx512 = false, avx2 = false;
#endif
  for (const char* isa : {"avx512", "avx2", "baseline"}) {
    const char* runs = std::string(isa) == "avx512" && avx512 ? "avx512" : (std::string(isa) != "baseline" && avx2 ? "avx2" : "baseline");
    for (const std::vector<int64_t>& d : {std::vector<int64_t>{1, 3, 7, 5}, std::vector<int64_t>{2, 16, 33, 31}}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(isa) + " " + std::to_string(d[1]) + "x" + std::to_string(d[2]) + " t" + std::to_string(threads));
        ScopedEnv env("KILN_XNNPACK_ISA", isa);
        GraphBuilder b;
        ir::ValueId x = b.input("x", d);
        ir::ValueId s = b.node("Sigmoid", {x}, "gate", d);
        b.output(b.node("Mul", {x, s}, "mul", d));
        auto prog = build(b.graph(), reg().get(), {"xnnpack"},
                          {claim_all(), {"xnnpack", "skip_light_groups", "false"}, {"xnnpack", "threads", std::to_string(threads)}},
                          FallbackPolicy::kRequire);
        ASSERT_TRUE(prog.ok()) << prog.status().to_string();
        const PlacementReport& r = (*prog)->placement();
        ASSERT_EQ(r.partitions.size(), 1u);
        ASSERT_EQ(r.partitions[0].diagnostics.size(), 1u);
        const std::string want = std::string("1 SiLU (x * sigmoid(x)) by the plugin's ") + runs + " kernel";
        EXPECT_NE(r.partitions[0].diagnostics[0].find(want), std::string::npos) << r.partitions[0].diagnostics[0];
        Tensor in = random_tensor(d, 9);
        for (int64_t k = 0; k < in.numel(); ++k) in.data<float>()[k] *= 100.f;  // [-100, 100)
        in.data<float>()[0] = 0.f;
        std::vector<Value> ins{Value(in)};
        auto out = (*prog)->run(ins, {}, nullptr);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        const Tensor& y = out.value()[0].tensor();
        double worst = 0;
        for (int64_t k = 0; k < in.numel(); ++k) {
          const double v = in.data<float>()[k], ref = v / (1.0 + std::exp(-v));
          const double err = std::fabs(y.data<float>()[k] - ref);
          ASSERT_LE(err, 1e-6 * std::fabs(ref) + 1e-30) << "x = " << v << ": " << y.data<float>()[k] << " vs " << ref;
          if (ref != 0) worst = std::max(worst, err / std::fabs(ref));
        }
        RecordProperty(std::string("worst_relative_error_") + isa, std::to_string(worst));
      }
    }
  }
}

}  // namespace
}  // namespace kiln::abi_test
