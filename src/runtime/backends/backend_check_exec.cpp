// The backend conformance kit (kiln/backend_check.h): the groups that
// compile and execute — capability answers and compile errors, execute
// against portable kernels and with wrong inputs, export/import, concurrent
// execute.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "kiln/backend_check.h"
#include "runtime/backends/backend_check_util.h"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/partition_kernel.h"
#include "runtime/backends/selection.h"
#include "runtime/program.h"

namespace kiln::backend_check {
namespace {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-5;
};

std::vector<ir::Dim> dims_of(const std::vector<int64_t>& d) {
  std::vector<ir::Dim> out;
  for (int64_t x : d) out.push_back(ir::Dim{x, {}});
  return out;
}

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::allocate(DType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// A small graph of common float32 ops (and, with `unknown`, an op of a
// domain no plugin can know), every shape static.
std::shared_ptr<ir::Graph> probe_graph(bool unknown) {
  auto g = std::make_shared<ir::Graph>();
  g->name = "kiln_check_probe";
  g->opsets[""] = 17;
  g->opsets["kiln.check"] = 1;
  auto value = [&](const std::string& n, std::vector<int64_t> d) {
    return g->add_value(n, ir::ValueType::tensor(DType::kFloat32, dims_of(d)));
  };
  auto constant = [&](const std::string& n, std::vector<int64_t> d, uint32_t seed) {
    ir::ValueId id = value(n, d);
    g->initializers.emplace(id, random_tensor(Shape(d), seed));
    return id;
  };
  auto node = [&](const std::string& op, std::vector<ir::ValueId> in, const std::string& name, std::vector<int64_t> d,
                  std::vector<ir::Attribute> attrs = {}, const std::string& domain = "") {
    ir::ValueId out = value(name, d);
    ir::Node n;
    n.name = name;
    n.op_type = op;
    n.domain = domain;
    n.opset = g->opsets[domain];
    n.inputs = std::move(in);
    n.outputs = {out};
    n.attributes = std::move(attrs);
    g->nodes.push_back(std::move(n));
    return out;
  };
  auto ints = [](const char* name, std::vector<int64_t> v) {
    ir::Attribute a;
    a.name = name;
    a.type = ir::AttrType::kInts;
    a.ints = std::move(v);
    return a;
  };
  ir::ValueId x = value("x", {2, 16}), img = value("img", {1, 3, 8, 8});
  g->inputs = {x, img};
  ir::ValueId c = constant("c", {16}, 1), w = constant("w", {16, 8}, 2), s = constant("s", {}, 3);
  ir::ValueId cw = constant("cw", {4, 3, 3, 3}, 4);
  ir::ValueId a = node("Add", {x, c}, "add", {2, 16});
  ir::ValueId r1 = node("Relu", {a}, "relu", {2, 16});
  ir::ValueId m = node("MatMul", {r1, w}, "matmul", {2, 8});
  ir::ValueId mu = node("Mul", {m, s}, "mul", {2, 8});
  ir::ValueId sg = node("Sigmoid", {mu}, "sigmoid", {2, 8});
  ir::ValueId sm = node("Softmax", {sg}, "softmax", {2, 8});
  ir::ValueId out1 = node("Add", {sm, mu}, "add2", {2, 8});
  ir::ValueId conv = node("Conv", {img, cw}, "conv", {1, 4, 8, 8}, {ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1})});
  ir::ValueId cr = node("Relu", {conv}, "relu2", {1, 4, 8, 8});
  ir::ValueId out2 = node("Mul", {cr, cr}, "square", {1, 4, 8, 8});
  if (unknown) out1 = node("Unknown", {out1}, "unknown", {2, 8}, {}, "kiln.check");
  g->outputs = {out1, out2};
  return g;
}

class HeapOutputs final : public runtime::ExecOutputs {
 public:
  explicit HeapOutputs(size_t n) : t_(n) {}
  size_t num_outputs() const override { return t_.size(); }
  Result<Tensor*> allocate(size_t i, DType dt, const Shape& s) override {
    t_[i] = Tensor::allocate(dt, s);
    return &t_[i];
  }
  std::vector<Tensor> t_;
};

// Runs a compiled partition directly on `inputs` (views of them, possibly altered).
Status execute(const runtime::CompiledPartition& cp, std::vector<kiln_tensor_t> views, size_t num_outputs,
               std::vector<Tensor>* outputs = nullptr) {
  std::vector<const kiln_tensor_t*> ptrs;
  for (const kiln_tensor_t& v : views) ptrs.push_back(&v);
  HeapOutputs outs(num_outputs);
  kiln_exec_context ec;
  ec.outputs = &outs;
  Status st = cp.execute(&ec, ptrs.data(), ptrs.size());
  if (outputs) *outputs = std::move(outs.t_);
  return st;
}

// "" when the float32 tensors match (|got - want| <= atol + rtol * |want|,
// NaN equal to NaN), else the first difference. The probe graph is float32.
std::string compare_tensor(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) return "dtype or shape differs";
  if (got.dtype() != DType::kFloat32) return "not float32";
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    const double d = std::fabs(static_cast<double>(g[i]) - w[i]);
    if (!(d <= tol.atol + tol.rtol * std::fabs(static_cast<double>(w[i])))) {
      return "element " + std::to_string(i) + ": got " + std::to_string(g[i]) + ", expected " + std::to_string(w[i]);
    }
  }
  return "";
}

std::string compare_all(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const Tolerance& tol) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " outputs, expected " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].defined()) return "output " + std::to_string(i) + " was not produced";
    std::string d = compare_tensor(got[i], want[i], tol);
    if (!d.empty()) return "output " + std::to_string(i) + ": " + d;
  }
  return "";
}

}  // namespace

void check_capability(const Options& o, Report& r) {
  LogCapture capture;
  Loaded l;
  if (!load_usable(o, capture, r, "capability", &l)) return;
  auto inst = l.plugin->create_instance(0, o.backend_options);
  if (!inst.is_ok()) {
    r.fail("capability", "create_instance: " + inst.status().message());
    return;
  }
  auto g = probe_graph(true);
  std::vector<int32_t> all(g->nodes.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  auto view = runtime::make_graph_view(*g, nullptr, all, {});
  auto cap = (*inst)->get_capability(view.get());
  if (!cap.is_ok()) {
    r.fail("capability answer", cap.status().message());
    return;
  }
  std::string problems;
  for (const std::string& p : cap->problems) problems += (problems.empty() ? "" : "; ") + p;
  size_t claimed = 0;
  for (const auto& grp : cap->groups) claimed += grp.size();
  if (problems.empty()) {
    r.pass("capability answer", std::to_string(cap->groups.size()) + " groups (" + std::to_string(claimed) + " of " +
                                    std::to_string(all.size()) + " probe nodes), " +
                                    std::to_string(cap->declined.size()) + " declined with reasons");
  } else {
    r.fail("capability answer", problems);
  }
  auto foreign = capture.find("not allocated with the host allocator");
  auto twice = capture.find("freed twice");
  if (!foreign.empty() || !twice.empty()) {
    r.fail("returned arrays use the host allocator",
           std::to_string(foreign.size()) + " arrays or strings not from kiln_host_api_t.alloc, " +
               std::to_string(twice.size()) + " freed twice");
  } else {
    r.pass("returned arrays use the host allocator", "every array and string came from the host");
  }
  const size_t unknown = g->nodes.size() - 1;
  bool unknown_claimed = false;
  for (const auto& grp : cap->groups)
    unknown_claimed |= std::find(grp.begin(), grp.end(), unknown) != grp.end();
  std::string reason;
  for (const auto& [n, why] : cap->declined)
    if (n == unknown) reason = why;
  if (unknown_claimed) r.fail("unknown op declined", "it claimed kiln.check.Unknown, an op it cannot know");
  else if (reason.empty()) r.fail("unknown op declined", "kiln.check.Unknown was declined without a reason");
  else r.pass("unknown op declined", reason);

  // Compiling a group it did not claim must fail, not crash.
  const kiln_value_t* in_ptr = &view->values[static_cast<size_t>(g->nodes[unknown].inputs[0])];
  const kiln_value_t* out_ptr = &view->values[static_cast<size_t>(g->nodes[unknown].outputs[0])];
  kiln_partition_t desc{};
  desc.struct_size = sizeof(desc);
  desc.id = "kiln_check:unclaimed";
  desc.num_nodes = 1;
  desc.nodes = &unknown;
  desc.num_inputs = 1;
  desc.inputs = &in_ptr;
  desc.num_outputs = 1;
  desc.outputs = &out_ptr;
  auto compiled = (*inst)->compile(view.get(), desc);
  if (compiled.is_ok()) r.fail("compile of an unclaimed group fails", "compiled kiln.check.Unknown");
  else r.pass("compile of an unclaimed group fails", compiled.status().message());
}

namespace {

// The probe graph built through the plugin and on portable kernels.
struct Probe {
  std::unique_ptr<runtime::Program> program;    // with the plugin
  std::unique_ptr<runtime::Program> reference;  // portable only
  std::vector<Value> inputs;
  std::vector<Tensor> got;  // the plugin's outputs (empty when execute failed)
};

void check_claimed_groups_compile(const Loaded& l, const PlacementReport& rep, Report& r) {
  std::string compile_failure;
  size_t compile_failures = 0;
  for (const NodePlacement& n : rep.nodes) {
    for (const auto& [backend, reason] : n.reasons) {
      if (backend != l.plugin->name() || reason.rfind("compile failed: ", 0) != 0) continue;
      ++compile_failures;
      if (compile_failure.empty()) compile_failure = n.node + ": " + reason;
    }
  }
  if (compile_failures > 0) {
    r.fail("claimed groups compile", std::to_string(compile_failures) + " claimed nodes did not compile; " + compile_failure);
  } else if (!rep.partitions.empty()) {
    r.pass("claimed groups compile", std::to_string(rep.partitions.size()) + " partitions compiled");
  }
}

// The plugin's outputs against portable's; fills probe.got.
void check_matches_portable(Probe& probe, const PlacementReport& rep, Report& r) {
  probe.inputs = {Value(random_tensor(Shape{2, 16}, 11)), Value(random_tensor(Shape{1, 3, 8, 8}, 12))};
  auto got = probe.program->run(probe.inputs, {}, nullptr);
  auto want = probe.reference->run(probe.inputs, {}, nullptr);
  Tolerance tol{1e-3, 1e-5};
  std::vector<Tensor> want_t;
  if (want.is_ok())
    for (const Value& v : *want) want_t.push_back(v.tensor());
  if (got.is_ok())
    for (const Value& v : *got) probe.got.push_back(v.tensor());
  std::string diff = !got.is_ok()    ? got.status().message()
                     : want.is_ok() ? compare_all(probe.got, want_t, tol)
                                 : "portable failed: " + want.status().message();
  if (!got.is_ok()) probe.got.clear();
  size_t nodes = 0;
  for (const PartitionInfo& p : rep.partitions) nodes += p.nodes.size();
  if (diff.empty()) {
    r.pass("execute vs portable", std::to_string(rep.partitions.size()) + " partitions, " + std::to_string(nodes) +
                                      " nodes: outputs match");
  } else {
    r.fail("execute vs portable", diff);
  }
}

// Inputs of the right shape for partition `pk`, and views of them.
struct PartitionInputs {
  std::vector<Tensor> tensors;
  std::vector<kiln_tensor_t> views;
};

PartitionInputs inputs_for(const runtime::Program& program, const runtime::PartitionKernel& pk) {
  PartitionInputs in;
  for (ir::ValueId id : pk.node()->inputs)
    in.tensors.push_back(random_tensor(program.graph().value(id).type.static_shape(), 21));
  in.views.resize(in.tensors.size());
  for (size_t i = 0; i < in.tensors.size(); ++i) (void)runtime::tensor_view(in.tensors[i], &in.views[i]);
  return in;
}

// Error paths: too few or too many inputs, a wrong dtype, rank or buffer size.
void check_wrong_inputs(const runtime::PartitionKernel& pk, const PartitionInputs& in, Report& r) {
  const runtime::CompiledPartition& cp = pk.compiled();
  const size_t nout = pk.node()->outputs.size();
  const std::vector<Tensor>& good = in.tensors;
  const std::vector<kiln_tensor_t>& views = in.views;
  Status ok = execute(cp, views, nout);
  if (!ok.is_ok()) return r.fail("execute rejects wrong inputs", "the right inputs failed: " + ok.message());
  std::string accepted, messages;
  auto expect_error = [&](const std::string& what, std::vector<kiln_tensor_t> v) {
    Status st = execute(cp, std::move(v), nout);
    if (st.is_ok()) accepted += (accepted.empty() ? "" : ", ") + what;
    else if (messages.empty()) messages = st.message();
  };
  std::vector<kiln_tensor_t> fewer(views.begin(), views.end() - 1);
  expect_error("one input too few", fewer);
  std::vector<kiln_tensor_t> more = views;
  more.push_back(views[0]);
  expect_error("one input too many", more);
  std::vector<kiln_tensor_t> dtype = views;
  dtype[0].dtype = dtype[0].dtype == KILN_DTYPE_FLOAT32 ? KILN_DTYPE_INT32 : KILN_DTYPE_FLOAT32;
  expect_error("wrong dtype", dtype);
  std::vector<kiln_tensor_t> rank = views;
  int64_t flat[2] = {1, good[0].numel()};
  rank[0].dims = good[0].rank() == 2 ? flat + 1 : flat;
  rank[0].rank = good[0].rank() == 2 ? 1 : 2;
  expect_error("wrong rank", rank);
  std::vector<kiln_tensor_t> shortbuf = views;
  shortbuf[0].nbytes /= 2;
  if (shortbuf[0].nbytes != views[0].nbytes) expect_error("buffer smaller than its shape", shortbuf);
  if (accepted.empty()) r.pass("execute rejects wrong inputs", "count, dtype, rank, short buffer: " + messages);
  else r.fail("execute rejects wrong inputs", "accepted: " + accepted);
}

// Export, compatibility check, import; corrupt blobs refused.
void check_export_import(const Loaded& l, const runtime::PartitionKernel& pk, const PartitionInputs& in, Report& r) {
  const runtime::CompiledPartition& cp = pk.compiled();
  const size_t nout = pk.node()->outputs.size();
  const std::vector<kiln_tensor_t>& views = in.views;
  const Tolerance tol{1e-3, 1e-5};
  if (!l.plugin->info().supports_export) return r.skip("export/import", "the plugin does not export compiled partitions");
  auto bytes = cp.export_bytes();
  std::string problem;
  if (!bytes.is_ok()) problem = "export: " + bytes.status().message();
  else if (Status c = l.plugin->check_compiled(bytes->data(), bytes->size()); !c.is_ok())
    problem = "check_compiled of its own export: " + c.message();
  std::vector<Tensor> a, b;
  if (problem.empty()) {
    auto imported = cp.instance().import_compiled(bytes->data(), bytes->size());
    if (!imported.is_ok()) {
      problem = "import: " + imported.status().message();
    } else {
      Status s1 = execute(cp, views, nout, &a), s2 = execute(**imported, views, nout, &b);
      if (!s1.is_ok() || !s2.is_ok()) problem = "execute: " + (s1.is_ok() ? s2.message() : s1.message());
      else if (std::string d = compare_all(b, a, tol); !d.empty()) problem = "imported handle differs: " + d;
    }
  }
  if (problem.empty()) {
    std::string accepted;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> corrupt = {
        {"truncated", std::vector<uint8_t>(bytes->begin(), bytes->begin() + static_cast<std::ptrdiff_t>(bytes->size() / 2))},
        {"garbage", std::vector<uint8_t>(64, 0xa5)},
        {"empty", {}}};
    for (auto& [what, blob] : corrupt) {
      bool checked = l.plugin->check_compiled(blob.data(), blob.size()).is_ok();
      bool imported = cp.instance().import_compiled(blob.data(), blob.size()).is_ok();
      if (checked || imported) accepted += (accepted.empty() ? "" : ", ") + what;
    }
    if (!accepted.empty()) problem = "accepted corrupt blobs: " + accepted;
  }
  if (problem.empty()) r.pass("export/import", std::to_string(bytes->size()) + " bytes; check, import, same outputs; corrupt blobs refused");
  else r.fail("export/import", problem);
}

// Concurrent runs: the host serializes SERIAL handles; REENTRANT ones run at once.
void check_concurrency(const Probe& probe, const PlacementReport& rep, Report& r) {
  const std::vector<Tensor>& got_t = probe.got;
  const std::vector<Value>& inputs = probe.inputs;
  bool serial = false;
  for (const PartitionInfo& p : rep.partitions) serial |= p.serial;
  std::atomic<int> mismatches{0};
  std::string first;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto out = probe.program->run(inputs, {}, nullptr);
        std::string d;
        if (!out.is_ok()) {
          d = out.status().message();
        } else {
          std::vector<Tensor> ts;
          for (const Value& v : *out) ts.push_back(v.tensor());
          d = compare_all(ts, got_t, Tolerance{0, 0});
        }
        if (!d.empty()) {
          ++mismatches;
          std::lock_guard<std::mutex> lock(mu);
          if (first.empty()) first = d;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string declared = serial ? "declared serial (host serializes)" : "declared reentrant";
  if (mismatches == 0) r.pass("concurrent execute", declared + "; 4 threads x 20 runs match the serial result");
  else r.fail("concurrent execute", declared + "; " + std::to_string(mismatches.load()) + " of 80 runs differ: " + first);
}

}  // namespace

void check_execute(const Options& o, Report& r) {
  LogCapture capture;
  Loaded l;
  if (!load_usable(o, capture, r, "execute vs portable", &l)) return;
  std::vector<BackendOption> bopts;
  for (const auto& [k, v] : o.backend_options) bopts.push_back({l.plugin->name(), k, v});
  auto request = runtime::select_backends(*l.registry, {l.plugin->name()}, bopts, FallbackPolicy::kAllow);
  if (!request.is_ok()) return r.fail("execute vs portable", request.status().message());
  runtime::ProgramOptions portable;
  portable.registry = &kernels::portable_registry();
  runtime::ProgramOptions with_plugin = portable;
  with_plugin.partition = &*request;
  with_plugin.keep_owned_constants = true;  // guard_problems compiles each partition again
  auto program = runtime::Program::build(probe_graph(false), with_plugin);
  auto reference = runtime::Program::build(probe_graph(false), portable);
  if (!program.is_ok() || !reference.is_ok()) {
    return r.fail("execute vs portable", "building the probe graph failed: " +
                                             (program.is_ok() ? reference.status().message() : program.status().message()));
  }
  Probe probe{std::move(program).value(), std::move(reference).value(), {}, {}};
  const PlacementReport& rep = probe.program->placement();
  check_claimed_groups_compile(l, rep, r);
  if (rep.partitions.empty()) {
    const char* why = "the plugin claims none of the probe graph's nodes (Add, Relu, MatMul, Mul, Sigmoid, Softmax, Conv)";
    for (const char* c : {"execute vs portable", "execute rejects wrong inputs", "export/import", "concurrent execute"})
      r.skip(c, why);
    return;
  }
  // First each partition alone between guard bytes: a plugin that writes
  // past its outputs would corrupt the arena (and the heap) of a real run.
  const std::string guard = guard_problems(*probe.program);
  r.expect(guard.empty(), "outputs stay in bounds",
           guard.empty() ? "every partition alone, outputs between guard bytes: intact" : guard);
  if (!guard.empty()) {
    for (const char* c : {"execute vs portable", "execute rejects wrong inputs", "export/import", "concurrent execute"})
      r.skip(c, "not run: the plugin writes outside its output buffers (see above)");
    return;
  }
  check_matches_portable(probe, rep, r);
  // Error paths and export, on the first partition that takes inputs.
  const runtime::PartitionKernel* pk = nullptr;
  for (const runtime::Step& s : probe.program->steps()) {
    auto* k = dynamic_cast<const runtime::PartitionKernel*>(s.kernel.get());
    if (k && !k->node()->inputs.empty() && !pk) pk = k;
  }
  if (!pk) {
    r.skip("execute rejects wrong inputs", "no partition takes inputs");
  } else {
    const PartitionInputs in = inputs_for(*probe.program, *pk);
    check_wrong_inputs(*pk, in, r);
    check_export_import(l, *pk, in, r);
  }
  if (probe.got.empty()) return r.skip("concurrent execute", "execute fails (see above)");
  check_concurrency(probe, rep, r);
}
}  // namespace kiln::backend_check
