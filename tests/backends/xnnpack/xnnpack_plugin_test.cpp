// The xnnpack plugin as a whole: the nodes it declines (with reasons a user
// can act on), Conv + BatchNormalization + Relu folded into one op, a
// partition whose compiled blob is exported and imported, and the plugin
// when libXNNPACK is missing.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/mman.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/c/backend_blob.hpp"
#include "xnnpack_test_util.h"
#include "kiln/backends.h"
#include "runtime/backends/partition_kernel.h"

namespace kiln::abi_test {
namespace {

// The reason the plugin gives for not claiming the only node of `g`.
std::string reason_for(std::shared_ptr<ir::Graph> g) {
  auto x = build(g, reg().get(), {"xnnpack"}, {}, FallbackPolicy::kAllow);
  EXPECT_TRUE(x.ok()) << x.status().to_string();
  if (!x.ok()) return "";
  for (const NodePlacement& n : (*x)->placement().nodes)
    for (const auto& [backend, why] : n.reasons)
      if (backend == "xnnpack") return why;
  return "(claimed)";
}

TEST(XnnpackPlugin, DeclinesWhatItCannotRunWithAReason) {
  {
    GraphBuilder b;
    b.output(b.node("Softmax", {b.input("x", {1, 3, 4, 5})}, "s", {1, 3, 4, 5}, DType::kFloat32, "", {a_int("axis", 1)}));
    EXPECT_NE(reason_for(b.graph()).find("Softmax over axis 1"), std::string::npos);
  }
  {
    GraphBuilder b;
    b.output(b.node("Transpose", {b.input("x", {2, 3})}, "t", {3, 2}));
    EXPECT_NE(reason_for(b.graph()).find("no transpose"), std::string::npos);
  }
  {
    GraphBuilder b;
    b.output(b.node("MatMul", {b.input("a", {2, 3, 4}), b.input("b", {2, 4, 5})}, "m", {2, 3, 5}));
    EXPECT_NE(reason_for(b.graph()).find("batched matmul"), std::string::npos);
  }
  {
    GraphBuilder b;  // NCHW flatten of a tensor with pixels: the NHWC order differs
    b.output(b.node("Flatten", {b.input("x", {1, 3, 2, 2})}, "f", {1, 12}));
    EXPECT_NE(reason_for(b.graph()).find("changes the layout"), std::string::npos);
  }
  {
    GraphBuilder b;
    b.output(b.node("Add", {b.input("a", {2, 3}, DType::kInt32), b.input("b", {2, 3}, DType::kInt32)}, "add", {2, 3},
                    DType::kInt32));
    EXPECT_NE(reason_for(b.graph()).find("int32"), std::string::npos);
  }
}

TEST(XnnpackPlugin, LightGroupsStayOnPortableKernels) {
  GraphBuilder b;
  b.output(b.node("Relu", {b.input("x", {1, 3, 4, 5})}, "r", {1, 3, 4, 5}));
  EXPECT_NE(reason_for(b.graph()).find("not worth a partition boundary"), std::string::npos);
  auto x = build(b.graph(), reg().get(), {"xnnpack"}, {{"xnnpack", "skip_light_groups", "false"}}, FallbackPolicy::kRequire);
  EXPECT_TRUE(x.ok()) << x.status().to_string();
}

TEST(XnnpackPlugin, DenseGroupsAreClaimedOnlyWhenAsked) {
  GraphBuilder b;
  ir::ValueId m = b.node("MatMul", {b.input("x", {2, 8, 16}), b.constant("w", random_tensor({16, 4}, 2))}, "mm", {2, 8, 4});
  b.output(b.node("Relu", {m}, "r", {2, 8, 4}));
  EXPECT_NE(reason_for(b.graph()).find("dense_groups=true"), std::string::npos);
  auto x = build(b.graph(), reg().get(), {"xnnpack"}, {{"xnnpack", "dense_groups", "true"}}, FallbackPolicy::kRequire);
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_EQ((*x)->placement().partitions.size(), 1u);
}

// Conv -> BatchNormalization -> Relu -> Conv -> Add (residual) -> GAP -> Flatten -> Gemm.
std::shared_ptr<ir::Graph> small_net() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 3, 8, 8});
  auto c = [&](const std::string& n, std::vector<int64_t> d) { return b.constant(n, random_tensor(d, static_cast<uint32_t>(n.size() * 31 + d[0]))); };
  Tensor var = random_tensor({8}, 5);
  for (int64_t i = 0; i < 8; ++i) var.data<float>()[i] = std::fabs(var.data<float>()[i]) + 0.5f;
  ir::Attribute pads;
  pads.name = "pads";
  pads.type = ir::AttrType::kInts;
  pads.ints = {1, 1, 1, 1};
  ir::ValueId y = b.node("Conv", {x, c("w1", {8, 3, 3, 3})}, "conv1", {1, 8, 8, 8}, DType::kFloat32, "", {pads});
  y = b.node("BatchNormalization", {y, c("s", {8}), c("b", {8}), c("m", {8}), b.constant("v", var)}, "bn", {1, 8, 8, 8});
  ir::ValueId r = b.node("Relu", {y}, "relu", {1, 8, 8, 8});
  ir::ValueId z = b.node("Conv", {r, c("w2", {8, 8, 3, 3}), c("b2", {8})}, "conv2", {1, 8, 8, 8}, DType::kFloat32, "", {pads});
  z = b.node("Add", {z, r}, "add", {1, 8, 8, 8});
  z = b.node("GlobalAveragePool", {z}, "gap", {1, 8, 1, 1});
  z = b.node("Flatten", {z}, "flat", {1, 8});
  b.output(b.node("Gemm", {z, c("fc", {8, 4}), c("fcb", {4})}, "fc", {1, 4}));
  return b.graph();
}

TEST(XnnpackPlugin, RunsASmallNetInOnePartitionLikePortableKernels) {
  auto x = build(small_net(), reg().get(), {"xnnpack"}, {claim_all()}, FallbackPolicy::kRequire);
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  EXPECT_EQ((*x)->placement().partitions.size(), 1u);
  auto p = build(small_net(), nullptr, {});
  ASSERT_TRUE(p.ok());
  std::vector<Value> in{Value(random_tensor({1, 3, 8, 8}, 3))};
  auto a = (*x)->run(in, {}, nullptr);
  auto e = (*p)->run(in, {}, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(e.ok());
  expect_close(a.value()[0].tensor(), e.value()[0].tensor(), 1e-4f);
}

// Builds and runs small_net through a registry of its own; exits with `code` on failure.
void run_small_net_or_exit(int code) {
  auto r = registry_of({KILN_XNNPACK_PLUGIN});
  auto x = build(small_net(), r.get(), {"xnnpack"}, {claim_all()}, FallbackPolicy::kRequire);
  if (!x.ok() || x.value()->placement().partitions.size() != 1) std::exit(code);
  std::vector<Value> in{Value(random_tensor({1, 3, 8, 8}, 3))};
  if (!(*x)->run(in, {}, nullptr).ok()) std::exit(code + 1);
}

// The test below, in its own process: 0 when the plugin ran again.
int reload_after_old_range_taken() {
  uintptr_t lo = UINTPTR_MAX, hi = 0;  // the plugin's mappings
  {
    auto r = registry_of({KILN_XNNPACK_PLUGIN});
    auto x = build(small_net(), r.get(), {"xnnpack"}, {claim_all()}, FallbackPolicy::kRequire);
    if (!x.ok()) return 2;
    const std::string self = std::filesystem::canonical(KILN_XNNPACK_PLUGIN).string();
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
      if (line.size() < self.size() || line.compare(line.size() - self.size(), self.size(), self) != 0) continue;
      uintptr_t b = 0, e = 0;
      if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR, &b, &e) != 2) return 3;
      lo = std::min(lo, b), hi = std::max(hi, e);
    }
    if (hi == 0) return 3;
  }
  if (dlopen(KILN_XNNPACK_PLUGIN, RTLD_NOW | RTLD_NOLOAD)) return 4;  // still mapped: test void
  if (mmap(reinterpret_cast<void*>(lo), hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
           0) == MAP_FAILED)
    return 5;
  run_small_net_or_exit(6);
  return 0;
}

// libXNNPACK stays loaded for the process while the plugin unloads with its
// last registry, so nothing in XNNPACK may keep pointers into the plugin (an
// allocator of the plugin's handed to xnn_initialize did, and the next
// registry's plugin, mapped elsewhere, crashed in xnn_create_subgraph). The
// plugin's old address range is made inaccessible before it loads again, so
// such a pointer faults every time. In a fresh process (threadsafe style).
TEST(XnnpackPluginDeathTest, ReloadedAfterItsOldAddressIsTaken) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(reload_after_old_range_taken()), ::testing::ExitedWithCode(0), "");
}

// shufflenet_v2's branch: 1x1 + Relu -> 3x3 depthwise -> 1x1 + Relu, read
// only by a channel Concat. The project Conv is run by the fused block (on
// AVX-512), so it must not also be planned to write into the Concat (its
// input has no buffer: compiling failed so before).
TEST(XnnpackPlugin, FusedBlockFeedingAConcatMatchesPortableKernels) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 8, 8});
  auto c = [&](const std::string& n, std::vector<int64_t> d) { return b.constant(n, random_tensor(d, static_cast<uint32_t>(n.size() * 13 + d[0]))); };
  ir::ValueId e = b.node("Relu", {b.node("Conv", {x, c("we", {32, 16, 1, 1}), c("be", {32})}, "expand", {1, 32, 8, 8})},
                         "relu_e", {1, 32, 8, 8});
  ir::ValueId d = b.node("Conv", {e, c("wd", {32, 1, 3, 3}), c("bd", {32})}, "dw", {1, 32, 8, 8}, DType::kFloat32, "",
                         {a_int("group", 32), a_ints("kernel_shape", {3, 3}), a_ints("pads", {1, 1, 1, 1})});
  ir::ValueId y = b.node("Relu", {b.node("Conv", {d, c("wp", {16, 32, 1, 1}), c("bp", {16})}, "project", {1, 16, 8, 8})},
                         "relu_p", {1, 16, 8, 8});
  b.output(b.node("Concat", {x, y}, "cat", {1, 32, 8, 8}, DType::kFloat32, "", {a_int("axis", 1)}));
  auto g = b.graph();
  auto xp = build(g, reg().get(), {"xnnpack"}, {claim_all()}, FallbackPolicy::kRequire);
  ASSERT_TRUE(xp.ok()) << xp.status().to_string();
  auto p = build(g, nullptr, {});
  ASSERT_TRUE(p.ok());
  std::vector<Value> in{Value(random_tensor({1, 16, 8, 8}, 3))};
  auto a = (*xp)->run(in, {}, nullptr);
  auto ex = (*p)->run(in, {}, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(ex.ok());
  expect_close(a.value()[0].tensor(), ex.value()[0].tensor(), 1e-4f);
}

// The blob holds the lowered program (packed-order weights, folded
// BatchNormalization), so import rebuilds the XNNPACK runtime without the
// ONNX model; `kiln check-backend` also runs an imported handle against the
// original. Here: the round trip is exact and bad blobs are refused.
TEST(XnnpackPlugin, ExportImportRoundTripsWithAVersionCheck) {
  auto x = build(small_net(), reg().get(), {"xnnpack"}, {claim_all()}, FallbackPolicy::kRequire);
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  const runtime::PartitionKernel* pk = nullptr;
  for (const runtime::Step& s : (*x)->steps())
    if (auto* k = dynamic_cast<const runtime::PartitionKernel*>(s.kernel.get())) pk = k;
  ASSERT_NE(pk, nullptr);
  const runtime::CompiledPartition& cp = pk->compiled();
  auto bytes = cp.export_bytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  runtime::LoadedPlugin& plugin = cp.instance().plugin();
  EXPECT_TRUE(plugin.check_compiled(bytes->data(), bytes->size()).is_ok());
  auto imported = cp.instance().import_compiled(bytes->data(), bytes->size());
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  auto again = (*imported)->export_bytes();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes);

  std::vector<uint8_t> newer = *bytes;
  newer[4] = 9;  // format version 9
  Status st = plugin.check_compiled(newer.data(), newer.size());
  EXPECT_NE(st.message().find("format version 9"), std::string::npos) << st.message();
  std::vector<uint8_t> flipped = *bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  EXPECT_NE(plugin.check_compiled(flipped.data(), flipped.size()).message().find("checksum"), std::string::npos);
  EXPECT_FALSE(cp.instance().import_compiled(bytes->data(), bytes->size() - 1).ok());
  EXPECT_FALSE(cp.instance().import_compiled(nullptr, 0).ok());
  // Every truncation is refused with an error, never a crash (ASan checks the reads).
  for (size_t n = 0; n < bytes->size(); n += 1 + n / 64)
    EXPECT_FALSE(plugin.check_compiled(bytes->data(), n).is_ok()) << n << " bytes";
  // Corrupt bytes under a valid checksum reach the parser's own checks: each
  // answer is an error or a program that validates, never a crash.
  const auto fnv = kiln::sdk::blob_checksum32;  // the plugin's blob checksum
  for (size_t pos = 8; pos + 4 < bytes->size(); pos += 1 + pos / 32) {
    std::vector<uint8_t> b = *bytes;
    b[pos] ^= 0xA5;
    const uint32_t h = fnv(b.data(), b.size() - 4);
    std::memcpy(b.data() + b.size() - 4, &h, 4);
    (void)plugin.check_compiled(b.data(), b.size());
  }
}

TEST(XnnpackPlugin, OptionsAreChecked) {
  auto x = build(small_net(), reg().get(), {"xnnpack"}, {{"xnnpack", "threads", "-1"}}, FallbackPolicy::kAllow);
  EXPECT_FALSE(x.ok());
  if (!x.ok()) {
    EXPECT_NE(x.status().message().find("threads"), std::string::npos) << x.status().message();
  }
  auto two = build(small_net(), reg().get(), {"xnnpack"}, {{"xnnpack", "threads", "2"}, claim_all()}, FallbackPolicy::kRequire);
  ASSERT_TRUE(two.ok()) << two.status().to_string();
}

}  // namespace
}  // namespace kiln::abi_test
