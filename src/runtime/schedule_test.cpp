// Inter-op parallelism: independent steps grouped and run at once give the
// same outputs as the sequential order (bit for bit, many runs, pools of 1,
// 2 and 4 threads), keep their memory apart, and still report errors and
// cancellation.
#include "runtime/schedule.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

namespace kiln::runtime {
namespace {

// y[i] = sin(x[i] * c) + c, computed with a parallel_for over the pool (so
// steps run at once share chunks with each other).
class Wave final : public kernels::Kernel {
 public:
  Status init(const kernels::KernelInit& init) {
    c_ = init.attr_float("c", 1.f);
    return Status::ok();
  }
  Status compute(kernels::KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, x.shape()));
    const float* px = x.data<float>();
    float* py = y->data<float>();
    parallel_for(ctx.pool(), x.numel(), 64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) py[i] = std::sin(px[i] * c_) + c_;
    });
    return Status::ok();
  }

 private:
  float c_ = 1.f;
};

// y = a + b.
class Sum2 final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext& ctx) const override {
    const Tensor& a = ctx.input(0);
    if (ctx.input(1).numel() != a.numel()) return invalid_argument("Sum2: sizes differ");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, a.shape()));
    for (int64_t i = 0; i < a.numel(); ++i) y->data<float>()[i] = a.data<float>()[i] + ctx.input(1).data<float>()[i];
    return Status::ok();
  }
};

// Fails with its attribute c in the message when c < 0; else copies.
class MaybeFail final : public kernels::Kernel {
 public:
  Status init(const kernels::KernelInit& init) {
    c_ = init.attr_float("c", 1.f);
    return Status::ok();
  }
  Status compute(kernels::KernelContext& ctx) const override {
    if (c_ < 0) return invalid_argument("failed with ", c_);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, ctx.input(0).shape()));
    std::copy_n(ctx.input(0).data<float>(), ctx.input(0).numel(), y->data<float>());
    return Status::ok();
  }

 private:
  float c_ = 1.f;
};

// Sets the run's cancel flag (g_cancel), then copies.
std::atomic<bool> g_cancel{false};
class CancelRun final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext& ctx) const override {
    g_cancel = true;
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, ctx.input(0).shape()));
    std::copy_n(ctx.input(0).data<float>(), ctx.input(0).numel(), y->data<float>());
    return Status::ok();
  }
};

const kernels::KernelRegistry& registry() {
  static kernels::KernelRegistry r = [] {
    kernels::KernelRegistry reg;
    reg.add({"", "Wave", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Wave>, 0});
    reg.add({"", "Sum2", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Sum2>, 0});
    reg.add({"", "MaybeFail", 1, 1000, kAllDTypes, 0, kernels::make_kernel<MaybeFail>, 0});
    reg.add({"", "CancelRun", 1, 1000, kAllDTypes, 0, kernels::make_kernel<CancelRun>, 0});
    return reg;
  }();
  return r;
}

ir::ValueType f32(int64_t n) { return ir::ValueType::tensor(DType::kFloat32, {ir::Dim{n, {}}}); }

ir::Node node(std::string op, std::vector<ir::ValueId> in, std::vector<ir::ValueId> out, float c = 1.f) {
  ir::Node n;
  n.op_type = std::move(op);
  n.name = n.op_type + "_" + std::to_string(c);
  n.opset = 17;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  ir::Attribute a;
  a.name = "c";
  a.type = ir::AttrType::kFloat;
  a.f = c;
  n.attributes.push_back(a);
  return n;
}

// `blocks` fire-module-like blocks: x -> Wave(c) -> {Wave(c+1), Wave(c+2),
// `op`(c+3)} -> Sum2 -> Sum2 -> ... `op` is Wave unless given.
ir::Graph branches(int blocks, int64_t n, const std::string& op = "Wave", float op_c = 0.f) {
  ir::Graph g;
  ir::ValueId prev = g.add_value("x", f32(n));
  g.inputs.push_back(prev);
  int v = 0;
  auto value = [&] { return g.add_value("v" + std::to_string(v++), f32(n)); };
  for (int b = 0; b < blocks; ++b) {
    const float c = 0.1f * static_cast<float>(b);
    ir::ValueId s = value(), e1 = value(), e2 = value(), e3 = value(), m = value(), out = value();
    g.nodes.push_back(node("Wave", {prev}, {s}, c));
    g.nodes.push_back(node("Wave", {s}, {e1}, c + 1));
    g.nodes.push_back(node("Wave", {s}, {e2}, c + 2));
    g.nodes.push_back(op == "Wave" ? node("Wave", {s}, {e3}, c + 3) : node(op, {s}, {e3}, op_c));
    g.nodes.push_back(node("Sum2", {e1, e2}, {m}));
    g.nodes.push_back(node("Sum2", {m, e3}, {out}));
    prev = out;
  }
  g.outputs.push_back(prev);
  return g;
}

std::unique_ptr<Program> build(ir::Graph g) {
  ProgramOptions o;
  o.registry = &registry();
  auto p = Program::build(std::make_shared<ir::Graph>(std::move(g)), o);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  return p.is_ok() ? std::move(p).value() : nullptr;
}

Tensor input(int64_t n, float scale) {
  Tensor t = Tensor::allocate(DType::kFloat32, Shape{n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = scale * static_cast<float>(i % 97) - 3.f;
  return t;
}

// Restores the process-wide switch whatever a test does.
class ScheduleTest : public ::testing::TestWithParam<int> {
 protected:
  void TearDown() override { set_interop_enabled(true); }
};

TEST(ScheduleGroups, IndependentNeighboursShareAGroup) {
  auto tiny = build(branches(2, kMinGroupedElements - 1));
  ASSERT_TRUE(tiny);
  EXPECT_EQ(tiny->groups().size(), tiny->num_steps() + 1);  // tiny steps stay alone
  auto p = build(branches(2, kMinGroupedElements));
  ASSERT_TRUE(p);
  // Per block: Wave | Wave Wave Wave | Sum2 | Sum2.
  const std::vector<uint32_t> want = {0, 1, 4, 5, 6, 7, 10, 11, 12};
  EXPECT_EQ(p->groups(), want);
  const std::vector<int32_t> last = group_edges(p->groups(), true);
  EXPECT_EQ(last[1], 3);
  EXPECT_EQ(last[0], 0);
}

// Concurrent groups and the sequential order give the same bits; many runs,
// two sizes, from two caller threads at once.
TEST_P(ScheduleTest, SameOutputsAsSequential) {
  ThreadPool pool(GetParam());
  for (int64_t n : {kMinGroupedElements, int64_t{5000}}) {
    auto p = build(branches(6, n));
    ASSERT_TRUE(p);
    Value x(input(n, 0.37f));
    set_interop_enabled(false);
    auto ref = p->run(std::span<const Value>(&x, 1), {}, &pool);
    ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
    const Tensor want = (*ref)[0].tensor().clone();
    set_interop_enabled(true);
    std::atomic<int> bad{0};
    auto runs = [&] {
      for (int r = 0; r < 100; ++r) {
        auto out = p->run(std::span<const Value>(&x, 1), {}, &pool);
        if (!out.is_ok() || std::memcmp((*out)[0].tensor().raw_data(), want.raw_data(), want.nbytes()) != 0) ++bad;
      }
    };
    std::thread other(runs);
    runs();
    other.join();
    EXPECT_EQ(bad.load(), 0) << "n " << n;
  }
}

// The step that fails is named, whichever of its group's steps runs first;
// a failing step in a group stops the run there.
TEST_P(ScheduleTest, ErrorInAGroupNamesTheNode) {
  ThreadPool pool(GetParam());
  auto p = build(branches(3, 4096, "MaybeFail", -7.f));
  ASSERT_TRUE(p);
  Value x(input(4096, 1.f));
  for (int r = 0; r < 20; ++r) {
    auto out = p->run(std::span<const Value>(&x, 1), {}, &pool);
    ASSERT_FALSE(out.is_ok());
    EXPECT_NE(out.status().message().find("MaybeFail_-7"), std::string::npos) << out.status().to_string();
    EXPECT_NE(out.status().message().find("failed with -7"), std::string::npos);
  }
}

// A step of a group cancels the run: the run stops before the next group.
TEST_P(ScheduleTest, CancelDuringAGroupIsReported) {
  ThreadPool pool(GetParam());
  auto p = build(branches(3, 4096, "CancelRun"));
  ASSERT_TRUE(p);
  Value x(input(4096, 1.f));
  RunOptions options;
  options.cancel = &g_cancel;
  for (int r = 0; r < 20; ++r) {
    g_cancel = false;
    RunProfile profile;
    auto out = p->run(std::span<const Value>(&x, 1), {}, &pool, &profile, &options);
    ASSERT_FALSE(out.is_ok());
    EXPECT_EQ(out.status().code(), StatusCode::kCancelled);
    EXPECT_LT(profile.events.size(), p->num_steps());
  }
}

// With a profile, every step has one event, in step order.
TEST_P(ScheduleTest, ProfileHasEveryStep) {
  ThreadPool pool(GetParam());
  auto p = build(branches(4, 20000));
  ASSERT_TRUE(p);
  Value x(input(20000, 0.5f));
  for (int r = 0; r < 10; ++r) {
    RunProfile profile;
    auto out = p->run(std::span<const Value>(&x, 1), {}, &pool, &profile);
    ASSERT_TRUE(out.is_ok());
    ASSERT_EQ(profile.events.size(), p->num_steps());
    for (size_t s = 0; s < p->num_steps(); ++s) EXPECT_EQ(profile.events[s].name, p->steps()[s].node->name);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, ScheduleTest, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace kiln::runtime
