// Executor tests over a registry of tiny test kernels, so they exercise the
// runtime (folding, planning, aliasing, concurrency, subgraphs) independent
// of the portable kernels.
#include "runtime/program.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace kiln::runtime {
namespace {

// y = x + c (float32), c an attribute.
class AddConst final : public kernels::Kernel {
 public:
  Status init(const kernels::KernelInit& init) {
    c_ = init.attr_float("c", 1.f);
    return Status::ok();
  }
  Status compute(kernels::KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::kFloat32) return invalid_argument("AddConst wants float32");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, x.shape()));
    for (int64_t i = 0; i < x.numel(); ++i) y->data<float>()[i] = x.data<float>()[i] + c_;
    return Status::ok();
  }

 private:
  float c_ = 1.f;
};

// y = x viewed with shape [numel] (aliases its input).
class Flat final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext& ctx) const override {
    ctx.set_output_alias(0, ctx.input(0).reshaped(Shape{ctx.input(0).numel()}));
    return Status::ok();
  }
};

// y = x repeated to length n, where n is input 1's first value (data-dependent shape).
class Repeat final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext& ctx) const override {
    int64_t n = ctx.input(1).data<int64_t>()[0];
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, Shape{n}));
    for (int64_t i = 0; i < n; ++i) y->data<float>()[i] = ctx.input(0).data<float>()[i % ctx.input(0).numel()];
    return Status::ok();
  }
};

// Counts how often it runs; output = input. Marked nondeterministic so it never folds.
std::atomic<int> g_counted{0};
class Counted final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext& ctx) const override {
    ++g_counted;
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, ctx.input(0).dtype(), ctx.input(0).shape()));
    std::memcpy(y->raw_data(), ctx.input(0).raw_data(), y->nbytes());
    return Status::ok();
  }
};

// Runs its 'body' subgraph on input 0 and returns the body's output.
class Call final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext& ctx) const override {
    const ir::Graph* body = *ctx.node().attr_graph("body");
    Value in = *ctx.input_value(0);
    KILN_ASSIGN_OR_RETURN(std::vector<Value> out, ctx.subgraphs()->run(*body, std::span<const Value>(&in, 1)));
    ctx.set_output_value(0, std::move(out[0]));
    return Status::ok();
  }
};

class Fail final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext&) const override { return invalid_argument("boom"); }
};

const kernels::KernelRegistry& test_registry() {
  static kernels::KernelRegistry r = [] {
    kernels::KernelRegistry reg;
    reg.add({"", "AddConst", 1, 1000, kAllDTypes, 0, kernels::make_kernel<AddConst>, 0});
    reg.add({"", "Flat", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Flat>, kernels::kAliasesInput0});
    reg.add({"", "Repeat", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Repeat>, 0});
    reg.add({"", "Counted", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Counted>, kernels::kNondeterministic});
    reg.add({"", "Call", 1, 1000, kAllDTypes, -1, kernels::make_kernel<Call>, 0});
    reg.add({"", "Fail", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Fail>, 0});
    return reg;
  }();
  return r;
}

ir::ValueType f32(std::vector<int64_t> dims) {
  std::vector<ir::Dim> d;
  for (int64_t x : dims) d.push_back(ir::Dim{x, {}});
  return ir::ValueType::tensor(DType::kFloat32, d);
}

ir::Node node(std::string op, std::vector<ir::ValueId> in, std::vector<ir::ValueId> out, float c = 1.f) {
  ir::Node n;
  n.op_type = std::move(op);
  n.name = n.op_type;
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

Result<std::unique_ptr<Program>> build(ir::Graph g, bool fold = true) {
  ProgramOptions o;
  o.registry = &test_registry();
  o.fold_constants = fold;
  return Program::build(std::make_shared<ir::Graph>(std::move(g)), o);
}

Tensor arange(int64_t n) {
  Tensor t = Tensor::allocate(DType::kFloat32, Shape{n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

// x -> AddConst(1) -> AddConst(2) -> ... a chain of `n` nodes.
ir::Graph chain(int n, std::vector<int64_t> dims) {
  ir::Graph g;
  ir::ValueId prev = g.add_value("x", f32(dims));
  g.inputs.push_back(prev);
  for (int i = 0; i < n; ++i) {
    ir::ValueId next = g.add_value("v" + std::to_string(i), f32(dims));
    g.nodes.push_back(node("AddConst", {prev}, {next}, static_cast<float>(i + 1)));
    prev = next;
  }
  g.outputs.push_back(prev);
  return g;
}

TEST(ProgramTest, RunsChainAndPlansStatically) {
  auto p = build(chain(10, {4}));
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  // Only two intermediate buffers are ever live at once.
  EXPECT_GT((*p)->static_arena_bytes(), 0u);
  EXPECT_LE((*p)->static_arena_bytes(), 2 * kTensorAlignment);
  Value x(arange(4));
  auto out = (*p)->run(std::span<const Value>(&x, 1), {}, nullptr);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  EXPECT_TRUE(y.owns_memory());
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], static_cast<float>(i + 55));
}

// A plan made by an earlier build (a program file's) is used when it fits;
// one whose live values share bytes is replaced by a fresh plan.
TEST(ProgramTest, UsesAStoredPlanOnlyWhenItFits) {
  auto first = build(chain(6, {16}));
  ASSERT_TRUE(first.is_ok());
  std::shared_ptr<const MemoryPlan> plan = (*first)->static_plan();
  ASSERT_NE(plan, nullptr);
  ProgramOptions o;
  o.registry = &test_registry();
  o.stored_plan = plan.get();
  auto again = Program::build(std::make_shared<ir::Graph>(chain(6, {16})), o);
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE((*again)->used_stored_plan());
  EXPECT_EQ((*again)->static_arena_bytes(), plan->arena_bytes);

  MemoryPlan clash = *plan;  // v0 and v1 are live together at step 1
  clash.offsets[2] = clash.offsets[1];
  o.stored_plan = &clash;
  auto replanned = Program::build(std::make_shared<ir::Graph>(chain(6, {16})), o);
  ASSERT_TRUE(replanned.is_ok());
  EXPECT_FALSE((*replanned)->used_stored_plan());
  Value x(arange(16));
  auto out = (*replanned)->run(std::span<const Value>(&x, 1), {}, nullptr);
  ASSERT_TRUE(out.is_ok());
  EXPECT_FLOAT_EQ((*out)[0].tensor().data<float>()[3], 3.f + 21.f);
}

TEST(ProgramTest, FoldsConstantNodes) {
  ir::Graph g;
  ir::ValueId c = g.add_value("c", f32({2}));
  g.initializers[c] = arange(2);
  ir::ValueId c1 = g.add_value("c1", f32({2}));
  ir::ValueId x = g.add_value("x", f32({2}));
  ir::ValueId y = g.add_value("y", f32({2}));
  g.inputs.push_back(x);
  g.nodes.push_back(node("AddConst", {c}, {c1}, 10.f));  // constant: folded
  g.nodes.push_back(node("AddConst", {x}, {y}, 1.f));
  g.outputs = {y, c1};
  auto p = build(std::move(g));
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ((*p)->num_steps(), 1u);
  Value in(arange(2));
  auto out = (*p)->run(std::span<const Value>(&in, 1), {}, nullptr);
  ASSERT_TRUE(out.is_ok());
  EXPECT_FLOAT_EQ((*out)[1].tensor().data<float>()[1], 11.f);
  // A constant output is a copy: writing to it does not change the next run.
  (*out)[1].tensor().data<float>()[1] = -1.f;
  auto again = (*p)->run(std::span<const Value>(&in, 1), {}, nullptr);
  EXPECT_FLOAT_EQ((*again)[1].tensor().data<float>()[1], 11.f);
}

TEST(ProgramTest, AliasKeepsInputAlive) {
  // x -> AddConst -> a -> Flat -> b -> AddConst -> c ; a's memory must not be
  // reused while b (a view of it) is live.
  ir::Graph g;
  ir::ValueId x = g.add_value("x", f32({2, 3}));
  ir::ValueId a = g.add_value("a", f32({2, 3}));
  ir::ValueId b = g.add_value("b", f32({6}));
  ir::ValueId c = g.add_value("c", f32({6}));
  ir::ValueId d = g.add_value("d", f32({6}));
  g.inputs.push_back(x);
  g.nodes.push_back(node("AddConst", {x}, {a}, 1.f));
  g.nodes.push_back(node("Flat", {a}, {b}));
  g.nodes.push_back(node("AddConst", {b}, {c}, 1.f));
  g.nodes.push_back(node("AddConst", {c}, {d}, 1.f));
  g.outputs = {d, b};
  auto p = build(std::move(g));
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  Value in(arange(6).reshaped(Shape{2, 3}));
  auto out = (*p)->run(std::span<const Value>(&in, 1), {}, nullptr);
  ASSERT_TRUE(out.is_ok());
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ((*out)[0].tensor().data<float>()[i], static_cast<float>(i + 3));
    EXPECT_FLOAT_EQ((*out)[1].tensor().data<float>()[i], static_cast<float>(i + 1));
  }
  EXPECT_TRUE((*out)[1].tensor().owns_memory());
}

TEST(ProgramTest, DynamicShapesReplanPerSignature) {
  ir::Graph g = chain(3, {});
  g.values[0].type.has_shape = false;  // x has unknown shape
  for (auto& v : g.values) v.type.has_shape = false;
  auto p = build(std::move(g));
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ((*p)->static_arena_bytes(), 0u);
  for (int64_t n : {5, 7, 5, 7, 100}) {
    Value in(arange(n));
    auto out = (*p)->run(std::span<const Value>(&in, 1), {}, nullptr);
    ASSERT_TRUE(out.is_ok());
    ASSERT_EQ((*out)[0].tensor().numel(), n);
    EXPECT_FLOAT_EQ((*out)[0].tensor().data<float>()[n - 1], static_cast<float>(n - 1 + 6));
  }
  EXPECT_GT((*p)->static_arena_bytes(), 0u);  // plans were made from observed sizes
}

TEST(ProgramTest, DataDependentShapesFallBackToHeap) {
  ir::Graph g;
  ir::ValueId x = g.add_value("x", f32({3}));
  ir::ValueId n = g.add_value("n", ir::ValueType::tensor(DType::kInt64, {ir::Dim{1, {}}}));
  ir::ValueId r = g.add_value("r");
  ir::ValueId y = g.add_value("y");
  g.inputs = {x, n};
  g.nodes.push_back(node("Repeat", {x, n}, {r}));
  g.nodes.push_back(node("AddConst", {r}, {y}, 1.f));
  g.outputs = {y};
  auto p = build(std::move(g));
  ASSERT_TRUE(p.is_ok());
  for (int64_t len : {2, 9, 4, 30, 1}) {
    std::vector<Value> in = {Value(arange(3)), Value(Tensor::from_vector<int64_t>({len}))};
    auto out = (*p)->run(in, {}, nullptr);
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    ASSERT_EQ((*out)[0].tensor().numel(), len);
    EXPECT_FLOAT_EQ((*out)[0].tensor().data<float>()[len - 1], static_cast<float>((len - 1) % 3 + 1));
  }
}

TEST(ProgramTest, ConcurrentRunsGetTheirOwnMemory) {
  auto p = build(chain(20, {256}));
  ASSERT_TRUE(p.is_ok());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int it = 0; it < 50; ++it) {
        Tensor x = Tensor::allocate(DType::kFloat32, Shape{256});
        for (int i = 0; i < 256; ++i) x.data<float>()[i] = static_cast<float>(t * 1000 + i);
        Value in(x);
        auto out = (*p)->run(std::span<const Value>(&in, 1), {}, nullptr);
        if (!out.is_ok()) {
          ++bad;
          continue;
        }
        for (int i = 0; i < 256; ++i)
          if ((*out)[0].tensor().data<float>()[i] != static_cast<float>(t * 1000 + i + 210)) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(ProgramTest, SubgraphReadsOuterScope) {
  // body(b_in) = AddConst(outer_v) where outer_v comes from the main graph.
  auto body = std::make_shared<ir::Graph>();
  body->name = "body";
  ir::ValueId b_in = body->add_value("b_in", f32({2}));
  ir::ValueId outer_v = body->add_value("v", f32({2}));
  ir::ValueId b_out = body->add_value("b_out", f32({2}));
  body->inputs = {b_in};
  body->outer_refs = {outer_v};
  body->nodes.push_back(node("AddConst", {outer_v}, {b_out}, 100.f));
  body->outputs = {b_out};

  ir::Graph g;
  ir::ValueId x = g.add_value("x", f32({2}));
  ir::ValueId v = g.add_value("v", f32({2}));
  ir::ValueId y = g.add_value("y", f32({2}));
  g.inputs = {x};
  g.nodes.push_back(node("Counted", {x}, {v}));
  ir::Node call = node("Call", {x}, {y});
  ir::Attribute a;
  a.name = "body";
  a.type = ir::AttrType::kGraph;
  a.g = body;
  call.attributes.push_back(a);
  g.nodes.push_back(std::move(call));
  g.outputs = {y};
  auto p = build(std::move(g));
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  Value in(arange(2));
  auto out = (*p)->run(std::span<const Value>(&in, 1), {}, nullptr);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_FLOAT_EQ((*out)[0].tensor().data<float>()[1], 101.f);
}

TEST(ProgramTest, KernelErrorNamesTheNode) {
  ir::Graph g;
  ir::ValueId x = g.add_value("x", f32({2}));
  ir::ValueId y = g.add_value("y", f32({2}));
  g.inputs = {x};
  ir::Node n = node("Fail", {x}, {y});
  n.name = "the_failing_node";
  g.nodes.push_back(n);
  g.outputs = {y};
  auto p = build(std::move(g));
  ASSERT_TRUE(p.is_ok());
  Value in(arange(2));
  auto out = (*p)->run(std::span<const Value>(&in, 1), {}, nullptr);
  ASSERT_FALSE(out.is_ok());
  EXPECT_NE(out.status().message().find("the_failing_node"), std::string::npos);
  EXPECT_NE(out.status().message().find("boom"), std::string::npos);
}

TEST(ProgramTest, UnknownOpIsAnErrorAtBuild) {
  ir::Graph g;
  ir::ValueId x = g.add_value("x", f32({2}));
  ir::ValueId y = g.add_value("y", f32({2}));
  g.inputs = {x};
  g.nodes.push_back(node("NoSuchOp", {x}, {y}));
  g.outputs = {y};
  auto p = build(std::move(g));
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("NoSuchOp"), std::string::npos);
}

}  // namespace
}  // namespace kiln::runtime

namespace kiln::runtime {
namespace {

TEST(ProgramTest, ProfileRecordsEveryStep) {
  auto p = build(chain(5, {8}));
  ASSERT_TRUE(p.is_ok());
  Value x(arange(8));
  RunProfile profile;
  auto out = (*p)->run(std::span<const Value>(&x, 1), {}, nullptr, &profile);
  ASSERT_TRUE(out.is_ok());
  ASSERT_EQ(profile.events.size(), 5u);
  int64_t prev_end = 0;
  for (const NodeEvent& e : profile.events) {
    EXPECT_EQ(e.op_type, "AddConst");
    EXPECT_GE(e.start_ns, prev_end);
    EXPECT_GE(e.duration_ns, 0);
    prev_end = e.start_ns + e.duration_ns;
  }
  EXPECT_GE(profile.total_ns, prev_end);
}

}  // namespace
}  // namespace kiln::runtime
