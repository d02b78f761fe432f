// kiln/verify.h: the model on portable kernels with every intermediate kept,
// each partition of the plugin on its own against it, and bisection inside
// the partitions that differ (runtime/backends/subgroup.h compiles and runs
// the sub-groups).
#include "kiln/verify.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <unordered_set>

#include "api/program_session.h"
#include "api/session_flavor.h"
#include "runtime/backends/selection.h"
#include "runtime/backends/subgroup.h"
#include "runtime/program.h"

namespace kiln {
namespace {

using runtime::GroupRun;
using runtime::SubgroupRunner;
using runtime::ValuesByName;

// Element `i` as a double, for the dtypes compared by value (others: bytes).
bool element(const Tensor& t, int64_t i, double* out) {
  switch (t.dtype()) {
    case DType::kFloat32: *out = t.data<float>()[i]; return true;
    case DType::kFloat64: *out = t.data<double>()[i]; return true;
    case DType::kInt32: *out = t.data<int32_t>()[i]; return true;
    case DType::kInt64: *out = static_cast<double>(t.data<int64_t>()[i]); return true;
    case DType::kInt8: *out = t.data<int8_t>()[i]; return true;
    case DType::kUInt8: *out = t.data<uint8_t>()[i]; return true;
    case DType::kBool: *out = t.data<uint8_t>()[i] ? 1 : 0; return true;
    default: return false;
  }
}

ValueCheck compare(const std::string& name, const std::string& producer, const Tensor& got, const Tensor& want,
                   const VerifyOptions& o) {
  ValueCheck c;
  c.value = name;
  c.producer = producer;
  if (!got.defined() || !want.defined()) {
    c.ok = false;
    c.problem = got.defined() ? "portable did not produce it" : "not produced";
    return c;
  }
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    c.ok = false;
    c.problem = "got " + std::string(dtype_name(got.dtype())) + " " + got.shape().to_string() + ", portable gives " +
                dtype_name(want.dtype()) + " " + want.shape().to_string();
    return c;
  }
  ErrorFigures& e = c.error;
  e.numel = got.numel();
  double worst_excess = 0;
  double g = 0, w = 0;
  if (e.numel > 0 && !element(got, 0, &g)) {
    if (std::memcmp(got.raw_data(), want.raw_data(), got.nbytes()) != 0) {
      c.ok = false;
      c.problem = "the bytes differ";
    }
    return c;
  }
  for (int64_t i = 0; i < e.numel; ++i) {
    (void)element(got, i, &g);
    (void)element(want, i, &w);
    if (std::isnan(g) && std::isnan(w)) continue;
    const double d = std::isnan(g) || std::isnan(w) ? INFINITY : std::fabs(g - w);
    e.max_abs = std::max(e.max_abs, d);
    if (w != 0) e.max_rel = std::max(e.max_rel, d / std::fabs(w));
    const double excess = d - (o.atol + o.rtol * std::fabs(w));
    if (!(excess <= 0)) {
      ++e.mismatched;
      if (e.worst < 0 || excess > worst_excess) {
        e.worst = i;
        worst_excess = excess;
      }
    }
  }
  c.ok = e.mismatched == 0;
  return c;
}

Tensor random_input(const ir::ValueType& t, std::mt19937& rng) {
  std::vector<int64_t> dims;
  for (const ir::Dim& d : t.dims) dims.push_back(d.known() ? d.value : 1);  // symbolic dims: 1
  Tensor out = Tensor::allocate(t.dtype == DType::kUndefined ? DType::kFloat32 : t.dtype, Shape(dims));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> small(0, 3);
  for (int64_t i = 0; i < out.numel(); ++i) {
    switch (out.dtype()) {
      case DType::kFloat32: out.data<float>()[i] = u(rng); break;
      case DType::kFloat64: out.data<double>()[i] = u(rng); break;
      case DType::kInt64: out.data<int64_t>()[i] = small(rng); break;
      case DType::kInt32: out.data<int32_t>()[i] = small(rng); break;
      case DType::kBool: out.data<uint8_t>()[i] = static_cast<uint8_t>(small(rng) & 1); break;
      default: std::memset(out.raw_data(), 0, out.nbytes()); i = out.numel(); break;
    }
  }
  return out;
}

// The model's inputs in graph order: given ones by name, the rest random.
Result<std::vector<Value>> model_inputs(const ir::Graph& g, const VerifyOptions& o) {
  std::mt19937 rng(o.seed);
  std::vector<Value> in;
  std::unordered_set<std::string> used;
  for (ir::ValueId id : g.inputs) {
    const ir::ValueInfo& v = g.value(id);
    auto given = std::find_if(o.inputs.begin(), o.inputs.end(), [&](const NamedValue& nv) { return nv.first == v.name; });
    if (given != o.inputs.end()) {
      in.push_back(given->second);
      used.insert(v.name);
    } else if (v.type.kind == ir::ValueType::Kind::kTensor && v.type.has_shape) {
      in.push_back(Value(random_input(v.type, rng)));
    } else {
      return invalid_argument("input '", v.name, "' (", v.type.to_string(),
                              ") has no static rank; give it with --input");
    }
  }
  for (const NamedValue& nv : o.inputs)
    if (!used.count(nv.first)) return invalid_argument("unknown input '", nv.first, "'");
  return in;
}

// A copy of `g` that returns every tensor a node computes (after its own outputs).
std::shared_ptr<ir::Graph> returning_everything(const ir::Graph& g) {
  auto r = std::make_shared<ir::Graph>(g);
  std::unordered_set<ir::ValueId> seen(r->outputs.begin(), r->outputs.end());
  for (const ir::Node& n : g.nodes) {
    for (ir::ValueId v : n.outputs) {
      if (v == ir::kNoValue || seen.count(v)) continue;
      const ir::ValueType::Kind k = g.value(v).type.kind;
      if (k != ir::ValueType::Kind::kTensor && k != ir::ValueType::Kind::kUnknown) continue;
      seen.insert(v);
      r->outputs.push_back(v);
    }
  }
  return r;
}

// Bisection inside a partition that differs: topological prefixes of its
// nodes (each convex), compiled by the plugin, until the first node whose
// output differs is found.
class Bisector {
 public:
  Bisector(const SubgroupRunner& runner, const runtime::Program& program, const ValuesByName& ref, const VerifyOptions& o)
      : runner_(runner), g_(program.graph()), ref_(ref), o_(o) {}

  // Checks of a group run against the reference; false when it failed.
  bool checks(const GroupRun& run, std::vector<ValueCheck>* out, bool* differs) const {
    *differs = false;
    if (!run.status.is_ok()) return false;
    for (size_t i = 0; i < run.outputs.size(); ++i) {
      const std::string& name = g_.value_name(run.outputs[i]);
      auto it = ref_.find(name);
      ValueCheck c = compare(name, runner_.producer_label(run.outputs[i]), run.tensors[i],
                             it == ref_.end() ? Tensor() : it->second, o_);
      *differs |= !c.ok;
      out->push_back(std::move(c));
    }
    return true;
  }

  void find(runtime::BackendInstance& inst, const std::vector<int32_t>& nodes, PartitionVerdict* v) const {
    size_t lo = 0, hi = nodes.size();  // prefix lo matches (0: trivially), prefix hi differs
    NodeFinding f;
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      GroupRun run = runner_.run_subgroup(inst, prefix(nodes, mid), ref_);
      ++f.compiles;
      std::vector<ValueCheck> cs;
      bool differs = false;
      if (!checks(run, &cs, &differs)) {
        v->bisect_note = "stopped: " + run.status.message() + "; the first difference lies in nodes " +
                         std::to_string(lo + 1) + " to " + std::to_string(hi) + " of the partition";
        return;
      }
      (differs ? hi : lo) = mid;
    }
    const ir::Node& node = g_.nodes[static_cast<size_t>(nodes[hi - 1])];
    f.node = node.label();
    f.op_type = node.op_type;
    f.position = hi - 1;
    GroupRun last = runner_.run_subgroup(inst, prefix(nodes, hi), ref_);
    ++f.compiles;
    bool differs = false;
    std::vector<ValueCheck> cs;
    if (checks(last, &cs, &differs)) {
      for (ValueCheck& c : cs)
        if (std::find(node.outputs.begin(), node.outputs.end(), g_.find_value(c.value)) != node.outputs.end())
          f.outputs.push_back(std::move(c));
    }
    GroupRun alone = runner_.run_subgroup(inst, {nodes[hi - 1]}, ref_);
    ++f.compiles;
    std::vector<ValueCheck> ac;
    if (!checks(alone, &ac, &differs)) {
      f.alone = "does not run alone: " + alone.status.message();
    } else if (!differs) {
      f.alone = "matches (it differs only fused with the nodes before it)";
    } else {
      for (const ValueCheck& c : ac)
        if (!c.ok) f.alone = "differs too: " + (c.problem.empty() ? describe(c.error) : c.problem);
    }
    v->first_bad = std::move(f);
  }

 private:
  static std::vector<int32_t> prefix(const std::vector<int32_t>& nodes, size_t k) {
    return std::vector<int32_t>(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(k));
  }
  const SubgroupRunner& runner_;
  const ir::Graph& g_;
  const ValuesByName& ref_;
  const VerifyOptions& o_;
};

PartitionVerdict check_partition(const PartitionInfo& info, const runtime::Program& program,
                                 const SubgroupRunner& runner, const ValuesByName& ref, const VerifyOptions& o) {
  PartitionVerdict v;
  v.id = info.id;
  v.nodes = info.nodes;
  const runtime::PartitionKernel* pk = runner.kernel_of(info.id);
  if (!pk) {
    v.ok = false;
    v.error = "no step runs this partition";
    return v;
  }
  Bisector bisector(runner, program, ref, o);
  bool differs = false;
  GroupRun run = runner.run_partition(*pk, ref);
  if (!bisector.checks(run, &v.outputs, &differs)) {
    v.ok = false;
    v.error = run.status.message();
    return v;
  }
  v.ok = !differs;
  if (!differs || !o.bisect) return v;
  const std::vector<int32_t> nodes = runner.nodes_of(info.id);
  if (nodes.empty()) {
    v.bisect_note = "the partition's nodes are not in the placement report";
    return v;
  }
  bisector.find(pk->compiled().instance(), nodes, &v);
  return v;
}

Result<std::shared_ptr<BackendRegistry>> registry_for(const VerifyOptions& o) {
  if (o.backend_registry) {
    for (const std::string& p : o.backend_paths) (void)o.backend_registry->load(p);
    return o.backend_registry;
  }
  BackendDiscovery d;
  d.paths = o.backend_paths;
  return BackendRegistry::create(d);
}

}  // namespace

size_t VerifyReport::failures() const {
  size_t n = 0;
  for (const PartitionVerdict& p : partitions) n += !p.ok;
  for (const ValueCheck& c : model_outputs) n += !c.ok;
  return n;
}

std::string describe(const ErrorFigures& e) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "max abs %.3g, max rel %.3g, %lld of %lld elements differ", e.max_abs, e.max_rel,
                static_cast<long long>(e.mismatched), static_cast<long long>(e.numel));
  std::string s = buf;
  if (e.worst >= 0) s += " (worst at " + std::to_string(e.worst) + ")";
  return s;
}

Result<VerifyReport> verify_model(const std::string& model_path, const VerifyOptions& o) {
  if (o.backend.empty() || o.backend == "portable") return invalid_argument("verify needs a plugin backend to check");
  KILN_ASSIGN_OR_RETURN(ir::Model model, api::import_for_session(model_path, SessionOptions{}));
  const ir::Graph original = model.graph;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<BackendRegistry> registry, registry_for(o));
  KILN_ASSIGN_OR_RETURN(runtime::PartitionRequest request,
                        runtime::select_backends(*registry, {o.backend}, o.backend_options, FallbackPolicy::kAllow));
  if (std::none_of(request.backends.begin(), request.backends.end(),
                   [&](const runtime::SelectedBackend& b) { return b.name == o.backend; })) {
    std::string why;
    for (const std::string& n : request.notes) why += (why.empty() ? "" : "; ") + n;
    return make_status(StatusCode::kUnavailable, "backend '", o.backend, "' cannot be verified here: ",
                       why.empty() ? std::string("it was not selected") : why);
  }
  runtime::ProgramOptions with_opts;
  with_opts.registry = &api::session_kernels();
  with_opts.partition = &request;
  with_opts.keep_owned_constants = true;  // the bisection compiles sub-groups again
  KILN_ASSIGN_OR_RETURN(auto with, runtime::Program::build(std::make_shared<ir::Graph>(original), with_opts));
  runtime::ProgramOptions ref_opts;
  ref_opts.registry = &api::session_kernels();
  ref_opts.fold_constants = false;  // every intermediate computed, none a constant
  KILN_ASSIGN_OR_RETURN(auto ref, runtime::Program::build(returning_everything(original), ref_opts));

  KILN_ASSIGN_OR_RETURN(std::vector<Value> inputs, model_inputs(original, o));
  Result<std::vector<Value>> ref_out = ref->run(inputs, {}, nullptr);
  if (!ref_out.is_ok()) return make_status(ref_out.status().code(), "the portable run failed: ", ref_out.status().message());
  ValuesByName values;
  for (size_t i = 0; i < original.inputs.size(); ++i)
    if (inputs[i].is_tensor()) values[original.value_name(original.inputs[i])] = inputs[i].tensor();
  const ir::Graph& rg = ref->graph();
  for (size_t i = 0; i < rg.outputs.size() && i < ref_out->size(); ++i)
    if ((*ref_out)[i].is_tensor()) values[rg.value_name(rg.outputs[i])] = (*ref_out)[i].tensor();

  VerifyReport report;
  report.backend = o.backend;
  report.nodes_total = with->placement().nodes.size();
  for (const PartitionInfo& p : with->placement().partitions) report.nodes_on_backend += p.nodes.size();
  const SubgroupRunner runner(*with);
  for (const PartitionInfo& p : with->placement().partitions)
    if (p.backend == o.backend) report.partitions.push_back(check_partition(p, *with, runner, values, o));

  Result<std::vector<Value>> got = with->run(inputs, {}, nullptr);
  for (size_t i = 0; i < original.outputs.size(); ++i) {
    const std::string& name = original.value_name(original.outputs[i]);
    if (!got.is_ok()) {
      ValueCheck c;
      c.value = name;
      c.ok = false;
      c.problem = "the run with the plugin failed: " + got.status().message();
      report.model_outputs.push_back(std::move(c));
      continue;
    }
    const Value& g = (*got)[i];
    auto it = values.find(name);
    report.model_outputs.push_back(compare(name, runner.producer_label(original.outputs[i]),
                                           g.is_tensor() ? g.tensor() : Tensor(),
                                           it == values.end() ? Tensor() : it->second, o));
  }
  return report;
}

}  // namespace kiln
