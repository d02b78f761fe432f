#include "runtime/program.h"

#include <algorithm>

#include "ir/subgraphs.h"
#include "kernels/default_registry.h"
#include "kernels/heap_allocator.h"
#include "runtime/backends/partitioner.h"
#include "runtime/constant_release.h"
#include "runtime/device_edges.h"
#include "runtime/node_inputs.h"
#include "runtime/run_state.h"
#include "runtime/schedule.h"
#include "runtime/static_steps.h"

namespace kiln::runtime {

namespace {

ir::ValueType type_of_tensor(const Tensor& t) {
  std::vector<ir::Dim> dims;
  for (int64_t d : t.shape()) dims.push_back(ir::Dim{d, {}});
  return ir::ValueType::tensor(t.dtype(), std::move(dims));
}

// Shape and Size only read their input's shape: with a static input type they
// fold even when the input's values are unknown.
bool reads_only_shape(const ir::Node& n) {
  return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size");
}

// A factory may pack large constants; allocation failure becomes a status.
Result<std::unique_ptr<kernels::Kernel>> make_guarded(const kernels::KernelDef& def, const kernels::KernelInit& init) {
  try {
    return def.factory(init);
  } catch (const std::bad_alloc&) {
    return make_status(StatusCode::kOutOfRange, "out of memory while preparing the kernel");
  } catch (const std::exception& e) {
    return internal_error("unexpected exception: ", e.what());
  }
}

}  // namespace

Program::~Program() = default;

Result<std::unique_ptr<Program>> Program::build(std::shared_ptr<ir::Graph> graph, const ProgramOptions& options) {
  std::unique_ptr<Program> p(new Program());
  p->graph_ = std::move(graph);
  for (auto& [id, t] : p->graph_->initializers) p->constants_.emplace(id, t);
  KILN_RETURN_IF_ERROR(p->build_steps(options));
  p->groups_ = concurrent_groups(p->steps_, *p->graph_);
  p->compute_lifetimes();
  for (const Step& step : p->steps_)
    for (ir::ValueId id : step.node->outputs)
      if (id != ir::kNoValue && !p->constants_.count(id)) p->step_outputs_.push_back(id);
  p->device_plan_ = DeviceEdgePlan::build(*p);  // device plugins' edges (device_edges.h); null: none

  // Subgraph programs, with their outer refs bound to this graph's values.
  for (const Step& step : p->steps_) {
    for (const ir::Attribute& a : step.node->attributes) {
      std::vector<std::shared_ptr<ir::Graph>> graphs;
      if (a.type == ir::AttrType::kGraph && a.g) graphs.push_back(a.g);
      if (a.type == ir::AttrType::kGraphs) graphs = a.graphs;
      for (const auto& g : graphs) {
        std::vector<ir::ValueId> bindings;
        for (ir::ValueId ref : g->outer_refs) {
          ir::ValueId outer = p->graph_->find_value(g->value_name(ref));
          if (outer == ir::kNoValue) {
            return invalid_argument("node ", step.node->label(), ": subgraph '", a.name, "' reads '",
                                    g->value_name(ref), "', which the enclosing graph does not define");
          }
          bindings.push_back(outer);
        }
        ProgramOptions sub_options = options;
        sub_options.partition = nullptr;
        sub_options.prepack = nullptr;
        sub_options.stored_plan = nullptr;
        sub_options.rewrite = false;  // a subgraph may be shared with the caller's copy of the model
        KILN_ASSIGN_OR_RETURN(auto sub, build(g, sub_options));
        sub->outer_bindings_ = std::move(bindings);
        p->subprograms_.emplace(g.get(), std::move(sub));
      }
    }
  }

  // The static plan, when every input has a static shape.
  const ir::Graph& g = *p->graph_;
  bool all_static = true;
  std::vector<Value> probe;
  for (ir::ValueId id : g.inputs) {
    const ir::ValueType& t = g.value(id).type;
    if (!t.is_static()) {
      all_static = false;
      break;
    }
    probe.emplace_back(Tensor::borrow(t.dtype, t.static_shape(), nullptr));
  }
  if (all_static) {
    std::vector<size_t> sizes(g.values.size(), 0);
    for (size_t v = 0; v < g.values.size(); ++v) {
      const ir::ValueType& t = g.values[v].type;
      if (p->plannable_[v] && t.is_static() && t.dtype != DType::kString)
        sizes[v] = static_cast<size_t>(t.static_shape().numel()) * dtype_size(t.dtype);
    }
    PlanEntry e;
    const MemoryPlan* stored = options.stored_plan;
    if (stored && verify_plan(*stored, sizes, p->lifetimes_).empty()) {
      e.plan = std::make_shared<const MemoryPlan>(*stored);
      p->used_stored_plan_ = true;
    } else {
      e.plan = std::make_shared<const MemoryPlan>(plan_memory(sizes, p->lifetimes_));
    }
    e.sizes = std::move(sizes);
    p->static_signature_ = p->signature(probe);
    p->has_static_plan_ = true;
    if (options.static_calls && static_calls_enabled() && !p->device_plan_)
      p->static_steps_ = StaticSteps::build(*p, e.plan);
    p->plans_.emplace(p->static_signature_, std::move(e));
  }
  return p;
}

namespace {

// What building the steps works on. `steps` has one slot per node: the
// portable step of that node (kernel null when it has none).
struct BuildWork {
  ir::Graph& g;
  ConstantMap& constants;
  const kernels::KernelRegistry& registry;
  const ProgramOptions& options;
  std::vector<NodeState> state;
  std::vector<Step> steps;
  optimizer::RewriteStats& stats;
  std::deque<ir::Node>& fused_nodes;
};

Result<std::unique_ptr<kernels::Kernel>> make_kernel(const kernels::KernelDef& def, const ir::Node& node,
                                                     const ir::Graph& g, const NodeInputs& in,
                                                     kernels::PrepackStore* prepack = nullptr) {
  kernels::KernelInit init{node, g, in.infos, node.opset};
  const kernels::PrepackScope scope(prepack);
  auto made = make_guarded(def, init);
  if (!made.is_ok()) return std::move(made).status().with_context("node " + node.label());
  return made;
}

// Runs `kernel` on the constant inputs of `node`; when every output is a
// tensor and they are small enough, they become constants (true).
Result<bool> try_fold(BuildWork& w, const ir::Node& node, const NodeInputs& in, const kernels::Kernel& kernel) {
  const ir::Graph& g = w.g;
  std::vector<Value> fold_inputs;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ir::ValueId id = node.inputs[i];
    if (id == ir::kNoValue) {
      fold_inputs.emplace_back();
    } else if (in.infos[i].constant) {
      fold_inputs.emplace_back(*in.infos[i].constant);
    } else {  // shape-only input: a data-less view of the right shape
      const ir::ValueType& t = g.value(id).type;
      fold_inputs.emplace_back(Tensor::borrow(t.dtype, t.static_shape(), nullptr));
    }
  }
  std::vector<const Value*> in_ptrs;
  for (size_t i = 0; i < fold_inputs.size(); ++i)
    in_ptrs.push_back(node.inputs[i] == ir::kNoValue ? nullptr : &fold_inputs[i]);
  std::vector<Value> outs(node.outputs.size());
  std::vector<Value*> out_ptrs;
  for (size_t i = 0; i < outs.size(); ++i) out_ptrs.push_back(node.outputs[i] == ir::kNoValue ? nullptr : &outs[i]);
  kernels::HeapAllocator heap;
  kernels::KernelContext ctx(node, in_ptrs.data(), in_ptrs.size(), out_ptrs.data(), out_ptrs.size(), &heap,
                             nullptr, nullptr);
  Status st = kernel.compute(ctx);
  if (!st.is_ok()) return std::move(st).with_context("node " + node.label());
  size_t bytes = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (node.outputs[i] == ir::kNoValue) continue;
    if (!outs[i].is_tensor()) return false;
    bytes += outs[i].tensor().nbytes();
  }
  if (bytes > w.options.max_folded_bytes) return false;
  for (size_t i = 0; i < outs.size(); ++i) {
    ir::ValueId id = node.outputs[i];
    if (id == ir::kNoValue) continue;
    Tensor t = outs[i].tensor();
    if (!t.owns_memory()) t = t.clone();  // an alias of a constant input
    w.g.value(id).type = type_of_tensor(t);
    w.constants[id] = std::move(t);
  }
  return true;
}

// Step 1: computes at load every node whose inputs are constants (or, for
// Shape and Size, static shapes). A foldable node whose outputs are too large
// or nondeterministic becomes a portable step; one without a kernel stays
// open (a backend may run it).
Status fold_constants(BuildWork& w) {
  if (!w.options.fold_constants) return Status::ok();
  const ir::Graph& g = w.g;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const ir::Node& node = g.nodes[ni];
    if (w.state[ni] != NodeState::kOpen || ir::has_subgraph(node)) continue;
    const NodeInputs in = describe_inputs(node, g, w.constants);
    const bool shape_only = reads_only_shape(node) && node.has_input(0) && g.value(node.inputs[0]).type.is_static();
    if (!in.all_constant && !shape_only) continue;
    const kernels::KernelDef* def = w.registry.find(node.domain, node.op_type, node.opset, in.dtypes, nullptr);
    if (!def) continue;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Kernel> kernel, make_kernel(*def, node, g, in));
    if (!(def->flags & kernels::kNondeterministic)) {
      KILN_ASSIGN_OR_RETURN(const bool folded, try_fold(w, node, in, *kernel));
      if (folded) {
        w.state[ni] = NodeState::kFolded;
        continue;
      }
    }
    w.steps[ni] = Step{&node, std::move(kernel), def->flags, {}};
    w.state[ni] = NodeState::kPortable;
  }
  return Status::ok();
}

// Drops the nodes marked in `removed` from the graph, keeping each remaining
// node's state and (folded-but-large) step with it.
void compact_nodes(BuildWork& w, const std::vector<uint8_t>& removed) {
  ir::Graph& g = w.g;
  size_t kept = 0;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (removed[ni]) continue;
    if (kept != ni) {
      g.nodes[kept] = std::move(g.nodes[ni]);
      w.state[kept] = w.state[ni];
      w.steps[kept] = std::move(w.steps[ni]);
    }
    ++kept;
  }
  g.nodes.resize(kept);
  w.state.resize(kept);
  w.steps.resize(kept);
  for (size_t ni = 0; ni < kept; ++ni)
    if (w.steps[ni].kernel) w.steps[ni].node = &g.nodes[ni];
}

// Step 1b: the optimizer's phase A over the nodes still open.
Status rewrite_graph(BuildWork& w) {
  if (!w.options.rewrite) return Status::ok();
  std::vector<uint8_t> eligible(w.g.nodes.size());
  for (size_t ni = 0; ni < eligible.size(); ++ni) eligible[ni] = w.state[ni] == NodeState::kOpen;
  optimizer::GraphRewrite rw{w.g, w.constants, std::move(eligible), {}, &w.stats};
  KILN_RETURN_IF_ERROR(optimizer::rewrite_graph(rw));
  compact_nodes(w, rw.removed);
  return Status::ok();
}

// Step 3a: the optimizer's phase B over the nodes no backend claimed. A
// fused node takes the slot of the last node it replaces; where no kernel
// fits it, the pattern's nodes stay as they are.
Status fuse_portable(BuildWork& w, const std::vector<int32_t>& claimed_by) {
  if (!w.options.rewrite) return Status::ok();
  const ir::Graph& g = w.g;
  std::vector<uint8_t> eligible(g.nodes.size());
  for (size_t ni = 0; ni < eligible.size(); ++ni)
    eligible[ni] = w.state[ni] == NodeState::kOpen && (claimed_by.empty() || claimed_by[ni] < 0);
  for (optimizer::Fusion& f : optimizer::find_portable_fusions(g, w.constants, eligible)) {
    // Every replaced node must have a kernel itself, so a model loads (or
    // fails to) exactly as it would without the rewrite.
    bool all_known = true;
    for (size_t r : f.replaces) {
      const ir::Node& n = g.nodes[r];
      all_known = all_known && w.registry.find(n.domain, n.op_type, n.opset, describe_inputs(n, g, w.constants).dtypes,
                                               nullptr) != nullptr;
    }
    if (!all_known) continue;
    const ir::Node& node = w.fused_nodes.emplace_back(std::move(f.node));
    const NodeInputs in = describe_inputs(node, g, w.constants);
    const kernels::KernelDef* def = w.registry.find(node.domain, node.op_type, node.opset, in.dtypes, nullptr);
    if (!def) {
      w.fused_nodes.pop_back();
      continue;
    }
    auto kernel = make_kernel(*def, node, g, in, w.options.prepack);  // packed weights stored in programs too
    if (!kernel.is_ok()) {
      w.fused_nodes.pop_back();
      continue;
    }
    w.steps[f.replaces.back()] = Step{&node, std::move(*kernel), def->flags, {}};
    for (size_t r : f.replaces) w.state[r] = NodeState::kPortable;
    w.stats.add(f.name);
  }
  return Status::ok();
}

// Step 2: hands parts of the graph to the selected backends (none: nothing).
Result<PartitionOutcome> partition(BuildWork& w) {
  if (!w.options.partition) return PartitionOutcome{};
  PartitionParams params{w.g, w.constants, w.state, *w.options.partition, w.registry,
                         w.options.keep_owned_constants, nullptr};
  // An owned constant's bytes go as soon as its last reader is compiled (the
  // graph's initializer and this map share them); the entries go after.
  params.release_constant = [&w](ir::ValueId id) { release_constant_bytes(w.g, w.constants, id); };
  return partition_graph(params);
}

// Step 3: a portable kernel for every node nothing else runs.
Status make_kernels(BuildWork& w, const std::vector<int32_t>& claimed_by) {
  const ir::Graph& g = w.g;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const ir::Node& node = g.nodes[ni];
    if (w.state[ni] != NodeState::kOpen || (!claimed_by.empty() && claimed_by[ni] >= 0)) continue;
    const NodeInputs in = describe_inputs(node, g, w.constants);
    std::string why;
    const kernels::KernelDef* def = w.registry.find(node.domain, node.op_type, node.opset, in.dtypes, &why);
    if (!def) return unimplemented("node ", node.label(), ": ", why);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Kernel> kernel,
                          make_kernel(*def, node, g, in, w.options.prepack));
    w.steps[ni] = Step{&node, std::move(kernel), def->flags, {}};
    w.state[ni] = NodeState::kPortable;
  }
  return Status::ok();
}

// Step 4: the steps in run order. Each partition step takes the place of its
// first node, then a stable topological sort moves steps to where their
// inputs are ready.
Result<std::vector<Step>> order_steps(BuildWork& w, PartitionOutcome& parts) {
  const ir::Graph& g = w.g;
  std::vector<Step> steps;
  std::vector<size_t> key;  // per step: the index of its (first) node in g.nodes
  for (size_t ni = 0; ni < w.steps.size(); ++ni) {
    if (!w.steps[ni].kernel) continue;
    steps.push_back(std::move(w.steps[ni]));
    key.push_back(ni);
  }
  if (parts.kernels.empty()) return steps;
  std::vector<size_t> first(parts.kernels.size(), g.nodes.size());
  for (size_t ni = g.nodes.size(); ni-- > 0;)
    if (parts.claimed_by[ni] >= 0) first[static_cast<size_t>(parts.claimed_by[ni])] = ni;
  for (size_t k = 0; k < parts.kernels.size(); ++k) {
    steps.push_back(Step{parts.nodes[k], std::move(parts.kernels[k]), 0, {}});
    key.push_back(first[k]);
  }
  std::vector<size_t> by_key(steps.size());
  for (size_t i = 0; i < by_key.size(); ++i) by_key[i] = i;
  std::stable_sort(by_key.begin(), by_key.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
  std::vector<const ir::Node*> nodes;
  for (size_t i : by_key) nodes.push_back(steps[i].node);
  KILN_ASSIGN_OR_RETURN(std::vector<size_t> order, order_nodes(nodes, g));
  std::vector<Step> sorted;
  sorted.reserve(steps.size());
  for (size_t i : order) sorted.push_back(std::move(steps[by_key[i]]));
  return sorted;
}

}  // namespace

Status Program::build_steps(const ProgramOptions& options) {
  const kernels::KernelRegistry& registry = options.registry ? *options.registry : kernels::default_registry();
  ir::Graph& g = *graph_;
  BuildWork w{g, constants_, registry, options, std::vector<NodeState>(g.nodes.size(), NodeState::kOpen),
              std::vector<Step>(g.nodes.size()), rewrites_, fused_nodes_};
  KILN_RETURN_IF_ERROR(fold_constants(w));
  KILN_RETURN_IF_ERROR(rewrite_graph(w));
  KILN_ASSIGN_OR_RETURN(PartitionOutcome parts, partition(w));
  KILN_RETURN_IF_ERROR(fuse_portable(w, parts.claimed_by));
  KILN_RETURN_IF_ERROR(make_kernels(w, parts.claimed_by));
  drop_owned_constants(parts.dropped_constants);
  KILN_ASSIGN_OR_RETURN(steps_, order_steps(w, parts));
  if (options.partition) placement_ = std::move(parts.report);
  placement_.rewrites = rewrites_.entries();
  return Status::ok();
}

// Plugins own copies of these and nothing else reads them (the partitioner
// checked and already freed their bytes): their entries go.
void Program::drop_owned_constants(const std::vector<ir::ValueId>& ids) {
  for (ir::ValueId id : ids) {
    constants_.erase(id);
    graph_->initializers.erase(id);
    graph_->external_data.erase(id);
  }
  dropped_constants_ += ids.size();
}

void Program::compute_lifetimes() {
  const ir::Graph& g = *graph_;
  const size_t nv = g.values.size();
  const auto end = static_cast<int32_t>(steps_.size());
  lifetimes_.assign(nv, Lifetime{});
  plannable_.assign(nv, 0);
  std::vector<int32_t> last(nv, -1);
  for (size_t s = 0; s < steps_.size(); ++s) {
    const ir::Node& n = *steps_[s].node;
    for (ir::ValueId id : n.inputs)
      if (id != ir::kNoValue) last[static_cast<size_t>(id)] = static_cast<int32_t>(s);
    // Values read by subgraphs count as read by the node that runs them.
    for (const ir::Attribute& a : n.attributes) {
      std::vector<const ir::Graph*> subs;
      if (a.type == ir::AttrType::kGraph && a.g) subs.push_back(a.g.get());
      if (a.type == ir::AttrType::kGraphs)
        for (const auto& sg : a.graphs) subs.push_back(sg.get());
      for (const ir::Graph* sg : subs)
        for (ir::ValueId ref : sg->outer_refs) {
          ir::ValueId outer = g.find_value(sg->value_name(ref));
          if (outer != ir::kNoValue) last[static_cast<size_t>(outer)] = static_cast<int32_t>(s);
        }
    }
    for (ir::ValueId id : n.outputs) {
      if (id == ir::kNoValue) continue;
      lifetimes_[static_cast<size_t>(id)].first = static_cast<int32_t>(s);
      plannable_[static_cast<size_t>(id)] = 1;
      if (last[static_cast<size_t>(id)] < static_cast<int32_t>(s)) last[static_cast<size_t>(id)] = static_cast<int32_t>(s);
    }
  }
  for (ir::ValueId id : g.outputs) {
    last[static_cast<size_t>(id)] = end;  // never released; handed to the caller
    plannable_[static_cast<size_t>(id)] = 0;
  }
  // An output that may alias its input 0 keeps that input's memory alive.
  for (size_t s = steps_.size(); s-- > 0;) {
    const Step& step = steps_[s];
    if (!(step.flags & kernels::kAliasesInput0) || !step.node->has_input(0) || !step.node->has_output(0)) continue;
    auto in = static_cast<size_t>(step.node->inputs[0]);
    auto out = static_cast<size_t>(step.node->outputs[0]);
    last[in] = std::max(last[in], last[out]);
  }
  // Steps of a group may run at once: a value lives through whole groups.
  const std::vector<int32_t> group_first = group_edges(groups_, false), group_last = group_edges(groups_, true);
  for (size_t v = 0; v < nv; ++v) {
    if (last[v] >= 0 && last[v] < end) last[v] = group_last[static_cast<size_t>(last[v])];
    if (lifetimes_[v].first >= 0) lifetimes_[v].first = group_first[static_cast<size_t>(lifetimes_[v].first)];
  }
  for (size_t v = 0; v < nv; ++v) {
    lifetimes_[v].last = last[v];
    if (lifetimes_[v].first < 0) plannable_[v] = 0;
    if (constants_.count(static_cast<ir::ValueId>(v))) plannable_[v] = 0;
  }
  // Release each non-constant value after its last reader.
  for (size_t v = 0; v < nv; ++v) {
    if (constants_.count(static_cast<ir::ValueId>(v)) || last[v] < 0 || last[v] >= end) continue;
    steps_[static_cast<size_t>(last[v])].release.push_back(static_cast<ir::ValueId>(v));
  }
  for (size_t v = 0; v < nv; ++v) {
    if (!plannable_[v]) lifetimes_[v] = Lifetime{};
  }
}

std::shared_ptr<const MemoryPlan> Program::static_plan() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_static_plan_) return nullptr;
  auto it = plans_.find(static_signature_);
  return it == plans_.end() ? nullptr : it->second.plan;
}

std::string Program::signature(std::span<const Value> inputs) const {
  std::string s;
  for (const Value& v : inputs) {
    if (v.is_tensor()) {
      for (int64_t d : v.tensor().shape()) {
        s += std::to_string(d);
        s += ',';
      }
    } else {
      s += v.is_sequence() ? "seq" + std::to_string(v.sequence_items().size()) : "none";
    }
    s += ';';
  }
  return s;
}

size_t Program::static_arena_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t m = 0;
  for (const auto& [sig, e] : plans_)
    if (e.plan) m = std::max(m, e.plan->arena_bytes);
  return m;
}

}  // namespace kiln::runtime
