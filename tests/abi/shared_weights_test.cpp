// Shared weights (ABI 1.1): instances shared by the sessions of one registry
// for plugins with KILN_PLUGIN_SHARED_INSTANCES (one per session without),
// released with the last session; constants a plugin owns dropped by the
// host when nothing else reads them, the model still running correctly.
// The plugins: tests/abi/fakes/fake_weights.c.
#include <gtest/gtest.h>

#include <thread>

#include "abi_test_util.h"

namespace kiln::abi_test {
namespace {

std::string weights_plugin(const std::string& variant) {
  return std::string(KILN_FAKES_DIR) + "/weights/libkiln_fake_" + variant + ".so";
}

std::shared_ptr<runtime::BackendInstance> instance_of(const BackendRegistry& r, const std::string& name) {
  auto req = runtime::select_backends(r, {name}, {}, FallbackPolicy::kAllow);
  EXPECT_TRUE(req.is_ok()) << req.status().to_string();
  if (!req.is_ok() || req->backends.empty()) return nullptr;
  return req->backends[0].instance;
}

int64_t property(runtime::BackendInstance& inst, const std::string& key) {
  auto v = inst.get_property(key);
  EXPECT_TRUE(v.is_ok()) << v.status().to_string();
  return v.is_ok() ? std::stoll(*v) : -1;
}

// y = MatMul(Add(x, W), M); with `portable_reader`, also z = Mul(x, W),
// which the plugin does not claim; with `w_is_output`, W is a graph output.
std::shared_ptr<ir::Graph> model(bool portable_reader = false, bool w_is_output = false) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 3});
  ir::ValueId w = b.constant("W", random_tensor({2, 3}, 1));
  ir::ValueId m = b.constant("M", random_tensor({3, 4}, 2));
  ir::ValueId a = b.node("Add", {x, w}, "add", {2, 3});
  b.output(b.node("MatMul", {a, m}, "matmul", {2, 4}));
  if (portable_reader) b.output(b.node("Mul", {x, w}, "mul", {2, 3}));
  if (w_is_output) b.output(w);
  return b.graph();
}

std::vector<Value> run(const runtime::Program& p, const Tensor& x) {
  std::vector<Value> in{Value(x)};
  auto out = p.run(in, {}, nullptr);
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  return out.is_ok() ? std::move(*out) : std::vector<Value>{};
}

// Runs `g` with `backend` and on portable kernels and compares every output.
void expect_same_as_portable(const runtime::Program& p, std::shared_ptr<ir::Graph> g) {
  auto ref = build(std::move(g), nullptr, {});
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  const Tensor x = random_tensor({2, 3}, 3);
  std::vector<Value> got = run(p, x), want = run(**ref, x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].tensor(), want[i].tensor());
}

size_t partitions_on(const runtime::Program& p, const std::string& backend) {
  size_t n = 0;
  for (const PartitionInfo& info : p.placement().partitions) n += info.backend == backend;
  return n;
}

TEST(SharedWeightsTest, SharedInstancePluginGetsOneInstancePerRegistry) {
  auto reg = registry_of({weights_plugin("weights_shared")});
  ASSERT_TRUE(reg->find("weights_shared").is_ok());
  EXPECT_TRUE(reg->find("weights_shared")->shared_instances);
  auto a = instance_of(*reg, "weights_shared");
  auto b = instance_of(*reg, "weights_shared");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(property(*a, "instances_created"), 1);

  // Two sessions (programs) of the model compile on that one instance,
  // which keeps one copy of each weight (the host's content hashes match).
  auto p1 = build(model(), reg.get(), {"weights_shared"});
  auto p2 = build(model(), reg.get(), {"weights_shared"});
  ASSERT_TRUE(p1.is_ok() && p2.is_ok());
  EXPECT_EQ(partitions_on(**p1, "weights_shared"), 2u);
  EXPECT_EQ(property(*a, "instances_created"), 1);
  EXPECT_EQ(property(*a, "weight_copies"), 2);

  // Another registry loading the same library has instances of its own.
  auto other = registry_of({weights_plugin("weights_shared")});
  auto c = instance_of(*other, "weights_shared");
  ASSERT_TRUE(c);
  EXPECT_NE(c.get(), a.get());
}

TEST(SharedWeightsTest, WithoutTheFlagEachSessionCreatesItsOwnInstance) {
  auto reg = registry_of({weights_plugin("weights")});
  EXPECT_FALSE(reg->find("weights")->shared_instances);
  auto a = instance_of(*reg, "weights");
  auto b = instance_of(*reg, "weights");
  ASSERT_TRUE(a && b);
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(property(*a, "instances_created"), 2);
  auto p1 = build(model(), reg.get(), {"weights"});
  auto p2 = build(model(), reg.get(), {"weights"});
  ASSERT_TRUE(p1.is_ok() && p2.is_ok());
  EXPECT_EQ(property(*a, "instances_created"), 4);
  EXPECT_EQ(property(*a, "weight_copies"), 0);  // the programs compiled on instances of their own
}

TEST(SharedWeightsTest, ASharedInstanceGoesWithTheLastSessionUsingIt) {
  auto reg = registry_of({weights_plugin("weights_shared")});
  auto p1 = build(model(), reg.get(), {"weights_shared"});
  auto p2 = build(model(), reg.get(), {"weights_shared"});
  ASSERT_TRUE(p1.is_ok() && p2.is_ok());
  std::weak_ptr<runtime::BackendInstance> weak = instance_of(*reg, "weights_shared");
  ASSERT_FALSE(weak.expired());
  p1->reset();
  EXPECT_FALSE(weak.expired());  // the second session still uses it
  EXPECT_EQ(property(*weak.lock(), "weight_copies"), 2);
  p2->reset();
  EXPECT_TRUE(weak.expired());  // released with the last session, before the plugin
  auto fresh = instance_of(*reg, "weights_shared");
  ASSERT_TRUE(fresh);
  EXPECT_EQ(property(*fresh, "instances_created"), 2);
  EXPECT_EQ(property(*fresh, "weight_copies"), 0);
}

TEST(SharedWeightsTest, SessionsOnManyThreadsShareOneInstanceSafely) {
  auto reg = registry_of({weights_plugin("weights_shared")});
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<runtime::Program>> programs(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto p = build(model(), reg.get(), {"weights_shared"});
      if (p.is_ok()) programs[static_cast<size_t>(t)] = std::move(*p);
      else errors[static_cast<size_t>(t)] = p.status().to_string();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) ASSERT_TRUE(programs[static_cast<size_t>(t)]) << errors[static_cast<size_t>(t)];
  auto inst = instance_of(*reg, "weights_shared");
  EXPECT_EQ(property(*inst, "instances_created"), 1);
  EXPECT_EQ(property(*inst, "weight_copies"), 2);
  for (const auto& p : programs) expect_same_as_portable(*p, model());
}

TEST(SharedWeightsTest, OwnedConstantsAreDroppedAndTheModelStillRuns) {
  auto reg = registry_of({weights_plugin("weights")});
  auto g = model();
  const ir::ValueId w = g->find_value("W"), m = g->find_value("M");
  std::weak_ptr<void> w_memory = g->initializers.at(w).memory_owner();
  auto p = build(std::move(g), reg.get(), {"weights"});
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const runtime::Program& prog = **p;
  EXPECT_EQ(partitions_on(prog, "weights"), 2u);
  EXPECT_EQ(prog.constants().count(w), 0u);
  EXPECT_EQ(prog.constants().count(m), 0u);
  EXPECT_EQ(prog.graph().initializer(w), nullptr);
  EXPECT_EQ(prog.num_dropped_constants(), 2u);
  EXPECT_EQ(prog.placement().num_dropped_constants, 2u);
  EXPECT_EQ(prog.placement().dropped_constant_bytes, (6u + 12u) * sizeof(float));
  EXPECT_TRUE(w_memory.expired());  // the bytes themselves are gone, not just the map entries
  bool noted = false;
  for (const std::string& n : prog.placement().notes) noted |= n.find("the host dropped its copies") != std::string::npos;
  EXPECT_TRUE(noted);
  expect_same_as_portable(prog, model());
}

TEST(SharedWeightsTest, AConstantAPortableNodeOrTheCallerReadsIsKept) {
  auto reg = registry_of({weights_plugin("weights")});
  auto g = model(/*portable_reader=*/true);
  const ir::ValueId w = g->find_value("W"), m = g->find_value("M");
  auto p = build(g, reg.get(), {"weights"});
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ((*p)->constants().count(w), 1u);  // Mul on portable kernels reads it
  EXPECT_EQ((*p)->constants().count(m), 0u);
  EXPECT_EQ((*p)->num_dropped_constants(), 1u);
  expect_same_as_portable(**p, model(true));

  auto as_output = build(model(false, /*w_is_output=*/true), reg.get(), {"weights"});
  ASSERT_TRUE(as_output.is_ok()) << as_output.status().to_string();
  EXPECT_EQ((*as_output)->constants().count(w), 1u);  // the caller reads it
  EXPECT_EQ((*as_output)->num_dropped_constants(), 1u);
  expect_same_as_portable(**as_output, model(false, true));
}

TEST(SharedWeightsTest, KeepOwnedConstantsKeepsThem) {
  auto reg = registry_of({weights_plugin("weights")});
  auto req = runtime::select_backends(*reg, {"weights"}, {}, FallbackPolicy::kAllow);
  ASSERT_TRUE(req.is_ok());
  runtime::ProgramOptions po;
  po.registry = &kernels::portable_registry();
  po.partition = &*req;
  po.keep_owned_constants = true;
  auto g = model();
  const ir::ValueId w = g->find_value("W");
  auto p = runtime::Program::build(std::move(g), po);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ((*p)->constants().count(w), 1u);
  EXPECT_EQ((*p)->num_dropped_constants(), 0u);
  EXPECT_EQ((*p)->placement().num_dropped_constants, 0u);
}

}  // namespace
}  // namespace kiln::abi_test
