// The partitioner inside Program::build, with the template plugin and the
// fakes: fused groups, boundaries, convex splitting, ids, the placement
// report, fallback policies, custom ops, and failures of plugins at each step.
#include <gtest/gtest.h>

#include <thread>

#include "abi_test_util.h"
#include "runtime/backends/partitioner.h"

namespace kiln::abi_test {
namespace {

// x -> Add(c) -> Relu -> Sigmoid -> Mul(c) -> Relu -> out ; MatMul on a side branch.
std::shared_ptr<ir::Graph> chain_graph() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 8});
  ir::ValueId c = b.constant("c", random_tensor({8}, 1));
  ir::ValueId w = b.constant("w", random_tensor({8, 4}, 2));
  ir::ValueId a = b.node("Add", {x, c}, "add", {2, 8});
  ir::ValueId r = b.node("Relu", {a}, "relu1", {2, 8});
  ir::ValueId s = b.node("Sigmoid", {r}, "sig", {2, 8});
  ir::ValueId m = b.node("Mul", {s, c}, "mul", {2, 8});
  ir::ValueId r2 = b.node("Relu", {m}, "relu2", {2, 8});
  ir::ValueId mm = b.node("MatMul", {r2, w}, "mm", {2, 4});
  b.output(mm);
  b.output(r);
  return b.graph();
}

std::vector<Value> run(const runtime::Program& p, std::vector<Tensor> inputs, ThreadPool* pool = nullptr) {
  std::vector<Value> in(inputs.begin(), inputs.end());
  auto out = p.run(in, {}, pool);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? std::move(out).value() : std::vector<Value>{};
}

TEST(PartitionTest, TemplateFusesConnectedNodesAndMatchesPortable) {
  auto reg = registry_of({template_plugin()});
  auto with = build(chain_graph(), reg.get(), {"template"});
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  auto without = build(chain_graph(), nullptr, {});
  ASSERT_TRUE(without.ok()) << without.status().to_string();

  const PlacementReport& rep = (*with)->placement();
  ASSERT_EQ(rep.partitions.size(), 2u);  // {add, relu1} and {mul, relu2, mm}: Sigmoid separates them
  EXPECT_EQ(rep.partitions[0].nodes, (std::vector<std::string>{"Add 'add'", "Relu 'relu1'"}));
  EXPECT_EQ(rep.partitions[0].inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(rep.partitions[0].outputs, (std::vector<std::string>{"relu1_out"}));
  EXPECT_EQ(rep.partitions[0].boundary_bytes, 2 * 2 * 8 * 4);
  EXPECT_EQ(rep.partitions[1].nodes.size(), 3u);
  EXPECT_EQ(rep.partitions[1].outputs, (std::vector<std::string>{"mm_out"}));
  EXPECT_EQ(rep.backends, (std::vector<std::string>{"template", "portable"}));
  EXPECT_EQ(rep.num_fallback(), 1u);
  EXPECT_EQ((*with)->num_steps(), 3u);  // two partitions and Sigmoid

  // The Sigmoid node says why the template declined it.
  const NodePlacement* sig = nullptr;
  for (const NodePlacement& n : rep.nodes)
    if (n.node == "Sigmoid 'sig'") sig = &n;
  ASSERT_NE(sig, nullptr);
  EXPECT_EQ(sig->placement, "portable");
  ASSERT_EQ(sig->reasons.size(), 1u);
  EXPECT_EQ(sig->reasons[0].first, "template");
  EXPECT_NE(sig->reasons[0].second.find("op Sigmoid is not one of"), std::string::npos);

  Tensor x = random_tensor({2, 8}, 7);
  auto a = run(**with, {x});
  auto b = run(**without, {x});
  ASSERT_EQ(a.size(), 2u);
  expect_close(a[0].tensor(), b[0].tensor());
  expect_close(a[1].tensor(), b[1].tensor());
}

TEST(PartitionTest, PartitionIdsAreStableAndDistinct) {
  auto reg = registry_of({template_plugin()});
  auto p1 = build(chain_graph(), reg.get(), {"template"});
  auto p2 = build(chain_graph(), reg.get(), {"template"});
  ASSERT_TRUE(p1.ok() && p2.ok());
  const auto& a = (*p1)->placement().partitions;
  const auto& b = (*p2)->placement().partitions;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].id, b[i].id);
  EXPECT_NE(a[0].id, a[1].id);
  EXPECT_EQ(a[0].id.rfind("template:", 0), 0u);
  EXPECT_EQ(a[0].id.size(), std::string("template:").size() + 12);
}

TEST(PartitionTest, MaxGroupSizeOptionSplitsGroups) {
  auto reg = registry_of({template_plugin()});
  auto p = build(chain_graph(), reg.get(), {"template"}, {{"template", "max_group_size", "1"}});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->placement().partitions.size(), 5u);
  auto q = build(chain_graph(), reg.get(), {"template"}, {{"template", "fuse", "false"}});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ((*q)->placement().partitions.size(), 5u);
  Tensor x = random_tensor({2, 8}, 3);
  auto ref = build(chain_graph(), nullptr, {});
  ASSERT_TRUE(ref.ok());
  expect_close(run(**p, {x})[0].tensor(), run(**ref, {x})[0].tensor());
}

TEST(PartitionTest, RequireFailsNamingEveryFallbackNodeAndWhy) {
  auto reg = registry_of({template_plugin()});
  auto p = build(chain_graph(), reg.get(), {"template"}, {}, FallbackPolicy::kRequire);
  ASSERT_FALSE(p.ok());
  const std::string& m = p.status().message();
  EXPECT_NE(m.find("fallback policy 'require'"), std::string::npos) << m;
  EXPECT_NE(m.find("1 of 6 nodes"), std::string::npos) << m;
  EXPECT_NE(m.find("Sigmoid 'sig' (template: op Sigmoid is not one of"), std::string::npos) << m;
  EXPECT_EQ(m.find("relu1"), std::string::npos) << m;
}

TEST(PartitionTest, RequirePassesWhenEverythingIsClaimed) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4});
  ir::ValueId r = b.node("Relu", {x}, "r", {4});
  b.output(b.node("Add", {r, x}, "a", {4}));
  auto reg = registry_of({template_plugin()});
  auto p = build(b.graph(), reg.get(), {"template"}, {}, FallbackPolicy::kRequire);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->placement().num_fallback(), 0u);
  EXPECT_EQ((*p)->num_steps(), 1u);
}

// Relu1 -> Sigmoid -> Add(relu1, sig): {relu1, add} is not convex.
std::shared_ptr<ir::Graph> diamond_graph() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {6});
  ir::ValueId r = b.node("Relu", {x}, "relu", {6});
  ir::ValueId s = b.node("Sigmoid", {r}, "sig", {6});
  ir::ValueId a = b.node("Add", {r, s}, "add", {6});
  ir::ValueId m = b.node("Mul", {a, x}, "mul", {6});
  b.output(m);
  return b.graph();
}

TEST(PartitionTest, NonConvexGroupIsSplitAndStillCorrect) {
  auto reg = registry_of({fake("non_convex")});
  auto p = build(diamond_graph(), reg.get(), {"nonconvex"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const PlacementReport& rep = (*p)->placement();
  ASSERT_EQ(rep.partitions.size(), 2u);
  EXPECT_EQ(rep.partitions[0].nodes, (std::vector<std::string>{"Relu 'relu'"}));
  EXPECT_EQ(rep.partitions[1].nodes, (std::vector<std::string>{"Add 'add'", "Mul 'mul'"}));
  bool noted = false;
  for (const std::string& n : rep.notes) noted |= n.find("was not convex") != std::string::npos;
  EXPECT_TRUE(noted);
  auto ref = build(diamond_graph(), nullptr, {});
  ASSERT_TRUE(ref.ok());
  Tensor x = random_tensor({6}, 5);
  expect_close(run(**p, {x})[0].tensor(), run(**ref, {x})[0].tensor());
}

TEST(PartitionTest, SplitConvexKeepsConvexGroupsWhole) {
  auto g = diamond_graph();
  std::vector<int32_t> unit(g->nodes.size());
  for (size_t i = 0; i < unit.size(); ++i) unit[i] = static_cast<int32_t>(i);
  EXPECT_EQ(runtime::split_convex(*g, unit, std::vector<int32_t>{2, 3}).size(), 1u);
  EXPECT_EQ(runtime::split_convex(*g, unit, std::vector<int32_t>{0, 1, 2}).size(), 1u);
  auto parts = runtime::split_convex(*g, unit, std::vector<int32_t>{0, 2, 3});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], (std::vector<int32_t>{0}));
  EXPECT_EQ(parts[1], (std::vector<int32_t>{2, 3}));
  // Contracting {sig, add} into one unit makes {relu, mul} non-convex through it.
  unit[1] = unit[2] = 100;
  EXPECT_EQ(runtime::split_convex(*g, unit, std::vector<int32_t>{0, 3}).size(), 2u);
}

TEST(PartitionTest, SerialHandlesAreSerializedUnderConcurrentRuns) {
  auto reg = registry_of({fake("non_convex")});
  auto p = build(diamond_graph(), reg.get(), {"nonconvex"});
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*p)->placement().partitions[0].serial);
  auto ref = build(diamond_graph(), nullptr, {});
  Tensor x = random_tensor({6}, 9);
  Tensor want = run(**ref, {x})[0].tensor();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::vector<Value> in{Value(x)};
        auto out = (*p)->run(in, {}, nullptr);
        if (!out.ok()) {
          ++failures;
          ADD_FAILURE() << out.status().to_string();
          return;
        }
        for (int64_t k = 0; k < want.numel(); ++k)
          if (out.value()[0].tensor().data<float>()[k] != want.data<float>()[k]) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(PartitionTest, EarlierBackendsWinAndPortableCanBeNamedFirst) {
  auto reg = registry_of({template_plugin(), fake("minimal")});
  auto p = build(chain_graph(), reg.get(), {"minimal", "template"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto& parts = (*p)->placement().partitions;
  int minimal = 0;
  for (const PartitionInfo& i : parts) minimal += i.backend == "minimal";
  EXPECT_EQ(minimal, 2);  // both Relus; the template gets Add, Mul and MatMul
  auto q = build(chain_graph(), reg.get(), {"portable", "template"});
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE((*q)->placement().partitions.empty());
  EXPECT_EQ((*q)->placement().backends, (std::vector<std::string>{"portable", "template"}));
}

TEST(PartitionTest, CustomOpRunsOnItsPluginWhateverTheOrder) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {3});
  ir::ValueId y = b.input("y", {3});
  ir::ValueId z = b.input("z", {1});
  ir::ValueId m = b.node("MulAdd", {x, y, z}, "fma", {3}, DType::kFloat32, "kiln.template");
  b.output(b.node("Sigmoid", {m}, "sig", {3}));
  auto reg = registry_of({template_plugin()});
  auto p = build(b.graph(), reg.get(), {"portable", "template"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ((*p)->placement().partitions.size(), 1u);
  EXPECT_TRUE((*p)->placement().partitions[0].custom_op);
  Tensor tx = Tensor::from_vector<float>({1, 2, 3}), ty = Tensor::from_vector<float>({4, 5, 6}),
         tz = Tensor::from_vector<float>({-10});
  auto out = run(**p, {tx, ty, tz});
  ASSERT_EQ(out.size(), 1u);
  const float want[] = {-6, 0, 8};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[0].tensor().data<float>()[i], 1.f / (1.f + std::exp(-want[i])), 1e-6);

  // Without the plugin selected, the error names it.
  auto q = build(b.graph(), reg.get(), {"portable"});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("custom op of backend 'template', which is not selected"), std::string::npos)
      << q.status().message();
}

TEST(PartitionTest, SelectionErrorsNameTheProblem) {
  auto reg = registry_of({template_plugin()});
  auto unknown = build(chain_graph(), reg.get(), {"xnnpack"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown backend 'xnnpack'; loaded: template ("), std::string::npos)
      << unknown.status().message();
  auto twice = build(chain_graph(), reg.get(), {"template", "template"});
  EXPECT_NE(twice.status().message().find("listed twice"), std::string::npos);
  auto bad_key = build(chain_graph(), reg.get(), {"template"}, {{"template", "max_size", "3"}});
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.status().message().find(
                "unknown option 'max_size' for backend 'template'; known options: max_group_size (int), fuse (bool)"),
            std::string::npos)
      << bad_key.status().message();
  auto bad_value = build(chain_graph(), reg.get(), {"template"}, {{"template", "fuse", "maybe"}});
  EXPECT_NE(bad_value.status().message().find("option 'template.fuse' must be bool, got 'maybe'"), std::string::npos)
      << bad_value.status().message();
  auto negative = build(chain_graph(), reg.get(), {"template"}, {{"template", "max_group_size", "-2"}});
  EXPECT_NE(negative.status().message().find("must be >= 0"), std::string::npos) << negative.status().message();
  auto unselected = build(chain_graph(), reg.get(), {"portable"}, {{"template", "fuse", "true"}});
  EXPECT_NE(unselected.status().message().find("'template' is not selected"), std::string::npos);
  auto device = build(chain_graph(), reg.get(), {"template"}, {{"template", "device", "gpu7"}});
  EXPECT_NE(device.status().message().find("has no device 'gpu7'; its devices: 0 (cpu)"), std::string::npos)
      << device.status().message();
  auto cpu = build(chain_graph(), reg.get(), {"template"}, {{"template", "device", "cpu"}});
  EXPECT_TRUE(cpu.ok()) << cpu.status().to_string();
}

TEST(PartitionTest, DefaultSelectionSkipsPriorityZeroAndUnavailablePlugins) {
  auto reg = registry_of({template_plugin(), fake("vendor_missing")});
  auto p = build(chain_graph(), reg.get(), {});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const PlacementReport& rep = (*p)->placement();
  EXPECT_EQ(rep.backends, (std::vector<std::string>{"portable"}));
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_NE(rep.notes[0].find("backend 'vendor' skipped: not available: libkiln_fake_vendor.so.1 not found"),
            std::string::npos)
      << rep.notes[0];
  auto req = build(chain_graph(), reg.get(), {"vendor"}, {}, FallbackPolicy::kRequire);
  ASSERT_FALSE(req.ok());
  EXPECT_EQ(req.status().code(), StatusCode::kUnavailable);
}

TEST(PartitionTest, FailuresOfEachCallBecomeReasonsOrErrors) {
  auto reg_for = [](const char* fail) {
    ScopedEnv env("KILN_FAKE_FAIL", fail);
    return registry_of({fake("failing")});
  };
  {
    ScopedEnv env("KILN_FAKE_FAIL", "capability");
    auto reg = registry_of({fake("failing")});
    auto p = build(chain_graph(), reg.get(), {"failing"});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    const auto& n = (*p)->placement().nodes[1];
    ASSERT_FALSE(n.reasons.empty());
    EXPECT_EQ(n.reasons[0].second, "get_capability failed: fake failure in capability");
  }
  {
    ScopedEnv env("KILN_FAKE_FAIL", "compile");
    auto reg = registry_of({fake("failing")});
    auto p = build(chain_graph(), reg.get(), {"failing"});
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE((*p)->placement().partitions.empty());
    EXPECT_NE((*p)->placement().nodes[1].reasons[0].second.find("compile failed: fake failure in compile"),
              std::string::npos);
  }
  {
    ScopedEnv env("KILN_FAKE_FAIL", "execute");
    auto reg = registry_of({fake("failing")});
    auto p = build(chain_graph(), reg.get(), {"failing"});
    ASSERT_TRUE(p.ok());
    std::vector<Value> in{Value(random_tensor({2, 8}, 1))};
    auto out = (*p)->run(in, {}, nullptr);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("backend 'failing': fake failure in execute"), std::string::npos)
        << out.status().message();
  }
  {
    ScopedEnv env("KILN_FAKE_FAIL", "create");
    auto reg = registry_of({fake("failing")});
    auto p = build(chain_graph(), reg.get(), {"failing"});
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("backend 'failing': instance_create: fake failure in create"), std::string::npos)
        << p.status().message();
  }
  (void)reg_for;
}

TEST(PartitionTest, ThrowingPluginFailsWithStatusesNotCrashes) {
  {
    ScopedEnv env("KILN_FAKE_THROW", "capability");
    auto reg = registry_of({fake("throwing")});
    auto p = build(chain_graph(), reg.get(), {"throwing"});
    ASSERT_TRUE(p.ok());
    EXPECT_NE((*p)->placement().nodes[1].reasons[0].second.find(
                  "uncaught exception in instance_get_capability: boom in get_capability"),
              std::string::npos)
        << (*p)->placement().nodes[1].reasons[0].second;
  }
  {
    ScopedEnv env("KILN_FAKE_THROW", "compile");
    auto reg = registry_of({fake("throwing")});
    auto p = build(chain_graph(), reg.get(), {"throwing"});
    ASSERT_TRUE(p.ok());
    EXPECT_NE((*p)->placement().nodes[1].reasons[0].second.find("not a std::exception"), std::string::npos);
  }
  {
    ScopedEnv env("KILN_FAKE_THROW", "execute");
    auto reg = registry_of({fake("throwing")});
    auto p = build(chain_graph(), reg.get(), {"throwing"});
    ASSERT_TRUE(p.ok());
    std::vector<Value> in{Value(random_tensor({2, 8}, 1))};
    auto out = (*p)->run(in, {}, nullptr);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("out of memory"), std::string::npos) << out.status().message();
  }
}

TEST(PartitionTest, BrokenAnswersAreIgnoredAndReported) {
  auto reg = registry_of({fake("bad_answers")});
  {
    auto p = build(chain_graph(), reg.get(), {"bad_answers"});
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    std::string notes;
    for (const std::string& n : (*p)->placement().notes) notes += n + "\n";
    EXPECT_NE(notes.find("out of range"), std::string::npos) << notes;
    EXPECT_NE(notes.find("claimed twice"), std::string::npos) << notes;
    // Execute claims success without producing its output.
    std::vector<Value> in{Value(random_tensor({2, 8}, 1))};
    auto out = (*p)->run(in, {}, nullptr);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("returned OK without producing output 0"), std::string::npos)
        << out.status().message();
  }
  {
    ScopedEnv env("KILN_FAKE_BAD", "null_compile");
    auto p = build(chain_graph(), reg.get(), {"bad_answers"});
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE((*p)->placement().partitions.empty());
    EXPECT_NE((*p)->placement().nodes[0].reasons[0].second.find("compile returned no handle"), std::string::npos)
        << (*p)->placement().nodes[0].reasons[0].second;
  }
}

TEST(PartitionTest, LibraryOutlivesRegistryWhileProgramLives) {
  std::unique_ptr<runtime::Program> p;
  {
    auto reg = registry_of({template_plugin()});
    auto built = build(chain_graph(), reg.get(), {"template"});
    ASSERT_TRUE(built.ok());
    p = std::move(built).value();
  }
  auto ref = build(chain_graph(), nullptr, {});
  Tensor x = random_tensor({2, 8}, 11);
  expect_close(run(*p, {x})[0].tensor(), run(**ref, {x})[0].tensor());
}

TEST(PartitionTest, SessionsOnManyThreadsShareOneRegistry) {
  auto reg = registry_of({template_plugin(), fake("non_convex")});
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto p = build(t % 2 ? chain_graph() : diamond_graph(), reg.get(), {t % 2 ? "template" : "nonconvex"});
        if (p.ok() && !(*p)->placement().partitions.empty()) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 40);
}

TEST(PartitionTest, ThreadPoolReachesThePlugin) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {64, 256});
  ir::ValueId w = b.constant("w", random_tensor({256, 128}, 4));
  ir::ValueId m = b.node("MatMul", {x, w}, "mm", {64, 128});
  b.output(b.node("Relu", {m}, "r", {64, 128}));
  auto reg = registry_of({template_plugin()});
  auto p = build(b.graph(), reg.get(), {"template"});
  auto ref = build(b.graph(), nullptr, {});
  ASSERT_TRUE(p.ok() && ref.ok());
  ThreadPool pool(3);
  Tensor x_in = random_tensor({64, 256}, 8);
  expect_close(run(**p, {x_in}, &pool)[0].tensor(), run(**ref, {x_in})[0].tensor());
}

}  // namespace
}  // namespace kiln::abi_test
