// A classifier's head with its fully connected layer, which the xnnpack
// plugin runs as one op (backends/xnnpack/xnn_head.h): 1x1 Conv + Clip ->
// GlobalAveragePool -> Flatten or Reshape -> Gemm (transB 0 or 1, with or
// without the bias C) or MatMul -> nothing, Relu or Clip, against portable
// kernels: pooled channels that fill the 32-channel panels or end in a
// partial one (1280, 100, 37), outputs that are and are not a multiple of
// 16 (1000, 10, 17), batches 1 and 3, 1/2/3 plugin threads (each thread
// its partial outputs, summed at the end), each variant of the plugin's
// kernels the CPU has (AVX-512F, AVX2+FMA). The compile line says whether
// the FC joined the head: it does unless fuse_head_fc=false, the kernels
// are off, or something else reads the pooled channels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "xnnpack_test_util.h"

namespace kiln::abi_test {
namespace {

enum class Fc { kGemmTransB, kGemm, kMatMul };
enum class Act { kNone, kRelu, kClip };

struct HeadCase {
  int64_t n, cin, channels, outputs, h, w, threads;
  Fc fc;
  bool bias, reshape;  // reshape: Reshape to [n, channels] (else Flatten)
  Act act;
  const char* isa = "avx512";  // KILN_XNNPACK_ISA
  bool pooled_is_output = false;  // the flattened channels are an output too: the FC stays apart
};

std::string head_name(const ::testing::TestParamInfo<HeadCase>& i) {
  const HeadCase& c = i.param;
  const char* fc[] = {"gemmT", "gemm", "matmul"};
  const char* act[] = {"", "_relu", "_clip"};
  return "n" + std::to_string(c.n) + "_c" + std::to_string(c.channels) + "_o" + std::to_string(c.outputs) + "_" +
         fc[static_cast<int>(c.fc)] + (c.bias ? "_bias" : "") + (c.reshape ? "_reshape" : "") +
         act[static_cast<int>(c.act)] + "_t" + std::to_string(c.threads) + (c.pooled_is_output ? "_pooledout" : "") +
         "_" + c.isa;
}

Tensor scaled(std::vector<int64_t> dims, uint32_t seed, float s) {
  Tensor t = random_tensor(std::move(dims), seed);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] *= s;
  return t;
}

Tensor scalar(float v) {
  Tensor t = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
  t.data<float>()[0] = v;
  return t;
}

std::shared_ptr<ir::Graph> head_graph(const HeadCase& c) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {c.n, c.cin, c.h, c.w});
  ir::ValueId y = b.node("Conv",
                         {x, b.constant("wc", scaled({c.channels, c.cin, 1, 1}, 31, 0.5f)),
                          b.constant("bc", scaled({c.channels}, 32, 1.0f))},
                         "head", {c.n, c.channels, c.h, c.w});
  y = b.node("Clip", {y, b.constant("lo", scalar(0.0f)), b.constant("hi", scalar(6.0f))}, "clip",
             {c.n, c.channels, c.h, c.w});
  y = b.node("GlobalAveragePool", {y}, "gap", {c.n, c.channels, 1, 1});
  if (c.reshape) {
    Tensor shape = Tensor::allocate(DType::kInt64, Shape(std::vector<int64_t>{2}));
    shape.data<int64_t>()[0] = c.n;
    shape.data<int64_t>()[1] = c.channels;
    y = b.node("Reshape", {y, b.constant("shape", std::move(shape))}, "reshape", {c.n, c.channels});
  } else {
    y = b.node("Flatten", {y}, "flatten", {c.n, c.channels}, DType::kFloat32, "", {a_int("axis", 1)});
  }
  if (c.pooled_is_output) b.output(y);
  // Weights ~ 1/sqrt(channels): outputs of order 1 whatever the width.
  const float s = 2.0f / std::sqrt(static_cast<float>(c.channels));
  if (c.fc == Fc::kMatMul) {
    y = b.node("MatMul", {y, b.constant("wf", scaled({c.channels, c.outputs}, 33, s))}, "fc", {c.n, c.outputs});
  } else {
    const bool tb = c.fc == Fc::kGemmTransB;
    std::vector<ir::ValueId> in{y, b.constant("wf", scaled(tb ? std::vector<int64_t>{c.outputs, c.channels}
                                                              : std::vector<int64_t>{c.channels, c.outputs},
                                                           33, s))};
    if (c.bias) in.push_back(b.constant("bf", scaled({c.outputs}, 34, 1.0f)));
    y = b.node("Gemm", in, "fc", {c.n, c.outputs}, DType::kFloat32, "", {a_int("transB", tb ? 1 : 0)});
  }
  if (c.act == Act::kRelu) y = b.node("Relu", {y}, "relu", {c.n, c.outputs});
  if (c.act == Act::kClip) {
    y = b.node("Clip", {y, b.constant("flo", scalar(-0.5f)), b.constant("fhi", scalar(0.75f))}, "fclip",
               {c.n, c.outputs});
  }
  b.output(y);
  return b.graph();
}

class XnnpackFusedHead : public ::testing::TestWithParam<HeadCase> {};

TEST_P(XnnpackFusedHead, MatchesPortableKernels) {
  const HeadCase& c = GetParam();
  ScopedEnv isa("KILN_XNNPACK_ISA", c.isa);
  std::shared_ptr<ir::Graph> g = head_graph(c);
  std::vector<Value> in{Value(random_tensor({c.n, c.cin, c.h, c.w}, 9))};
  auto expected = portable_outputs(g, in);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  for (bool fuse : {true, false}) {
    auto f = build(g, reg().get(), {"xnnpack"},
                   {{"xnnpack", "threads", std::to_string(c.threads)},
                    {"xnnpack", "fuse_head_fc", fuse ? "true" : "false"}, claim_all()},
                   FallbackPolicy::kRequire);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const PlacementReport& r = (*f)->placement();
    ASSERT_EQ(r.partitions.size(), 1u);
    const bool fused = fuse && !c.pooled_is_output && plugin_kernel_isa(c.isa) != "none";
    const std::string& log = r.partitions[0].diagnostics.at(0);
    EXPECT_NE(log.find(std::string(fused ? "1" : "0") + " classifier heads run with their fully connected"),
              std::string::npos)
        << log;
    for (int run = 0; run < 3; ++run) {  // later runs start the partial outputs afresh
      auto a = (*f)->run(in, {}, nullptr);
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      ASSERT_EQ(a.value().size(), expected.value().size());
      for (size_t k = 0; k < a.value().size(); ++k)
        expect_close(a.value()[k].tensor(), expected.value()[k].tensor(), 1e-4f);
    }
  }
}

std::vector<HeadCase> head_cases() {
  struct Shape {
    int64_t cin, channels, outputs, h, w;
  };
  // mobilenet_v2's head (fewer input channels), partial last panels, outputs not 16n.
  const Shape shapes[] = {{32, 1280, 1000, 7, 7}, {24, 100, 10, 3, 5}, {16, 37, 17, 2, 3}};
  std::vector<const char*> isas{"avx2"};
  if (plugin_kernel_isa("avx512") == "avx512") isas.insert(isas.begin(), "avx512");
  std::vector<HeadCase> v;
  size_t i = 0;
  for (const Shape& s : shapes)
    for (int64_t t : {1, 2, 3})
      for (const char* isa : isas) {
        // Each shape x threads x variant runs one FC form; the forms, bias, clamps and batches rotate.
        const auto fc = static_cast<Fc>(i % 3);
        const auto act = static_cast<Act>((i / 3) % 3);
        const bool bias = fc != Fc::kMatMul && i % 2 == 0;
        const int64_t n = (i / 2) % 2 == 0 ? 1 : 3;
        v.push_back({n, s.cin, s.channels, s.outputs, s.h, s.w, t, fc, bias, i % 4 == 1, act, isa});
        ++i;
      }
  // Batch 3 on mobilenet_v2's shape at 2 threads, with the bias and a Relu.
  v.push_back({3, 32, 1280, 1000, 7, 7, 2, Fc::kGemmTransB, true, false, Act::kRelu});
  // Something else reads the flattened channels: the head fuses without the
  // FC (threads share out its panels: a thread's first panel is not 0).
  for (const char* isa : isas) v.push_back({1, 24, 100, 10, 3, 5, 3, Fc::kGemmTransB, true, false, Act::kNone, isa, true});
  // The plugin's kernels off: XNNPACK runs it all.
  v.push_back({1, 24, 100, 10, 3, 5, 1, Fc::kGemmTransB, true, false, Act::kRelu, "none"});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Heads, XnnpackFusedHead, ::testing::ValuesIn(head_cases()), head_name);

}  // namespace
}  // namespace kiln::abi_test
