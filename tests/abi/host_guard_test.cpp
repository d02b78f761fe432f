// What the host guarantees around a plugin's compiled handles, with plugins
// linked into the test: every output of a partition is checked for being
// produced (also past index 64), and compiled_release never runs while an
// instance-level call on its instance is in progress.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"
#include "runtime/backends/graph_view.h"

namespace kiln::abi_test {
namespace {

// --- outputs past index 64 ---------------------------------------------------

// Claims every node as one group; execute writes Relu(x) to every output but
// the last one.
class SkipsLastOutput final : public sdk::Plugin {
 public:
  Info info() const override { return {"skips_last", "1", "tests", "", "never produces its last output", 0}; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    class Run final : public sdk::Compiled {
     public:
      explicit Run(size_t outputs) : outputs_(outputs) {}
      void execute(sdk::ExecContext& ctx, const sdk::Inputs& in) override {
        sdk::TensorView x = in[0];
        for (size_t i = 0; i + 1 < outputs_; ++i) {
          sdk::TensorView y = ctx.allocate_output(i, KILN_DTYPE_FLOAT32, x.dims, x.rank);
          for (int64_t k = 0; k < x.numel(); ++k) y.as<float>()[k] = std::max(0.f, x.as<float>()[k]);
        }
      }
      size_t num_inputs() const override { return 1; }
      size_t num_outputs() const override { return outputs_; }

     private:
      size_t outputs_;
    };
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      void get_capability(const sdk::Graph& g, sdk::Capability& cap) override {
        std::vector<size_t> all(g.num_nodes());
        for (size_t i = 0; i < all.size(); ++i) all[i] = i;
        cap.add_group(all);
      }
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition& p) override {
        return std::make_unique<Run>(p.outputs.size());
      }
    };
    return std::make_unique<Inst>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(skips_last_entry, SkipsLastOutput)

TEST(HostGuardTest, EveryOutputIsCheckedEvenPastIndex64) {
  for (int outputs : {3, 64, 65, 70}) {
    auto reg = registry_of({});
    ASSERT_TRUE(runtime::registry_impl(*reg).add_entry(&skips_last_entry, "(test)").is_ok());
    GraphBuilder b;
    ir::ValueId v = b.input("x", {4});
    for (int i = 0; i < outputs; ++i) {  // a chain of Relus, each a model output
      v = b.node("Relu", {v}, "r" + std::to_string(i), {4});
      b.output(v);
    }
    auto p = build(b.graph(), reg.get(), {"skips_last"}, {}, FallbackPolicy::kRequire);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    ASSERT_EQ((*p)->placement().partitions.size(), 1u);
    std::vector<Value> in{Value(random_tensor({4}, 3))};
    auto out = (*p)->run(in, {}, nullptr);
    ASSERT_FALSE(out.ok()) << outputs << " outputs: the missing one went unnoticed";
    EXPECT_NE(out.status().message().find("returned OK without producing output " + std::to_string(outputs - 1)),
              std::string::npos)
        << out.status().message();
  }
}

// --- compiled_release vs. instance calls ---------------------------------------

// Shared by the plugin below and the test: whether a compiled handle was
// released while get_capability was running on its instance.
struct ReleaseProbe {
  std::mutex mu;
  std::condition_variable cv;
  bool in_capability = false;
  bool entered = false;
  bool released = false;
  bool overlapped = false;
};
ReleaseProbe* g_probe = nullptr;

class ProbePlugin final : public sdk::Plugin {
 public:
  Info info() const override { return {"probe", "1", "tests", "", "records overlapping calls", 0}; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    class Nothing final : public sdk::Compiled {
     public:
      ~Nothing() override {
        std::lock_guard<std::mutex> lock(g_probe->mu);
        g_probe->overlapped |= g_probe->in_capability;
        g_probe->released = true;
        g_probe->cv.notify_all();
      }
      void execute(sdk::ExecContext&, const sdk::Inputs&) override {}
      size_t num_inputs() const override { return 0; }
      size_t num_outputs() const override { return 0; }
    };
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      // Waits (a bounded time) for a release to happen during this call.
      void get_capability(const sdk::Graph&, sdk::Capability&) override {
        std::unique_lock<std::mutex> lock(g_probe->mu);
        g_probe->in_capability = g_probe->entered = true;
        g_probe->cv.notify_all();
        g_probe->cv.wait_for(lock, std::chrono::milliseconds(300), [] { return g_probe->released; });
        g_probe->in_capability = false;
      }
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition&) override {
        return std::make_unique<Nothing>();
      }
    };
    return std::make_unique<Inst>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(probe_entry, ProbePlugin)

TEST(HostGuardTest, CompiledReleaseWaitsForInstanceCalls) {
  ReleaseProbe probe;
  g_probe = &probe;
  auto loaded = runtime::LoadedPlugin::from_entry(&probe_entry, "(test)");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto inst = (*loaded)->create_instance(0, {});
  ASSERT_TRUE(inst.ok()) << inst.status().to_string();
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1});
  b.output(b.node("Relu", {x}, "r", {1}));
  auto g = b.graph();
  std::vector<int32_t> all{0};
  auto view = runtime::make_graph_view(*g, nullptr, all, {});
  kiln_partition_t part{};
  part.struct_size = sizeof(part);
  size_t node = 0;
  part.num_nodes = 1;
  part.nodes = &node;
  auto compiled = (*inst)->compile(view.get(), part);
  ASSERT_TRUE(compiled.ok()) << compiled.status().to_string();
  std::shared_ptr<runtime::CompiledPartition> handle = std::move(compiled).value();

  std::thread capability([&] { EXPECT_TRUE((*inst)->get_capability(view.get()).ok()); });
  {
    std::unique_lock<std::mutex> lock(probe.mu);
    probe.cv.wait(lock, [&] { return probe.entered; });
  }
  handle.reset();  // compiled_release: must wait until get_capability has returned
  capability.join();
  EXPECT_TRUE(probe.released);
  EXPECT_FALSE(probe.overlapped) << "compiled_release ran during instance_get_capability on the same instance";
  g_probe = nullptr;
}

}  // namespace
}  // namespace kiln::abi_test
