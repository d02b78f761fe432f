// Inverted-residual blocks the xnnpack plugin runs fused in row bands
// (backends/xnnpack/xnn_block.h) against portable kernels: with and
// without the 1x1 expand, with and without the residual Add, stride 1 and 2
// depthwise, channel counts that are and are not multiples of 16 (the
// expanded channels are padded inside the band scratch; project outputs end
// in a masked vector), odd map sizes, batches, 1/2/3 plugin threads (one:
// bands over a ring of expanded rows; more: block_split=bands, each thread
// its run of bands with its own ring, and phases, the expand in full, then
// chunks of output rows, and channels, each thread the expand + depthwise
// of its panels of expanded channels, then chunks of output rows) and band heights that do and do not divide the
// output height; chains of consecutive blocks; the fused 1x1 convolution +
// GlobalAveragePool.
// Each case runs every variant of the plugin's kernels the CPU has
// (AVX-512F, AVX2+FMA: KILN_XNNPACK_ISA caps it, so an AVX-512 machine runs
// both) and checks from the partition's compile line that the block was
// fused with that variant (on a CPU with neither: that it was not), and
// that fuse_blocks=false runs it unfused.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "xnnpack_test_util.h"

namespace kiln::abi_test {
namespace {

struct BlockCase {
  int64_t n, cin, ce, cout, h, w, stride;
  bool expand, residual;
  int64_t threads, band_rows;  // plugin threads; output rows per band step (0: by cache size)
  std::string split = "auto";  // option block_split
  const char* isa = "avx512";  // KILN_XNNPACK_ISA: the widest variant of the plugin's kernels allowed
};

std::string block_name(const ::testing::TestParamInfo<BlockCase>& i) {
  const BlockCase& c = i.param;
  return "n" + std::to_string(c.n) + "_c" + std::to_string(c.cin) + "_e" + std::to_string(c.ce) + "_o" +
         std::to_string(c.cout) + "_" + std::to_string(c.h) + "x" + std::to_string(c.w) + "_s" +
         std::to_string(c.stride) + (c.expand ? "" : "_noexpand") + (c.residual ? "_res" : "") + "_t" +
         std::to_string(c.threads) + "_b" + std::to_string(c.band_rows) + (c.split == "auto" ? "" : "_" + c.split) +
         "_" + c.isa;
}

Tensor scaled(std::vector<int64_t> dims, uint32_t seed, float s) {
  Tensor t = random_tensor(std::move(dims), seed);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] *= s;
  return t;
}

// [Conv 1x1 + Clip(0, 6)] -> depthwise Conv 3x3 (pads 1) + Clip(0, 6) -> Conv 1x1 [-> Add x], reading x
// (c.cin channels, c.h x c.w); names end in `tag`. Returns the block's output.
ir::ValueId add_block(GraphBuilder& b, ir::ValueId x, const BlockCase& c, const std::string& tag) {
  Tensor lo = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
  Tensor hi = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
  lo.data<float>()[0] = 0.0f;
  hi.data<float>()[0] = 6.0f;
  ir::ValueId vlo = b.constant("lo" + tag, std::move(lo)), vhi = b.constant("hi" + tag, std::move(hi));
  const auto seed = static_cast<uint32_t>(tag.size() * 7);
  ir::ValueId e = x;
  if (c.expand) {
    e = b.node("Conv",
               {x, b.constant("we" + tag, scaled({c.ce, c.cin, 1, 1}, 11 + seed, 0.5f)),
                b.constant("be" + tag, scaled({c.ce}, 12 + seed, 1.0f))},
               "expand" + tag, {c.n, c.ce, c.h, c.w});
    e = b.node("Clip", {e, vlo, vhi}, "clip_e" + tag, {c.n, c.ce, c.h, c.w});
  }
  const int64_t oh = (c.h + 2 - 3) / c.stride + 1, ow = (c.w + 2 - 3) / c.stride + 1;
  ir::ValueId d = b.node("Conv",
                         {e, b.constant("wd" + tag, scaled({c.ce, 1, 3, 3}, 13 + seed, 0.5f)),
                          b.constant("bd" + tag, scaled({c.ce}, 14 + seed, 1.0f))},
                         "dw" + tag, {c.n, c.ce, oh, ow}, DType::kFloat32, "",
                         {a_int("group", c.ce), a_ints("kernel_shape", {3, 3}), a_ints("strides", {c.stride, c.stride}),
                          a_ints("pads", {1, 1, 1, 1})});
  d = b.node("Clip", {d, vlo, vhi}, "clip_d" + tag, {c.n, c.ce, oh, ow});
  ir::ValueId y = b.node("Conv",
                         {d, b.constant("wp" + tag, scaled({c.cout, c.ce, 1, 1}, 15 + seed, 0.25f)),
                          b.constant("bp" + tag, scaled({c.cout}, 16 + seed, 1.0f))},
                         "project" + tag, {c.n, c.cout, oh, ow});
  if (c.residual) y = b.node("Add", {y, x}, "add" + tag, {c.n, c.cout, oh, ow});
  return y;
}

std::shared_ptr<ir::Graph> block_graph(const BlockCase& c) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {c.n, c.cin, c.h, c.w});
  b.output(add_block(b, x, c, ""));
  return b.graph();
}

// The caps worth running here: avx512 only where the CPU has it (elsewhere it runs as avx2).
std::vector<const char*> isas() {
  std::vector<const char*> v{"avx2"};
  if (plugin_kernel_isa("avx512") == "avx512") v.insert(v.begin(), "avx512");
  return v;
}

class XnnpackFusedBlock : public ::testing::TestWithParam<BlockCase> {};

TEST_P(XnnpackFusedBlock, MatchesPortableKernels) {
  const BlockCase& c = GetParam();
  ScopedEnv isa("KILN_XNNPACK_ISA", c.isa);
  std::shared_ptr<ir::Graph> g = block_graph(c);
  std::vector<Value> in{Value(random_tensor({c.n, c.cin, c.h, c.w}, 3))};
  auto expected = portable_outputs(g, in);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  for (bool fuse : {true, false}) {
    auto x = build(g, reg().get(), {"xnnpack"},
                   {{"xnnpack", "threads", std::to_string(c.threads)},
                    {"xnnpack", "block_rows", std::to_string(c.band_rows)},
                    {"xnnpack", "block_split", c.split},
                    {"xnnpack", "fuse_blocks", fuse ? "true" : "false"}, claim_all()},
                   FallbackPolicy::kRequire);
    ASSERT_TRUE(x.ok()) << x.status().to_string();
    const PlacementReport& r = (*x)->placement();
    ASSERT_EQ(r.partitions.size(), 1u);
    ASSERT_EQ(r.partitions[0].diagnostics.size(), 1u);
    const std::string want = plugin_kernel_isa(c.isa);
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
            for (const char* split : {"bands", "phases"}) {
              v.push_back({t == 3 ? 2 : 1, ch.cin, ch.ce, ch.cout, h, w, s, true, res, t, band, split});
              if (t == 1) break;  // one thread runs bands
            }
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
  // Split by channels: small maps (7x7, 14x14, odd), batches, stride 1 and
  // 2, with and without residual; expanded channels of whole panels (144:
  // 4.5 panels of 32, so the last is 16 wide) and not 16n (40 -> 48).
  for (Ch ch : {Ch{24, 144, 24}, Ch{20, 40, 20}})
    for (int64_t n : {1, 2})
      for (std::pair<int64_t, int64_t> hw : {std::pair<int64_t, int64_t>{7, 7}, {14, 14}, {9, 11}})
        for (int64_t s : {1, 2})
          for (bool res : {false, true}) {
            if (res && s != 1) continue;
            for (int64_t t : {2, 3})
              v.push_back({n, ch.cin, ch.ce, ch.cout, hw.first, hw.second, s, true, res, t, 0, "channels"});
          }
  // Many items per thread (61 rows), expanded channels not 16n.
  for (int64_t t : {2, 3})
    for (int64_t s : {1, 2})
      for (const char* split : {"auto", "bands", "phases", "channels"})
        v.push_back({1, 24, 72, 24, 61, 61, s, true, s == 1, t, t == 2 ? 0 : 5, split});
  // One output row per thread and fewer rows than threads (bands: runs of no item).
  for (const char* split : {"bands", "phases", "channels"}) {
    v.push_back({1, 8, 32, 8, 2, 5, 1, true, true, 3, 0, split});
    v.push_back({1, 8, 32, 8, 5, 5, 2, true, false, 3, 1, split});
    v.push_back({1, 8, 32, 8, 1, 4, 1, true, true, 2, 0, split});
  }
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

// Consecutive blocks (2+ threads: one chain, stages of different kinds one
// after another, each reading what the one before wrote): a stride-2 block
// without residual, a residual block, one whose channels are not 16n, and
// one without expand.
struct ChainCase {
  int64_t n, h, w, threads;
  std::string split;
};

std::string chain_name(const ::testing::TestParamInfo<ChainCase>& i) {
  const ChainCase& c = i.param;
  return "n" + std::to_string(c.n) + "_" + std::to_string(c.h) + "x" + std::to_string(c.w) + "_t" +
         std::to_string(c.threads) + "_" + c.split;
}

class XnnpackFusedChain : public ::testing::TestWithParam<ChainCase> {};

TEST_P(XnnpackFusedChain, MatchesPortableKernels) {
  const ChainCase& c = GetParam();
  GraphBuilder b;
  ir::ValueId x = b.input("x", {c.n, 16, c.h, c.w});
  const int64_t h2 = (c.h - 1) / 2 + 1, w2 = (c.w - 1) / 2 + 1;
  ir::ValueId y = add_block(b, x, {c.n, 16, 64, 24, c.h, c.w, 2, true, false, c.threads, 0}, "_a");
  y = add_block(b, y, {c.n, 24, 72, 24, h2, w2, 1, true, true, c.threads, 0}, "_bb");
  y = add_block(b, y, {c.n, 24, 40, 32, h2, w2, 1, true, false, c.threads, 0}, "_ccc");
  y = add_block(b, y, {c.n, 32, 32, 32, h2, w2, 1, false, true, c.threads, 0}, "_dddd");
  b.output(y);
  std::shared_ptr<ir::Graph> g = b.graph();
  std::vector<Value> in{Value(random_tensor({c.n, 16, c.h, c.w}, 5))};
  auto expected = portable_outputs(g, in);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  auto f = build(g, reg().get(), {"xnnpack"},
                 {{"xnnpack", "threads", std::to_string(c.threads)}, {"xnnpack", "block_split", c.split}, claim_all()},
                 FallbackPolicy::kRequire);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const PlacementReport& r = (*f)->placement();
  ASSERT_EQ(r.partitions.size(), 1u);
  EXPECT_NE(r.partitions[0].diagnostics.at(0).find(plugin_kernel_isa("avx512") != "none" ? "4 inverted-residual blocks fused"
                                                            : "0 inverted-residual blocks fused"),
            std::string::npos)
      << r.partitions[0].diagnostics[0];
  for (int run = 0; run < 3; ++run) {  // later runs reset the stages' counters
    auto a = (*f)->run(in, {}, nullptr);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    expect_close(a.value()[0].tensor(), expected.value()[0].tensor(), 1e-4f);
  }
}

std::vector<ChainCase> chain_cases() {
  std::vector<ChainCase> v;
  for (int64_t t : {1, 2, 3})
    for (const char* split : {"auto", "bands", "phases", "channels"}) {
      v.push_back({1, 35, 33, t, split});  // auto: bands for the stride-2 block, phases for the rest
      v.push_back({2, 9, 6, t, split});  // auto: channels after the stride-2 block (2 x 5 x 3 output pixels)
      v.push_back({1, 3, 3, t, split});    // fewer rows than threads after the stride-2 block
      if (t == 1) break;                   // one thread has no split
    }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Chains, XnnpackFusedChain, ::testing::ValuesIn(chain_cases()), chain_name);

}  // namespace
}  // namespace kiln::abi_test

namespace kiln::abi_test {
namespace {

// A 1x1 convolution + Clip whose output only a GlobalAveragePool reads (a
// classifier's head), after an inverted-residual block or straight on the
// input: fused into one op split by panels of 32 output channels (channel
// counts that end in a full, a 24-wide and a 16-wide panel), batches, 1/2/3
// threads, against portable kernels.
struct PoolCase {
  int64_t n, cin, cout, h, w, threads;
  bool after_block;
};

std::string pool_name(const ::testing::TestParamInfo<PoolCase>& i) {
  const PoolCase& c = i.param;
  return "n" + std::to_string(c.n) + "_c" + std::to_string(c.cin) + "_o" + std::to_string(c.cout) + "_" +
         std::to_string(c.h) + "x" + std::to_string(c.w) + "_t" + std::to_string(c.threads) +
         (c.after_block ? "_block" : "");
}

class XnnpackFusedPool : public ::testing::TestWithParam<PoolCase> {};

TEST_P(XnnpackFusedPool, MatchesPortableKernels) {
  const PoolCase& c = GetParam();
  GraphBuilder b;
  ir::ValueId x = b.input("x", {c.n, c.cin, c.h, c.w});
  if (c.after_block) x = add_block(b, x, {c.n, c.cin, 2 * c.cin, c.cin, c.h, c.w, 1, true, true, c.threads, 0}, "_blk");
  Tensor lo = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
  Tensor hi = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
  lo.data<float>()[0] = 0.0f;
  hi.data<float>()[0] = 6.0f;
  ir::ValueId y = b.node("Conv",
                         {x, b.constant("wc", scaled({c.cout, c.cin, 1, 1}, 21, 0.5f)),
                          b.constant("bc", scaled({c.cout}, 22, 1.0f))},
                         "head", {c.n, c.cout, c.h, c.w});
  y = b.node("Clip", {y, b.constant("lo", std::move(lo)), b.constant("hi", std::move(hi))}, "clip",
             {c.n, c.cout, c.h, c.w});
  y = b.node("GlobalAveragePool", {y}, "gap", {c.n, c.cout, 1, 1});
  b.output(y);
  std::shared_ptr<ir::Graph> g = b.graph();
  std::vector<Value> in{Value(random_tensor({c.n, c.cin, c.h, c.w}, 7))};
  auto expected = portable_outputs(g, in);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  for (bool fuse : {true, false}) {
    auto f = build(g, reg().get(), {"xnnpack"},
                   {{"xnnpack", "threads", std::to_string(c.threads)},
                    {"xnnpack", "fuse_blocks", fuse ? "true" : "false"}, claim_all()},
                   FallbackPolicy::kRequire);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const PlacementReport& r = (*f)->placement();
    ASSERT_EQ(r.partitions.size(), 1u);
    // Fused, the block and the head leave no XNNPACK op: one native segment.
    if (fuse && plugin_kernel_isa("avx512") != "none") {
      EXPECT_NE(r.partitions[0].diagnostics.at(0).find("XNNPACK ops in 1 segment "), std::string::npos)
          << r.partitions[0].diagnostics[0];
    }
    for (int run = 0; run < 2; ++run) {
      auto a = (*f)->run(in, {}, nullptr);
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      expect_close(a.value()[0].tensor(), expected.value()[0].tensor(), 1e-4f);
    }
  }
}

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> v;
  for (int64_t t : {1, 2, 3}) {
    v.push_back({1, 32, 1280, 7, 7, t, true});  // mobilenet_v2's head (smaller input channels)
    v.push_back({2, 20, 56, 3, 5, t, false});   // panels of 32 + 24
    v.push_back({1, 16, 80, 4, 1, t, true});    // 32 + 32 + 16
    v.push_back({2, 8, 8, 1, 1, t, false});     // one pixel, one 16-wide panel
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Pools, XnnpackFusedPool, ::testing::ValuesIn(pool_cases()), pool_name);

}  // namespace
}  // namespace kiln::abi_test

namespace kiln::abi_test {
namespace {

// A stem convolution (backends/xnnpack/xnn_stem.h): a KxK convolution of
// the partition's NCHW input with few channels, run by the plugin's kernel
// straight from NCHW (no layout transpose of the input), with the
// depthwise -> project block after it fused (the ring of rows filled by the
// stem) or alone (its NHWC output in memory: the next op is not a block, or
// there is none). Kernels 3, 5 and 1x3, strides 1 and 2 (also unequal),
// symmetric and asymmetric pads, 1/3/4 input channels, output channels in
// one panel of 16 or 32 (masked at 24) or two (40), odd image sizes,
// batches, 1/2/3 threads, with and without a clamp, alone with the
// HardSwish or SiLU after it run on its rows, every variant of the plugin's
// kernels the CPU has; against portable kernels, with fuse_stem off as well,
// and with fuse_blocks off (the stem then runs alone).
struct StemCase {
  int64_t n, cin, cout, h, w, kh, kw, sh, sw;
  std::vector<int64_t> pads;  // top, left, bottom, right
  std::string act;            // after the stem: "clip" (0, 6), "none", "hardswish" or "silu" (x * Sigmoid(x))
  int64_t block_stride;       // the depthwise -> project block after it: 1 or 2; 0: none (a Relu unless act is an activation)
  int64_t threads;
  const char* isa = "avx512";
};

std::string stem_name(const ::testing::TestParamInfo<StemCase>& i) {
  const StemCase& c = i.param;
  std::string pads;
  for (int64_t p : c.pads) pads += std::to_string(p);
  return "n" + std::to_string(c.n) + "_c" + std::to_string(c.cin) + "_o" + std::to_string(c.cout) + "_" +
         std::to_string(c.h) + "x" + std::to_string(c.w) + "_k" + std::to_string(c.kh) + "x" + std::to_string(c.kw) +
         "_s" + std::to_string(c.sh) + std::to_string(c.sw) + "_p" + pads + "_" + c.act +
         (c.block_stride ? "_block" + std::to_string(c.block_stride) : "_alone") + "_t" + std::to_string(c.threads) +
         "_" + c.isa;
}

class XnnpackStem : public ::testing::TestWithParam<StemCase> {};

TEST_P(XnnpackStem, MatchesPortableKernels) {
  const StemCase& c = GetParam();
  ScopedEnv isa("KILN_XNNPACK_ISA", c.isa);
  GraphBuilder b;
  ir::ValueId x = b.input("x", {c.n, c.cin, c.h, c.w});
  const int64_t oh = (c.h + c.pads[0] + c.pads[2] - c.kh) / c.sh + 1;
  const int64_t ow = (c.w + c.pads[1] + c.pads[3] - c.kw) / c.sw + 1;
  ir::ValueId y = b.node("Conv",
                         {x, b.constant("ws", scaled({c.cout, c.cin, c.kh, c.kw}, 31, 0.5f)),
                          b.constant("bs", scaled({c.cout}, 32, 1.0f))},
                         "stem", {c.n, c.cout, oh, ow}, DType::kFloat32, "",
                         {a_ints("kernel_shape", {c.kh, c.kw}), a_ints("strides", {c.sh, c.sw}), a_ints("pads", c.pads)});
  const std::vector<int64_t> yd{c.n, c.cout, oh, ow};
  if (c.act == "hardswish") y = b.node("HardSwish", {y}, "hswish", yd);
  if (c.act == "silu") y = b.node("Mul", {y, b.node("Sigmoid", {y}, "sigmoid", yd)}, "silu", yd);
  if (c.act == "clip") {
    Tensor lo = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
    Tensor hi = Tensor::allocate(DType::kFloat32, Shape(std::vector<int64_t>{}));
    lo.data<float>()[0] = 0.0f;
    hi.data<float>()[0] = 6.0f;
    y = b.node("Clip", {y, b.constant("lo", std::move(lo)), b.constant("hi", std::move(hi))}, "clip",
               {c.n, c.cout, oh, ow});
  }
  if (c.block_stride) {
    const int64_t cp = c.cout == 16 ? 24 : 16;
    y = add_block(b, y, {c.n, c.cout, c.cout, cp, oh, ow, c.block_stride, false, false, c.threads, 0}, "_blk");
  } else if (c.act == "clip" || c.act == "none") {
    y = b.node("Relu", {y}, "relu", {c.n, c.cout, oh, ow});
  }
  b.output(y);
  std::shared_ptr<ir::Graph> g = b.graph();
  std::vector<Value> in{Value(random_tensor({c.n, c.cin, c.h, c.w}, 9))};
  auto expected = portable_outputs(g, in);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  // The stem with the block fused, no stem, the stem alone (fuse_blocks=false).
  for (int mode : {0, 1, 2}) {
    const bool stem = mode != 1, blocks = mode != 2;
    auto f = build(g, reg().get(), {"xnnpack"},
                   {{"xnnpack", "threads", std::to_string(c.threads)},
                    {"xnnpack", "fuse_stem", stem ? "true" : "false"},
                    {"xnnpack", "fuse_blocks", blocks ? "true" : "false"}, claim_all()},
                   FallbackPolicy::kRequire);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const PlacementReport& r = (*f)->placement();
    ASSERT_EQ(r.partitions.size(), 1u);
    const std::string& log = r.partitions[0].diagnostics.at(0);
    const bool on = stem && plugin_kernel_isa(c.isa) != "none";
    // Fused or alone, the stem reads the input as NCHW: only the output is transposed.
    EXPECT_NE(log.find(on ? "1 stem convolutions from NCHW, 0 classifier heads run with their fully connected), "
                               "1 boundary transpose "
                             : "0 stem convolutions from NCHW, 0 classifier heads run with their fully connected), "
                               "2 boundary transposes "),
              std::string::npos)
        << log;
    if (on && (c.act == "hardswish" || c.act == "silu")) {  // the activation runs in the stem's op: one native segment
      EXPECT_NE(log.find("XNNPACK ops in 1 segment "), std::string::npos) << log;
    }
    if (c.block_stride) {  // without the stem, a block without expand is fused when it reads 16n channels
      const bool fused = blocks && (on || (plugin_kernel_isa(c.isa) != "none" && c.cout % 16 == 0));
      EXPECT_NE(log.find(fused ? "1 inverted-residual blocks fused" : "0 inverted-residual blocks fused"),
                std::string::npos)
          << log;
    }
    for (int run = 0; run < 2; ++run) {
      auto a = (*f)->run(in, {}, nullptr);
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      expect_close(a.value()[0].tensor(), expected.value()[0].tensor(), 1e-4f);
    }
  }
}

std::vector<StemCase> stem_cases() {
  std::vector<StemCase> v;
  // mobilenet_v2's stem (3 -> 32, 3x3 s2 pads 1) on a small odd image, fused and alone, 1/2/3 threads, batches.
  for (int64_t t : {1, 2, 3})
    for (int64_t bs : {1, 2, 0}) v.push_back({t == 3 ? 2 : 1, 3, 32, 23, 19, 3, 3, 2, 2, {1, 1, 1, 1}, "clip", bs, t});
  // Channels: 1 and 4 in; 16, 24 (a masked panel), 40 (two panels) out.
  for (int64_t cin : {1, 4})
    for (int64_t cout : {16, 24, 40})
      for (int64_t bs : {1, 0}) v.push_back({1, cin, cout, 13, 17, 3, 3, 2, 2, {1, 1, 1, 1}, bs != 0 ? "clip" : "none", bs, 2});
  // 5x5 (pads 2, or asymmetric 1 / 2 / 0 / 3), stride 1 and 2, no clamp; a 1x3 kernel; unequal strides.
  for (int64_t s : {1, 2})
    for (int64_t t : {1, 3}) {
      v.push_back({1, 3, 32, 15, 12, 5, 5, s, s, {2, 2, 2, 2}, "none", 1, t});
      v.push_back({2, 3, 16, 11, 14, 5, 5, s, s, {1, 2, 0, 3}, "none", 0, t});
      v.push_back({1, 3, 24, 9, 21, 3, 3, s, s, {0, 0, 0, 0}, "clip", 2, t});
    }
  v.push_back({1, 2, 32, 10, 31, 1, 3, 1, 2, {0, 1, 0, 1}, "clip", 1, 2});
  v.push_back({1, 3, 32, 18, 7, 3, 3, 2, 1, {1, 0, 1, 2}, "clip", 0, 1});
  // One output row, fewer rows than threads; a wide image (tiles split into 12 + 11 pixels).
  v.push_back({1, 3, 32, 2, 40, 3, 3, 2, 2, {1, 1, 0, 1}, "clip", 1, 3});
  v.push_back({1, 3, 32, 9, 225, 3, 3, 2, 2, {1, 1, 1, 1}, "clip", 1, 1});
  // mobilenet_v3's stem (16 channels + HardSwish) and efficientnet's (32 + SiLU), alone, with the activation fused.
  for (int64_t t : {1, 2}) {
    v.push_back({1, 3, 16, 21, 16, 3, 3, 2, 2, {1, 1, 1, 1}, "hardswish", 0, t});
    v.push_back({2, 3, 32, 12, 19, 3, 3, 2, 2, {1, 1, 1, 1}, "silu", 0, t});
    v.push_back({1, 4, 40, 11, 13, 3, 3, 1, 1, {1, 1, 1, 1}, "silu", 0, t + 1});
  }
  std::vector<StemCase> all;
  for (const char* isa : isas())
    for (StemCase c : v) {
      c.isa = isa;
      all.push_back(c);
    }
  StemCase off = v[0];
  off.isa = "none";  // the plugin's kernels off: XNNPACK's convolution after the layout transpose
  all.push_back(off);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Stems, XnnpackStem, ::testing::ValuesIn(stem_cases()), stem_name);

}  // namespace
}  // namespace kiln::abi_test
