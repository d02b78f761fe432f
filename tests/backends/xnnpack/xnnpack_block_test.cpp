// Inverted-residual blocks the xnnpack plugin runs fused in row bands
// (backends/xnnpack/xnn_block.h) against portable kernels: with and
// without the 1x1 expand, with and without the residual Add, stride 1 and 2
// depthwise, channel counts that are and are not multiples of 16 (the
// expanded channels are padded inside the band scratch; project outputs end
// in a masked vector), odd map sizes, batches, 1/2/3 plugin threads (one:
// bands over a ring of expanded rows; more: the expand in full, then chunks
// of output rows) and band heights that do and do not divide the output
// height.
// Each case runs every variant of the plugin's kernels the CPU has
// (AVX-512F, AVX2+FMA: KILN_XNNPACK_ISA caps it, so an AVX-512 machine runs
// both) and checks from the partition's compile line that the block was
// fused with that variant (on a CPU with neither: that it was not), and
// that fuse_blocks=false runs it unfused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "xnnpack_test_util.h"

namespace kiln::abi_test {
namespace {

struct BlockCase {
  int64_t n, cin, ce, cout, h, w, stride;
  bool expand, residual;
  int64_t threads, band_rows;  // plugin threads; output rows per band step (0: by cache size)
  const char* isa = "avx512";  // KILN_XNNPACK_ISA: the widest variant of the plugin's kernels allowed
};

std::string block_name(const ::testing::TestParamInfo<BlockCase>& i) {
  const BlockCase& c = i.param;
  return "n" + std::to_string(c.n) + "_c" + std::to_string(c.cin) + "_e" + std::to_string(c.ce) + "_o" +
         std::to_string(c.cout) + "_" + std::to_string(c.h) + "x" + std::to_string(c.w) + "_s" +
         std::to_string(c.stride) + (c.expand ? "" : "_noexpand") + (c.residual ? "_res" : "") + "_t" +
         std::to_string(c.threads) + "_b" + std::to_string(c.band_rows) + "_" + c.isa;
}

Tensor scaled(std::vector<int64_t> dims, uint32_t seed, float s) {
  Tensor t = random_tensor(std::move(dims), seed);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] *= s;
  return t;
}

// [Conv 1x1 + Clip(0, 6)] -> depthwise Conv 3x3 (pads 1) + Clip(0, 6) -> Conv 1x1 [-> Add x].
std::shared_ptr<ir::Graph> block_graph(const BlockCase& c) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {c.n, c.cin, c.h, c.w});
  Tensor lo = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
  Tensor hi = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
  lo.data<float>()[0] = 0.0f;
  hi.data<float>()[0] = 6.0f;
  ir::ValueId vlo = b.constant("lo", std::move(lo)), vhi = b.constant("hi", std::move(hi));
  ir::ValueId e = x;
  if (c.expand) {
    e = b.node("Conv",
               {x, b.constant("we", scaled({c.ce, c.cin, 1, 1}, 11, 0.5f)), b.constant("be", scaled({c.ce}, 12, 1.0f))},
               "expand", {c.n, c.ce, c.h, c.w});
    e = b.node("Clip", {e, vlo, vhi}, "clip_e", {c.n, c.ce, c.h, c.w});
  }
  const int64_t oh = (c.h + 2 - 3) / c.stride + 1, ow = (c.w + 2 - 3) / c.stride + 1;
  ir::ValueId d = b.node(
      "Conv", {e, b.constant("wd", scaled({c.ce, 1, 3, 3}, 13, 0.5f)), b.constant("bd", scaled({c.ce}, 14, 1.0f))},
      "dw", {c.n, c.ce, oh, ow}, DType::kFloat32, "",
      {a_int("group", c.ce), a_ints("kernel_shape", {3, 3}), a_ints("strides", {c.stride, c.stride}),
       a_ints("pads", {1, 1, 1, 1})});
  d = b.node("Clip", {d, vlo, vhi}, "clip_d", {c.n, c.ce, oh, ow});
  ir::ValueId y = b.node(
      "Conv",
      {d, b.constant("wp", scaled({c.cout, c.ce, 1, 1}, 15, 0.25f)), b.constant("bp", scaled({c.cout}, 16, 1.0f))},
      "project", {c.n, c.cout, oh, ow});
  if (c.residual) y = b.node("Add", {y, x}, "add", {c.n, c.cout, oh, ow});
  b.output(y);
  return b.graph();
}

// The variant the plugin's kernels run when capped at `isa` on this CPU ("none": no fused blocks).
std::string expected_isa(const std::string& isa) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == "avx512" && __builtin_cpu_supports("avx512f")) return "avx512";
  if (isa != "none" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
#else
  (void)isa;
#endif
  return "none";
}

// The caps worth running here: avx512 only where the CPU has it (elsewhere it runs as avx2).
std::vector<const char*> isas() {
  std::vector<const char*> v{"avx2"};
  if (expected_isa("avx512") == "avx512") v.insert(v.begin(), "avx512");
  return v;
}

class XnnpackFusedBlock : public ::testing::TestWithParam<BlockCase> {};

TEST_P(XnnpackFusedBlock, MatchesPortableKernels) {
  const BlockCase& c = GetParam();
  ScopedEnv isa("KILN_XNNPACK_ISA", c.isa);
  std::shared_ptr<ir::Graph> g = block_graph(c);
  std::vector<Value> in{Value(random_tensor({c.n, c.cin, c.h, c.w}, 3))};
  auto p = build(g, nullptr, {});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto expected = (*p)->run(in, {}, nullptr);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  for (bool fuse : {true, false}) {
    auto x = build(g, reg().get(), {"xnnpack"},
                   {{"xnnpack", "threads", std::to_string(c.threads)},
                    {"xnnpack", "block_rows", std::to_string(c.band_rows)},
                    {"xnnpack", "fuse_blocks", fuse ? "true" : "false"}, claim_all()},
                   FallbackPolicy::kRequire);
    ASSERT_TRUE(x.ok()) << x.status().to_string();
    const PlacementReport& r = (*x)->placement();
    ASSERT_EQ(r.partitions.size(), 1u);
    ASSERT_EQ(r.partitions[0].diagnostics.size(), 1u);
    const std::string want = expected_isa(c.isa);
    const bool fused = fuse && want != "none";
    const std::string& log = r.partitions[0].diagnostics[0];
    EXPECT_NE(log.find(fused ? "1 inverted-residual blocks fused" : "0 inverted-residual blocks fused"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("; plugin kernels: " + want), std::string::npos) << log;
    for (int run = 0; run < 2; ++run) {  // the second run reuses the band scratch
      auto a = (*x)->run(in, {}, nullptr);
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      expect_close(a.value()[0].tensor(), expected.value()[0].tensor(), 1e-4f);
    }
  }
}

std::vector<BlockCase> block_cases() {
  std::vector<BlockCase> v;
  // Channels: mobilenet_v2-like (16n expanded, 24 out), none a multiple of 16, 16n throughout.
  struct Ch {
    int64_t cin, ce, cout;
  };
  // 20 -> 40 -> 20: the project's panel of 20 columns ends in a partial second group (AVX2: 16 + 4).
  for (Ch ch : {Ch{24, 144, 24}, Ch{5, 20, 5}, Ch{16, 48, 32}, Ch{20, 40, 20}}) {
    for (int64_t s : {1, 2}) {
      for (bool res : {false, true}) {
        if (res && (s != 1 || ch.cin != ch.cout)) continue;
        for (int64_t t : {1, 2, 3}) {
          for (int64_t band : {0, 1, 3}) {
            const int64_t h = t == 2 ? 13 : 9, w = band == 1 ? 7 : 11;  // 9, 13 rows: band 3 divides one, not the other
            v.push_back({t == 3 ? 2 : 1, ch.cin, ch.ce, ch.cout, h, w, s, true, res, t, band});
          }
        }
      }
    }
  }
  // No expand (depthwise -> project): the depthwise reads the block's input rows in place.
  for (int64_t s : {1, 2})
    for (int64_t t : {1, 2, 3})
      for (bool res : {false, true}) {
        if (res && s != 1) continue;
        v.push_back({1, 32, 32, res ? 32 : 16, 11, 6, s, false, res, t, t == 1 ? 4 : 0});
      }
  // Many chunks per thread (61 rows), expanded channels not 16n.
  for (int64_t t : {2, 3})
    for (int64_t s : {1, 2}) v.push_back({1, 24, 72, 24, 61, 61, s, true, s == 1, t, t == 2 ? 0 : 5});
  // One output row per thread and fewer rows than threads.
  v.push_back({1, 8, 32, 8, 2, 5, 1, true, true, 3, 0});
  v.push_back({1, 8, 32, 8, 5, 5, 2, true, false, 3, 1});
  std::vector<BlockCase> all;
  for (const char* isa : isas())
    for (BlockCase c : v) {
      c.isa = isa;
      all.push_back(c);
    }
  // KILN_XNNPACK_ISA=none: the plugin's kernels are off, blocks run as XNNPACK ops.
  for (size_t i = 0; i < 3; ++i) {
    BlockCase c = v[i * 7];
    c.isa = "none";
    all.push_back(c);
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Blocks, XnnpackFusedBlock, ::testing::ValuesIn(block_cases()), block_name);

}  // namespace
}  // namespace kiln::abi_test
