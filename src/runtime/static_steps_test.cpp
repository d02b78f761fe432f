// Static steps (runtime/static_steps.h): steps whose kernels bind to the
// static plan run as static calls and give the same outputs as compute();
// values cross between static and compute() steps both ways; a slot operand
// whose shape disagrees with inference, another input shape, profiling,
// cancellation, concurrent runs and inter-op groups all still work.
#include "runtime/static_steps.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime/schedule.h"

namespace kiln::runtime {
namespace {

std::atomic<int> g_computes{0}, g_static_calls{0};

// y = a + b * c (float32; b has a's shape or one element); c an attribute.
// Offers static calls for every shape compute() accepts.
class Axpy final : public kernels::Kernel, public kernels::StaticCallable {
 public:
  Status init(const kernels::KernelInit& init) {
    c_ = init.attr_float("c", 1.f);
    return Status::ok();
  }
  Status compute(kernels::KernelContext& ctx) const override {
    ++g_computes;
    const Tensor &a = ctx.input(0), &b = ctx.input(1);
    if (b.numel() != a.numel() && b.numel() != 1) return invalid_argument("Axpy: b must match a or be one element");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, a.shape()));
    run(a.data<float>(), b.data<float>(), b.numel() == 1 ? 0 : 1, y->data<float>(), a.numel(), c_);
    return Status::ok();
  }
  bool bind_static(const kernels::StaticSignature& sig, kernels::StaticCall* out) const override {
    const kernels::TensorSig &a = sig.inputs[0], &b = sig.inputs[1], &y = sig.outputs[0];
    if (a.dtype != DType::kFloat32 || b.dtype != DType::kFloat32 || y.dtype != DType::kFloat32) return false;
    if (y.shape != a.shape || (b.shape.numel() != a.shape.numel() && b.shape.numel() != 1)) return false;
    out->set_params(Params{a.shape.numel(), b.shape.numel() == 1 ? 0 : 1, c_});
    out->fn = [](const kernels::StaticCall& call, const kernels::StaticArgs& args) {
      ++g_static_calls;
      const auto& p = call.params_as<Params>();
      run(static_cast<const float*>(args.inputs[0]), static_cast<const float*>(args.inputs[1]), p.step_b,
          static_cast<float*>(args.outputs[0]), p.n, p.c);
    };
    return true;
  }

 private:
  struct Params {
    int64_t n, step_b;
    float c;
  };
  static void run(const float* a, const float* b, int64_t step_b, float* y, int64_t n, float c) {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i * step_b] * c;
  }
  float c_ = 1.f;
};

// y = x transposed (2-D, through compute() only).
class Transpose2D final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.dim(0), c = x.dim(1);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, Shape{c, r}));
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) y->data<float>()[j * r + i] = x.data<float>()[i * c + j];
    return Status::ok();
  }
};

// y = x viewed with shape [numel] (aliases its input).
class Flat final : public kernels::Kernel {
 public:
  Status compute(kernels::KernelContext& ctx) const override {
    ctx.set_output_alias(0, ctx.input(0).reshaped(Shape{ctx.input(0).numel()}));
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

const kernels::KernelRegistry& registry() {
  static kernels::KernelRegistry r = [] {
    kernels::KernelRegistry reg;
    reg.add({"", "Axpy", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Axpy>, 0});
    reg.add({"", "Transpose2D", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Transpose2D>, 0});
    reg.add({"", "Flat", 1, 1000, kAllDTypes, 0, kernels::make_kernel<Flat>, kernels::kAliasesInput0});
    reg.add({"", "Call", 1, 1000, kAllDTypes, -1, kernels::make_kernel<Call>, 0});
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
  n.name = n.op_type + std::to_string(out.empty() ? 0 : out[0]);
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

Tensor values(Shape shape, float scale) {
  Tensor t = Tensor::allocate(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>(i % 7 - 3);
  return t;
}

// Builds a graph whose nodes are made by `body` (given the graph), x [dims]
// its input.
struct Built {
  std::unique_ptr<Program> with, without;  // static calls on / off
};
Built build_both(const ir::Graph& g) {
  Built b;
  for (bool on : {true, false}) {
    ProgramOptions o;
    o.registry = &registry();
    o.static_calls = on;
    auto p = Program::build(std::make_shared<ir::Graph>(g), o);
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    (on ? b.with : b.without) = std::move(p).value();
  }
  return b;
}

std::vector<float> run(const Program& p, const Tensor& x, ThreadPool* pool = nullptr) {
  Value in(x);
  auto out = p.run(std::span<const Value>(&in, 1), {}, pool);
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  if (!out.is_ok()) return {};
  const Tensor& y = (*out)[0].tensor();
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

// x -> Axpy(k0) -> Axpy(k1) -> ... `n` nodes, each with a constant b.
ir::Graph chain(int n, int64_t width) {
  ir::Graph g;
  ir::ValueId prev = g.add_value("x", f32({1, width}));
  g.inputs.push_back(prev);
  for (int i = 0; i < n; ++i) {
    ir::ValueId k = g.add_value("k" + std::to_string(i), f32({1, width}));
    g.initializers.emplace(k, values(Shape{1, width}, 0.01f * static_cast<float>(i + 1)));
    ir::ValueId next = g.add_value("v" + std::to_string(i), f32({1, width}));
    g.nodes.push_back(node("Axpy", {prev, k}, {next}, 1.f + 0.1f * static_cast<float>(i)));
    prev = next;
  }
  g.outputs.push_back(prev);
  return g;
}

TEST(StaticStepsTest, ChainRunsAsStaticCallsWithSameOutputs) {
  Built b = build_both(chain(12, 64));
  ASSERT_TRUE(b.with && b.without);
  ASSERT_NE(b.with->static_steps(), nullptr);
  EXPECT_EQ(b.without->static_steps(), nullptr);
  // Every step but the last, whose output is a graph output (not in the arena).
  EXPECT_EQ(b.with->static_steps()->num_static(), 11u);
  EXPECT_EQ(b.with->static_steps()->step(11), nullptr);
  // Values only static steps read never enter a slot: nothing to release;
  // the last step's input is read from its slot (a view).
  EXPECT_TRUE(b.with->static_steps()->release(5).empty());
  EXPECT_EQ(b.with->steps()[5].release.size(), 1u);
  EXPECT_EQ(b.with->static_steps()->release(11), b.with->steps()[11].release);
  EXPECT_FALSE(b.with->static_steps()->release(11).empty());
  const Tensor x = values(Shape{1, 64}, 0.5f);
  const std::vector<float> expected = run(*b.without, x);
  for (int r = 0; r < 3; ++r) {  // warm runs reuse the run state and its tables
    g_computes = 0;
    g_static_calls = 0;
    EXPECT_EQ(run(*b.with, x), expected);
    EXPECT_EQ(g_computes.load(), 1);
    EXPECT_EQ(g_static_calls.load(), 11);
  }
}

// compute() steps read static outputs from slot views; static steps read
// compute() outputs (and graph inputs) as checked slot operands.
TEST(StaticStepsTest, ValuesCrossBetweenStaticAndComputeSteps) {
  ir::Graph g;
  ir::ValueId x = g.add_value("x", f32({4, 6}));
  ir::ValueId k = g.add_value("k", f32({1}));
  g.initializers.emplace(k, values(Shape{1}, 2.f));
  ir::ValueId a = g.add_value("a", f32({4, 6})), t = g.add_value("t", f32({6, 4})),
              b = g.add_value("b", f32({6, 4})), f = g.add_value("f", f32({24})), c = g.add_value("c", f32({24})),
              y = g.add_value("y", f32({24}));
  g.inputs = {x};
  g.nodes.push_back(node("Axpy", {x, k}, {a}, 0.5f));  // static, reads a graph input
  g.nodes.push_back(node("Transpose2D", {a}, {t}));    // compute(), reads a static output
  g.nodes.push_back(node("Axpy", {t, t}, {b}, 3.f));   // static, reads a compute() output
  g.nodes.push_back(node("Flat", {b}, {f}));           // a view of a static output
  g.nodes.push_back(node("Axpy", {f, k}, {c}, 2.f));   // static, reads a view
  g.nodes.push_back(node("Axpy", {c, f}, {y}, 1.f));   // graph output: compute()
  g.outputs = {y};
  Built bt = build_both(g);
  ASSERT_NE(bt.with->static_steps(), nullptr);
  EXPECT_EQ(bt.with->static_steps()->num_static(), 3u);
  const Tensor in = values(Shape{4, 6}, 1.5f);
  g_static_calls = 0;
  EXPECT_EQ(run(*bt.with, in), run(*bt.without, in));
  EXPECT_EQ(g_static_calls.load(), 3);
}

// Shape inference said [3, 2] for a value compute() makes [2, 3]: the static
// step reading it finds its slot disagreeing, and the run goes on through
// compute() with the real shapes (same bytes, so the value even lands at
// its planned offset; only the shape check can tell).
TEST(StaticStepsTest, SlotOperandOfAnotherShapeLeavesStaticCalls) {
  ir::Graph g;
  ir::ValueId x = g.add_value("x", f32({3, 2}));
  ir::ValueId k = g.add_value("k", f32({1}));
  g.initializers.emplace(k, values(Shape{1}, 1.f));
  ir::ValueId a = g.add_value("a", f32({3, 2})), e = g.add_value("e", f32({3, 2})),
              t = g.add_value("t", f32({3, 2})),  // wrong: really [2, 3]
      b = g.add_value("b", f32({3, 2})), c = g.add_value("c", f32({3, 2})), y = g.add_value("y", f32({3, 2}));
  g.inputs = {x};
  g.nodes.push_back(node("Axpy", {x, k}, {a}, 1.f));  // static
  g.nodes.push_back(node("Axpy", {a, k}, {e}, 5.f));  // static, read only by a static step (no view)
  g.nodes.push_back(node("Transpose2D", {a}, {t}));
  g.nodes.push_back(node("Axpy", {t, k}, {b}, 2.f));  // bound to [3, 2]: the run leaves static calls here
  g.nodes.push_back(node("Axpy", {b, e}, {c}, 3.f));  // reads e, which leaving put in its slot
  g.nodes.push_back(node("Axpy", {c, k}, {y}, 4.f));
  g.outputs = {y};
  Built bt = build_both(g);
  ASSERT_NE(bt.with->static_steps(), nullptr);
  ASSERT_NE(bt.with->static_steps()->step(3), nullptr);
  ASSERT_NE(bt.with->static_steps()->step(4), nullptr);
  EXPECT_TRUE(bt.with->static_steps()->step(1)->views.empty());
  const Tensor in = values(Shape{3, 2}, 1.f);
  Value v(in);
  auto out = bt.with->run(std::span<const Value>(&v, 1), {}, nullptr);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(run(*bt.with, in), run(*bt.without, in));
}

// Another input shape has another plan: every step runs through compute().
TEST(StaticStepsTest, OtherInputShapesRunThroughCompute) {
  ir::Graph g = chain(4, 8);
  g.values[static_cast<size_t>(g.inputs[0])].type = f32({-1, 8});
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].name[0] == 'v') g.values[v].type = f32({-1, 8});
  ASSERT_EQ(build_both(g).with->static_steps(), nullptr);  // no static plan

  Built b = build_both(chain(4, 8));
  const Tensor wide = values(Shape{1, 8}, 1.f);
  EXPECT_EQ(run(*b.with, wide), run(*b.without, wide));
  // [1, 8] constants broadcast only to one row: compute() refuses [2, 8]
  // (an error, not a static call on the wrong shape).
  Value two(values(Shape{2, 8}, 1.f));
  g_static_calls = 0;
  auto out = b.with->run(std::span<const Value>(&two, 1), {}, nullptr);
  EXPECT_FALSE(out.is_ok());
  EXPECT_EQ(g_static_calls.load(), 0);
}

TEST(StaticStepsTest, ProfileAndCancellationSeeEveryStep) {
  Built b = build_both(chain(6, 16));
  const Tensor x = values(Shape{1, 16}, 1.f);
  Value in(x);
  RunProfile profile;
  ASSERT_TRUE(b.with->run(std::span<const Value>(&in, 1), {}, nullptr, &profile).is_ok());
  ASSERT_EQ(profile.events.size(), 6u);
  int64_t prev_end = 0;
  for (const NodeEvent& e : profile.events) {
    EXPECT_EQ(e.op_type, "Axpy");
    EXPECT_GE(e.start_ns, prev_end);
    prev_end = e.start_ns + e.duration_ns;
  }
  std::atomic<bool> cancel{true};
  RunOptions options;
  options.cancel = &cancel;
  g_static_calls = 0;
  auto out = b.with->run(std::span<const Value>(&in, 1), {}, nullptr, nullptr, &options);
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(g_static_calls.load(), 0);
  options.cancel = nullptr;
  options.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  out = b.with->run(std::span<const Value>(&in, 1), {}, nullptr, nullptr, &options);
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(StaticStepsTest, ConcurrentRunsUseTheirOwnTables) {
  Built b = build_both(chain(20, 32));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Tensor x = values(Shape{1, 32}, static_cast<float>(t + 1));
      const std::vector<float> expected = run(*b.without, x);
      for (int r = 0; r < 50; ++r)
        if (run(*b.with, x) != expected) ++bad;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// A subgraph reads a static step's output from the enclosing scope (not a
// node input, so it must be in its slot); the body's own steps are static
// too, reading the outer value as a slot operand.
TEST(StaticStepsTest, SubgraphsReadStaticOutputsOfTheEnclosingGraph) {
  auto body = std::make_shared<ir::Graph>();
  body->name = "body";
  ir::ValueId b_in = body->add_value("b_in", f32({1, 8}));
  ir::ValueId outer_v = body->add_value("v", f32({1, 8}));
  ir::ValueId b_mid = body->add_value("b_mid", f32({1, 8}));
  ir::ValueId b_out = body->add_value("b_out", f32({1, 8}));
  body->inputs = {b_in};
  body->outer_refs = {outer_v};
  body->nodes.push_back(node("Axpy", {b_in, outer_v}, {b_mid}, 10.f));
  body->nodes.push_back(node("Axpy", {b_mid, b_in}, {b_out}, 1.f));
  body->outputs = {b_out};

  ir::Graph g;
  ir::ValueId x = g.add_value("x", f32({1, 8}));
  ir::ValueId k = g.add_value("k", f32({1, 8}));
  g.initializers.emplace(k, values(Shape{1, 8}, 0.5f));
  ir::ValueId v = g.add_value("v", f32({1, 8})), w = g.add_value("w", f32({1, 8})), y = g.add_value("y", f32({1, 8}));
  g.inputs = {x};
  g.nodes.push_back(node("Axpy", {x, k}, {v}, 2.f));  // static; only the body reads v
  ir::Node call = node("Call", {x}, {w});
  ir::Attribute a;
  a.name = "body";
  a.type = ir::AttrType::kGraph;
  a.g = body;
  call.attributes.push_back(a);
  g.nodes.push_back(std::move(call));
  g.nodes.push_back(node("Axpy", {w, k}, {y}, 1.f));
  g.outputs = {y};
  Built bt = build_both(g);
  ASSERT_NE(bt.with->static_steps(), nullptr);
  ASSERT_NE(bt.with->static_steps()->step(0), nullptr);
  EXPECT_EQ(bt.with->static_steps()->step(0)->views.size(), 1u);  // no node reads v, the body does
  const Tensor in = values(Shape{1, 8}, 1.f);
  const std::vector<float> expected = run(*bt.without, in);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(run(*bt.with, in), expected);
}

// Steps of a concurrent group stay compute() steps; the rest are static, on
// pools of 1, 2 and 3 threads.
TEST(StaticStepsTest, GroupedStepsStayComputeSteps) {
  ir::Graph g;
  const int64_t n = 4096;  // above kMinGroupedElements
  ir::ValueId x = g.add_value("x", f32({1, n}));
  ir::ValueId k = g.add_value("k", f32({1}));
  g.initializers.emplace(k, values(Shape{1}, 1.f));
  ir::ValueId a = g.add_value("a", f32({1, n})), b = g.add_value("b", f32({1, n})),
              c = g.add_value("c", f32({1, n})), d = g.add_value("d", f32({1, n})), y = g.add_value("y", f32({1, n}));
  g.inputs = {x};
  g.nodes.push_back(node("Axpy", {x, k}, {a}, 1.f));
  g.nodes.push_back(node("Axpy", {a, k}, {b}, 2.f));  // b and c: one group
  g.nodes.push_back(node("Axpy", {a, k}, {c}, 3.f));
  g.nodes.push_back(node("Axpy", {b, c}, {d}, 4.f));
  g.nodes.push_back(node("Axpy", {d, a}, {y}, 5.f));
  g.outputs = {y};
  Built bt = build_both(g);
  ASSERT_EQ(bt.with->groups().size(), 5u);  // {0}, {1, 2}, {3}, {4}
  const StaticSteps* ss = bt.with->static_steps();
  ASSERT_NE(ss, nullptr);
  EXPECT_NE(ss->step(0), nullptr);
  EXPECT_EQ(ss->step(1), nullptr);
  EXPECT_EQ(ss->step(2), nullptr);
  EXPECT_NE(ss->step(3), nullptr);
  const Tensor in = values(Shape{1, n}, 0.25f);
  const std::vector<float> expected = run(*bt.without, in);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(run(*bt.with, in, &pool), expected) << threads << " threads";
  }
}

}  // namespace
}  // namespace kiln::runtime
