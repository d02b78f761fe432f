// An SDK device plugin through the real host (ABI 1.1): device inputs and
// outputs from Instance::allocate, copies with Instance::copy, an async
// execute on a thread of the plugin signalling the host's fence through
// sdk::Fence, the host's workspace and trace slices from sdk::TraceScope.
// Each Relu is its own partition, so the chain x -> Relu -> Relu keeps its
// middle edge on the "device".
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"

namespace kiln::abi_test {
namespace {

std::atomic<int> g_async_calls{0};
std::atomic<int> g_copies{0};
std::atomic<int> g_bad_workspace{0};

// The instance's one queue: work queued on an instance runs in order
// (executions and fenced copies alike), as the header requires.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

class RelU final : public sdk::Compiled {
 public:
  explicit RelU(Worker& w) : worker_(w) {}
  size_t num_inputs() const override { return 1; }
  size_t num_outputs() const override { return 1; }
  std::vector<kiln_memory_kind_t> input_memory_kinds() const override { return {KILN_MEMORY_DEVICE}; }
  std::vector<kiln_memory_kind_t> output_memory_kinds() const override { return {KILN_MEMORY_DEVICE}; }
  std::array<uint64_t, KILN_MEMORY_KIND_COUNT> workspace_bytes() const override { return {64, 0, 0, 0}; }
  bool is_async() const override { return true; }
  void execute(sdk::ExecContext& ctx, const sdk::Inputs& in) override {  // the synchronous path
    sdk::TensorView y = ctx.allocate_output(0, KILN_DTYPE_FLOAT32, in[0].dims, in[0].rank);
    if (!relu(in[0], y)) sdk::fail(KILN_STATUS_INTERNAL, "not device memory");
  }
  void execute_async(sdk::ExecContext& ctx, const sdk::Inputs& in, sdk::Fence done) override {
    ++g_async_calls;
    sdk::TensorView y = ctx.allocate_output(0, KILN_DTYPE_FLOAT32, in[0].dims, in[0].rank);
    worker_.push([ctx, x = sdk::hold(in), y = sdk::HeldTensor::of(y), done]() mutable {
      sdk::TraceScope trace(ctx, "relu", 0);
      if (ctx.workspace(KILN_MEMORY_HOST).size < 64) ++g_bad_workspace;
      const bool ok = relu(x[0].view(), y.view());
      trace.end();  // ctx is valid only until the fence is signalled
      if (ok) done.signal();
      else done.fail(KILN_STATUS_INTERNAL, "not device memory");
    });
  }

 private:
  static bool relu(const sdk::TensorView& x, const sdk::TensorView& y) {
    if (x.memory_kind != KILN_MEMORY_DEVICE || y.memory_kind != KILN_MEMORY_DEVICE) return false;
    for (int64_t i = 0; i < x.numel(); ++i) y.as<float>()[i] = std::max(0.f, x.as<const float>()[i]);
    return true;
  }
  Worker& worker_;
};

class SdkDev final : public sdk::Plugin {
 public:
  Info info() const override { return {"sdkdev", "1", "tests", "", "an SDK device plugin", 0}; }
  bool device_memory() const override { return true; }
  std::unique_ptr<sdk::Instance> create_instance(size_t, sdk::Options o) override {
    class Inst final : public sdk::Instance {
     public:
      using Instance::Instance;
      void get_capability(const sdk::Graph& g, sdk::Capability& cap) override {
        std::vector<bool> ok = cap.decline_unsupported(g, [](const sdk::Node& n) {
          return n.op_type() == "Relu" ? std::string() : "not Relu";
        });
        cap.add_connected_groups(g, ok, 0, /*fuse=*/false);
      }
      std::unique_ptr<sdk::Compiled> compile(const sdk::Graph&, const sdk::Partition&) override {
        return std::make_unique<RelU>(worker_);
      }
      void* allocate(kiln_memory_kind_t, uint32_t, size_t size, size_t alignment) override {
        return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
      }
      void deallocate(kiln_memory_kind_t, void* p) noexcept override { std::free(p); }
      void copy(const std::vector<sdk::Copy>& copies, sdk::Fence done) override {
        g_copies += static_cast<int>(copies.size());
        auto job = [copies] {
          for (const sdk::Copy& c : copies) std::memcpy(c.dst, c.src, c.bytes);
        };
        if (done) return worker_.push([job, done]() mutable { job(), done.signal(); });
        std::promise<void> finished;  // synchronous: after the work queued before it
        worker_.push([&] { job(), finished.set_value(); });
        finished.get_future().wait();
      }

     private:
      Worker worker_;  // destroyed after every compiled handle (the host releases those first)
    };
    return std::make_unique<Inst>(std::move(o));
  }
};
KILN_BACKEND_DEFINE_ENTRY(sdkdev_entry, SdkDev)

TEST(SdkDeviceHostTest, AnAsyncSdkPluginRunsAChainOnTheDeviceThroughTheHost) {
  auto reg = registry_of({});
  ASSERT_TRUE(runtime::registry_impl(*reg).add_entry(&sdkdev_entry, "(test)").is_ok());
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 8});
  ir::ValueId r1 = b.node("Relu", {x}, "r1", {4, 8});
  b.output(b.node("Relu", {r1}, "r2", {4, 8}));
  auto p = build(b.graph(), reg.get(), {"sdkdev"});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ((*p)->placement().partitions.size(), 2u);
  const Tensor in = random_tensor({4, 8}, 3);
  g_async_calls = 0;
  g_copies = 0;
  g_bad_workspace = 0;
  RunProfile profile;
  std::vector<Value> feeds{Value(in)};
  auto out = (*p)->run(feeds, {}, nullptr, &profile);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  Tensor want = Tensor::allocate(DType::kFloat32, Shape({4, 8}));
  for (int64_t i = 0; i < in.numel(); ++i) want.data<float>()[i] = std::max(0.f, in.data<float>()[i]);
  expect_close(out->at(0).tensor(), want, 0);
  EXPECT_EQ(g_async_calls.load(), 2);
  EXPECT_EQ(g_copies.load(), 2);  // one in, one out: the middle edge stays on the device
  EXPECT_EQ(g_bad_workspace.load(), 0);
  ASSERT_EQ(profile.plugin_events.size(), 2u);  // one TraceScope slice per execution
  EXPECT_EQ(profile.plugin_events[0].op_type, "sdkdev / 0");
}

}  // namespace
}  // namespace kiln::abi_test
