#include "runtime/backends/partitioner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <queue>

#include "runtime/backends/content_key.h"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/partition_kernel.h"
#include "runtime/node_inputs.h"

namespace kiln::runtime {
namespace {


const char* kind_name(ir::ValueType::Kind k) {
  switch (k) {
    case ir::ValueType::Kind::kSequence: return "a sequence";
    case ir::ValueType::Kind::kOptional: return "an optional";
    case ir::ValueType::Kind::kMap: return "a map";
    default: return "not a tensor";
  }
}

// Values a group reads from outside (non-constant) and produces for outside.
struct Boundary {
  std::vector<ir::ValueId> inputs;
  std::vector<ir::ValueId> outputs;
};

}  // namespace

std::string partition_id(const std::string& backend, const ir::Graph& g, std::span<const int32_t> nodes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    h ^= 0xff;  // separator, so ("ab","c") != ("a","bc")
    h *= 0x100000001b3ull;
  };
  mix(backend);
  for (int32_t n : nodes) {
    const ir::Node& node = g.nodes[static_cast<size_t>(n)];
    mix(node.domain);
    mix(node.op_type);
    mix(node.name);
    for (ir::ValueId o : node.outputs) mix(o == ir::kNoValue ? std::string() : g.value_name(o));
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return backend + ":" + std::string(hex, 12);
}

namespace {

// split_convex with the producer of every value and the reads of every node
// precomputed (the partitioner calls it once per claimed group).
std::vector<std::vector<int32_t>> split_convex_with(const ir::Graph& g, std::span<const int32_t> unit_of,
                                                    std::span<const int32_t> group,
                                                    const std::vector<int32_t>& producers,
                                                    const std::vector<std::vector<ir::ValueId>>& reads) {
  const size_t n_nodes = g.nodes.size();
  // Compact unit ids and unit-level edges (parallel edges are harmless).
  std::unordered_map<int32_t, int32_t> compact;
  for (size_t n = 0; n < n_nodes; ++n)
    if (unit_of[n] >= 0) compact.emplace(unit_of[n], static_cast<int32_t>(compact.size()));
  const size_t nu = compact.size();
  std::vector<std::vector<int32_t>> succ(nu), pred(nu);
  for (size_t n = 0; n < n_nodes; ++n) {
    if (unit_of[n] < 0) continue;
    const int32_t u = compact[unit_of[n]];
    for (ir::ValueId v : reads[n]) {
      int32_t p = producers[static_cast<size_t>(v)];
      if (p < 0 || unit_of[static_cast<size_t>(p)] < 0) continue;
      const int32_t pu = compact[unit_of[static_cast<size_t>(p)]];
      if (pu == u) continue;
      succ[static_cast<size_t>(pu)].push_back(u);
      pred[static_cast<size_t>(u)].push_back(pu);
    }
  }
  // Topological order of units (Kahn).
  std::vector<int32_t> indeg(nu, 0), order;
  order.reserve(nu);
  for (size_t u = 0; u < nu; ++u) indeg[u] = static_cast<int32_t>(pred[u].size());
  for (size_t u = 0; u < nu; ++u)
    if (indeg[u] == 0) order.push_back(static_cast<int32_t>(u));
  for (size_t i = 0; i < order.size(); ++i)
    for (int32_t s : succ[static_cast<size_t>(order[i])])
      if (--indeg[static_cast<size_t>(s)] == 0) order.push_back(s);

  std::vector<std::vector<int32_t>> parts;
  if (order.size() != nu) {  // not a DAG (cannot happen for convex contractions): one node per part
    for (int32_t n : group) parts.push_back({n});
    return parts;
  }
  // level[u] for group units: how many times a path from the group left it
  // and came back before reaching u. For other units, the highest level of a
  // group unit that reaches it (-1: none). Levels never decrease along a
  // path and grow on re-entry, so each level is a convex part.
  std::vector<int8_t> in_group(nu, 0);
  for (int32_t n : group) in_group[static_cast<size_t>(compact[unit_of[static_cast<size_t>(n)]])] = 1;
  std::vector<int32_t> level(nu, -1);
  for (int32_t u : order) {
    const auto su = static_cast<size_t>(u);
    int32_t l = in_group[su] ? 0 : -1;
    for (int32_t p : pred[su]) {
      const auto sp = static_cast<size_t>(p);
      if (level[sp] < 0) continue;
      if (in_group[su]) l = std::max(l, in_group[sp] ? level[sp] : level[sp] + 1);
      else l = std::max(l, level[sp]);
    }
    level[su] = l;
  }
  std::map<int32_t, std::vector<int32_t>> by_level;
  for (int32_t n : group) by_level[level[static_cast<size_t>(compact[unit_of[static_cast<size_t>(n)]])]].push_back(n);
  for (auto& [l, nodes] : by_level) {
    std::sort(nodes.begin(), nodes.end());
    parts.push_back(std::move(nodes));
  }
  return parts;
}

}  // namespace

std::vector<std::vector<int32_t>> split_convex(const ir::Graph& g, std::span<const int32_t> unit_of,
                                               std::span<const int32_t> group) {
  std::vector<std::vector<ir::ValueId>> reads(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (unit_of[n] >= 0) reads[n] = reads_of(g.nodes[n], g);
  return split_convex_with(g, unit_of, group, g.producers(), reads);
}

Result<std::vector<size_t>> order_nodes(std::span<const ir::Node* const> nodes, const ir::Graph& g) {
  const size_t n = nodes.size();
  std::vector<int32_t> producer(g.values.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (ir::ValueId o : nodes[i]->outputs)
      if (o != ir::kNoValue) producer[static_cast<size_t>(o)] = static_cast<int32_t>(i);
  std::vector<std::vector<size_t>> succ(n);
  std::vector<int32_t> indeg(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (ir::ValueId v : reads_of(*nodes[i], g)) {
      int32_t p = producer[static_cast<size_t>(v)];
      if (p < 0 || static_cast<size_t>(p) == i) continue;
      succ[static_cast<size_t>(p)].push_back(i);
      ++indeg[i];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t s : succ[i])
      if (--indeg[s] == 0) ready.push(s);
  }
  if (order.size() != n) return internal_error("the steps of the partitioned graph form a cycle");
  return order;
}

namespace {

// partition_graph in named steps (ONNX Runtime's graph_partitioner.cc has
// the same shape): the state they share lives here, each step is a method.
class Partitioner {
 public:
  explicit Partitioner(const PartitionParams& p);

  // 1. Custom ops of selected plugins, whatever the order.
  void place_custom_ops();
  // 2. The backends, in order; each is offered the nodes still free.
  void offer_to_backends();
  // 3. Constants only partitions that own them read (PartitionOutcome::dropped_constants).
  void report_dropped_constants();
  // 3b. The placement report, one entry per node.
  void write_report();
  // 4. Custom ops of plugins the user did not select.
  Status check_unselected_custom_ops() const;
  // 5. The fallback policy.
  Status check_fallback() const;

  PartitionOutcome take() { return std::move(out_); }

 private:
  bool is_open(size_t n) const {
    return p_.states[n] == NodeState::kOpen && out_.claimed_by[n] < 0 && !portable_claimed_[n];
  }
  std::unique_ptr<kiln_graph> make_view() const;
  void offer_to_portable();
  // false when nothing was left to offer (later backends are skipped too).
  bool offer_to(const SelectedBackend& sb);
  void compile_claimed_group(const SelectedBackend& sb, const kiln_graph& view, std::vector<int32_t> ir_nodes);
  Boundary boundary_of(const std::vector<int32_t>& nodes) const;
  // Compiles `nodes` (ir indices, sorted) on `sb`; OK when it became a partition.
  Status compile_group(const SelectedBackend& sb, const kiln_graph& view, const std::vector<int32_t>& nodes,
                       bool custom_op);
  // True when every (non-folded) reader of constant `v` runs in a partition that owns it.
  bool only_owners_read(ir::ValueId v) const;
  // After partition k is placed: releases the owned constants nothing else reads any more.
  void release_owned_constants(size_t k);
  // The constants `compiled` declares it owns that `nodes` read; other names are noted and ignored.
  std::vector<ir::ValueId> owned_constants(const SelectedBackend& sb, const std::string& id,
                                           const CompiledPartition& compiled, const std::vector<int32_t>& nodes);
  PartitionInfo describe(const SelectedBackend& sb, const std::string& id, const Boundary& b, int64_t bytes,
                         const std::vector<int32_t>& nodes, bool serial, bool custom_op) const;
  void sort_partitions();
  void add_reason(size_t n, const std::string& backend, std::string why) {
    reasons_[n].emplace_back(backend, std::move(why));
  }

  const PartitionParams& p_;
  const ir::Graph& g_;
  const size_t n_nodes_;
  PartitionOutcome out_;
  std::vector<int32_t> unit_of_;         // per node: its unit for split_convex (-1: folded)
  std::vector<int8_t> portable_claimed_;
  std::vector<std::vector<std::pair<std::string, std::string>>> reasons_;
  const std::vector<int32_t> producers_;
  std::vector<std::vector<int32_t>> readers_;  // per value
  std::vector<std::vector<ir::ValueId>> reads_;  // per node
  std::vector<int8_t> graph_output_;           // per value
  // Per partition: the constants its handle owns (validated names).
  std::vector<std::vector<ir::ValueId>> owned_;
  std::vector<ir::ValueId> released_;  // owned constants whose host bytes went, in that order
  std::map<std::string, std::pair<size_t, uint64_t>> dropped_by_backend_;  // count, bytes
  size_t lost_fallbacks_ = 0;
  // Constants' content hashes, shared by every view this partitioning makes.
  const std::shared_ptr<ConstantHashes> hashes_ = std::make_shared<ConstantHashes>();
};

Partitioner::Partitioner(const PartitionParams& p)
    : p_(p), g_(p.graph), n_nodes_(p.graph.nodes.size()), producers_(p.graph.producers()) {
  out_.claimed_by.assign(n_nodes_, -1);
  PlacementReport& rep = out_.report;
  rep.fallback = p.request.fallback;
  rep.notes = p.request.notes;
  bool portable_named = false;
  for (const SelectedBackend& b : p.request.backends) {
    rep.backends.push_back(b.name);
    portable_named |= b.instance == nullptr;
  }
  if (!portable_named) rep.backends.push_back("portable");

  unit_of_.resize(n_nodes_);
  for (size_t n = 0; n < n_nodes_; ++n) unit_of_[n] = p.states[n] == NodeState::kFolded ? -1 : static_cast<int32_t>(n);
  portable_claimed_.assign(n_nodes_, 0);
  reasons_.resize(n_nodes_);
  readers_.resize(g_.values.size());
  reads_.resize(n_nodes_);
  for (size_t n = 0; n < n_nodes_; ++n) {
    if (p.states[n] == NodeState::kFolded) continue;
    reads_[n] = reads_of(g_.nodes[n], g_);
    for (ir::ValueId v : reads_[n]) readers_[static_cast<size_t>(v)].push_back(static_cast<int32_t>(n));
  }
  graph_output_.assign(g_.values.size(), 0);
  for (ir::ValueId v : g_.outputs) graph_output_[static_cast<size_t>(v)] = 1;
}

std::unique_ptr<kiln_graph> Partitioner::make_view() const {
  std::vector<int32_t> offered, hidden;
  for (size_t n = 0; n < n_nodes_; ++n) {
    if (is_open(n)) offered.push_back(static_cast<int32_t>(n));
    else if (p_.states[n] != NodeState::kFolded) hidden.push_back(static_cast<int32_t>(n));
  }
  return make_graph_view(g_, &p_.constants, offered, hidden, hashes_);
}

Boundary Partitioner::boundary_of(const std::vector<int32_t>& nodes) const {
  std::vector<int8_t> in(n_nodes_, 0);
  for (int32_t n : nodes) in[static_cast<size_t>(n)] = 1;
  Boundary b;
  for (int32_t n : nodes) {
    for (ir::ValueId v : reads_[static_cast<size_t>(n)]) {
      int32_t p = producers_[static_cast<size_t>(v)];
      if ((p >= 0 && in[static_cast<size_t>(p)]) || p_.constants.count(v)) continue;
      if (std::find(b.inputs.begin(), b.inputs.end(), v) == b.inputs.end()) b.inputs.push_back(v);
    }
    for (ir::ValueId v : g_.nodes[static_cast<size_t>(n)].outputs) {
      if (v == ir::kNoValue) continue;
      bool needed = graph_output_[static_cast<size_t>(v)];
      for (int32_t r : readers_[static_cast<size_t>(v)]) needed |= !in[static_cast<size_t>(r)];
      if (needed) b.outputs.push_back(v);
    }
  }
  return b;
}

// The bytes crossing a boundary (-1: not static), or why a value cannot cross.
Result<int64_t> boundary_bytes(const ir::Graph& g, const Boundary& b) {
  int64_t bytes = 0;
  for (const auto* list : {&b.inputs, &b.outputs}) {
    for (ir::ValueId v : *list) {
      const ir::ValueType& t = g.value(v).type;
      if (t.kind != ir::ValueType::Kind::kTensor && t.kind != ir::ValueType::Kind::kUnknown) {
        return invalid_argument("value '", g.value_name(v), "' crossing the partition boundary is ",
                                kind_name(t.kind), ", which cannot cross the backend ABI");
      }
      if (t.dtype == DType::kString) {
        return invalid_argument("value '", g.value_name(v), "' crossing the partition boundary holds strings, "
                                "which cannot cross the backend ABI");
      }
      if (bytes >= 0 && t.is_static()) bytes += t.static_shape().numel() * static_cast<int64_t>(dtype_size(t.dtype));
      else bytes = -1;
    }
  }
  return bytes;
}

PartitionInfo Partitioner::describe(const SelectedBackend& sb, const std::string& id, const Boundary& b,
                                    int64_t bytes, const std::vector<int32_t>& nodes, bool serial,
                                    bool custom_op) const {
  PartitionInfo info;
  info.id = id;
  info.backend = sb.name;
  info.boundary_bytes = bytes;
  info.serial = serial;
  info.custom_op = custom_op;
  std::map<std::string, int> hist;
  for (int32_t n : nodes) {
    const ir::Node& x = g_.nodes[static_cast<size_t>(n)];
    info.nodes.push_back(x.label());
    ++hist[x.domain.empty() ? x.op_type : x.domain + "." + x.op_type];
  }
  info.op_histogram.assign(hist.begin(), hist.end());
  std::stable_sort(info.op_histogram.begin(), info.op_histogram.end(),
                   [](const auto& a, const auto& c) { return a.second > c.second; });
  for (ir::ValueId v : b.inputs) info.inputs.push_back(g_.value_name(v));
  for (ir::ValueId v : b.outputs) info.outputs.push_back(g_.value_name(v));
  return info;
}

Status Partitioner::compile_group(const SelectedBackend& sb, const kiln_graph& view,
                                  const std::vector<int32_t>& nodes, bool custom_op) {
  const Boundary b = boundary_of(nodes);
  KILN_ASSIGN_OR_RETURN(const int64_t bytes, boundary_bytes(g_, b));
  const std::string id = partition_id(sb.name, g_, nodes);
  std::vector<size_t> view_nodes;
  for (int32_t n : nodes) view_nodes.push_back(static_cast<size_t>(view.view_index[static_cast<size_t>(n)]));
  std::vector<const kiln_value_t*> in_ptrs, out_ptrs;
  for (ir::ValueId v : b.inputs) in_ptrs.push_back(&view.values[static_cast<size_t>(v)]);
  for (ir::ValueId v : b.outputs) out_ptrs.push_back(&view.values[static_cast<size_t>(v)]);
  kiln_partition_t desc{};
  desc.struct_size = sizeof(desc);
  desc.id = id.c_str();
  desc.num_nodes = view_nodes.size();
  desc.nodes = view_nodes.data();
  desc.num_inputs = in_ptrs.size();
  desc.inputs = in_ptrs.data();
  desc.num_outputs = out_ptrs.size();
  desc.outputs = out_ptrs.data();
  const CompileHook::CompileFn do_compile = [&] { return sb.instance->compile(&view, desc); };
  std::shared_ptr<CompiledPartition> compiled;
  if (p_.request.compile_hook) {
    const std::string key = p_.request.compile_hook->wants_content_key()
                                ? partition_content_key(g_, p_.constants, nodes, b.inputs, b.outputs)
                                : std::string();
    KILN_ASSIGN_OR_RETURN(compiled, p_.request.compile_hook->compile(sb, id, key, do_compile));
  } else {
    KILN_ASSIGN_OR_RETURN(compiled, do_compile());
  }

  auto node = std::make_unique<ir::Node>();
  node->name = id;
  node->op_type = kPartitionOp;
  node->domain = kPartitionDomain;
  node->opset = 1;
  node->inputs = b.inputs;
  node->outputs = b.outputs;
  node->doc = sb.name;
  const bool serial = compiled->concurrency() != KILN_CONCURRENCY_REENTRANT;

  const auto k = static_cast<int32_t>(out_.kernels.size());
  std::unique_ptr<PortableFallback> fallback;
  if (p_.request.fallback == FallbackPolicy::kAllow && !custom_op)
    fallback = PortableFallback::make(g_, p_.constants, nodes, p_.registry, b.inputs, b.outputs);
  std::vector<ir::ValueInfo> declared;  // what the plugin was told (view.values), checked at run time
  for (ir::ValueId v : b.outputs) declared.push_back(g_.values[static_cast<size_t>(v)]);
  owned_.push_back(owned_constants(sb, id, *compiled, nodes));
  auto kernel = std::make_unique<PartitionKernel>(std::move(compiled), std::move(node), std::move(declared),
                                                  std::move(fallback));
  out_.nodes.push_back(kernel->node());
  out_.kernels.push_back(std::move(kernel));
  for (int32_t n : nodes) {
    out_.claimed_by[static_cast<size_t>(n)] = k;
    unit_of_[static_cast<size_t>(n)] = static_cast<int32_t>(n_nodes_) + k;
  }
  release_owned_constants(static_cast<size_t>(k));
  out_.report.partitions.push_back(describe(sb, id, b, bytes, nodes, serial, custom_op));
  return Status::ok();
}

std::vector<ir::ValueId> Partitioner::owned_constants(const SelectedBackend& sb, const std::string& id,
                                                      const CompiledPartition& compiled,
                                                      const std::vector<int32_t>& nodes) {
  std::vector<ir::ValueId> owned;
  for (const std::string& name : compiled.owned_constants()) {
    const ir::ValueId v = g_.find_value(name);
    bool read = false;
    if (v != ir::kNoValue && p_.constants.count(v)) {
      for (int32_t n : nodes) {
        const auto& r = reads_[static_cast<size_t>(n)];
        read |= std::find(r.begin(), r.end(), v) != r.end();
      }
    }
    if (!read) {
      std::string msg = "backend '" + sb.name + "': partition '" + id + "' declares it owns '" + name +
                        "', which is not a constant the partition reads; ignored";
      out_.report.notes.push_back(msg);
      out_.report.warnings.push_back(std::move(msg));
    } else if (std::find(owned.begin(), owned.end(), v) == owned.end()) {
      owned.push_back(v);
    }
  }
  return owned;
}

bool Partitioner::only_owners_read(ir::ValueId v) const {
  if (graph_output_[static_cast<size_t>(v)]) return false;
  for (int32_t r : readers_[static_cast<size_t>(v)]) {  // non-folded readers, subgraph reads included
    const int32_t k = out_.claimed_by[static_cast<size_t>(r)];
    if (k < 0) return false;
    const auto& owned = owned_[static_cast<size_t>(k)];
    if (std::find(owned.begin(), owned.end(), v) == owned.end()) return false;
  }
  return true;
}

// As soon as the last reader of an owned constant is compiled by an owner,
// the host's bytes go (not at the end of the load, so the host's and the
// plugins' copies of all weights are never resident together).
void Partitioner::release_owned_constants(size_t k) {
  if (p_.keep_owned_constants) return;
  for (ir::ValueId v : owned_[k]) {
    if (std::find(released_.begin(), released_.end(), v) != released_.end() || !only_owners_read(v)) continue;
    released_.push_back(v);
    const uint64_t bytes = p_.constants.at(v).nbytes();
    ++out_.report.num_dropped_constants;
    out_.report.dropped_constant_bytes += bytes;
    auto kernel = [&](size_t part) { return static_cast<PartitionKernel*>(out_.kernels[part].get()); };
    auto& per = dropped_by_backend_[kernel(k)->compiled().instance().name()];
    ++per.first;
    per.second += bytes;
    for (int32_t r : readers_[static_cast<size_t>(v)]) {  // the owners' fallbacks hold the bytes too
      PartitionKernel* pk = kernel(static_cast<size_t>(out_.claimed_by[static_cast<size_t>(r)]));
      if (pk->has_fallback()) ++lost_fallbacks_;
      pk->drop_fallback();
    }
    if (p_.release_constant) p_.release_constant(v);
  }
}

void Partitioner::report_dropped_constants() {
  out_.dropped_constants = released_;
  for (const auto& [backend, cb] : dropped_by_backend_) {
    out_.report.notes.push_back("backend '" + backend + "' owns " + std::to_string(cb.first) + " constant" +
                                (cb.first == 1 ? "" : "s") + " (" + std::to_string(cb.second) +
                                " bytes) nothing else reads: the host dropped its copies");
  }
  if (lost_fallbacks_ > 0) {
    out_.report.notes.push_back(std::to_string(lost_fallbacks_) + " partition" + (lost_fallbacks_ == 1 ? "" : "s") +
                                " whose constants the host dropped cannot fall back to portable kernels "
                                "(RESOURCE_EXHAUSTED is then an error)");
  }
}

void Partitioner::place_custom_ops() {
  for (const SelectedBackend& sb : p_.request.backends) {
    if (!sb.instance || sb.instance->plugin().info().custom_ops.empty()) continue;
    const auto& ops = sb.instance->plugin().info().custom_ops;
    std::unique_ptr<kiln_graph> view;
    for (size_t n = 0; n < n_nodes_; ++n) {
      if (!is_open(n)) continue;
      const ir::Node& x = g_.nodes[n];
      bool match = false;
      for (const BackendCustomOpInfo& op : ops)
        match |= op.domain == x.domain && op.op_type == x.op_type && x.opset >= op.since_version;
      if (!match) continue;
      if (!view) view = make_view();
      Status st = compile_group(sb, *view, {static_cast<int32_t>(n)}, true);
      if (!st.is_ok()) add_reason(n, sb.name, "custom op: " + st.message());
    }
  }
}

// Portable claims what it has kernels for.
void Partitioner::offer_to_portable() {
  for (size_t n = 0; n < n_nodes_; ++n) {
    if (!is_open(n)) continue;
    const ir::Node& x = g_.nodes[n];
    const std::vector<DType> dtypes = describe_inputs(x, g_, p_.constants).dtypes;
    std::string why;
    if (p_.registry.find(x.domain, x.op_type, x.opset, dtypes, &why)) portable_claimed_[n] = 1;
    else add_reason(n, "portable", why);
  }
}

void Partitioner::compile_claimed_group(const SelectedBackend& sb, const kiln_graph& view,
                                        std::vector<int32_t> ir_nodes) {
  std::sort(ir_nodes.begin(), ir_nodes.end());
  std::vector<std::vector<int32_t>> parts = split_convex_with(g_, unit_of_, ir_nodes, producers_, reads_);
  if (parts.size() > 1) {
    out_.report.notes.push_back("backend '" + sb.name + "': a group of " + std::to_string(ir_nodes.size()) +
                                " nodes was not convex (a path leaves it and comes back); split into " +
                                std::to_string(parts.size()) + " partitions");
  }
  for (const std::vector<int32_t>& part : parts) {
    Status st = compile_group(sb, view, part, false);
    if (st.is_ok()) continue;
    for (int32_t n : part) add_reason(static_cast<size_t>(n), sb.name, "compile failed: " + st.message());
  }
}

bool Partitioner::offer_to(const SelectedBackend& sb) {
  std::unique_ptr<kiln_graph> view = make_view();
  if (view->nodes.empty()) return false;
  Result<Capability> cap = sb.instance->get_capability(view.get());
  if (!cap.is_ok()) {
    std::string msg = "get_capability failed: " + cap.status().message();
    for (int32_t n : view->ir_index) add_reason(static_cast<size_t>(n), sb.name, msg);
    out_.report.notes.push_back("backend '" + sb.name + "': " + msg);
    return true;
  }
  for (const std::string& p : cap->problems) {
    out_.report.notes.push_back("backend '" + sb.name + "': " + p);
    out_.report.warnings.push_back("backend '" + sb.name + "': " + p);
  }
  std::vector<int8_t> answered(view->nodes.size(), 0);
  for (const auto& [vi, reason] : cap->declined) {
    add_reason(static_cast<size_t>(view->ir_index[vi]), sb.name, reason);
    answered[vi] = 1;
  }
  for (const std::vector<size_t>& group : cap->groups) {
    std::vector<int32_t> ir_nodes;
    for (size_t vi : group) {
      ir_nodes.push_back(view->ir_index[vi]);
      answered[vi] = 1;
    }
    compile_claimed_group(sb, *view, std::move(ir_nodes));
  }
  for (size_t vi = 0; vi < answered.size(); ++vi)
    if (!answered[vi]) add_reason(static_cast<size_t>(view->ir_index[vi]), sb.name, "not claimed (no reason given)");
  return true;
}

void Partitioner::offer_to_backends() {
  for (const SelectedBackend& sb : p_.request.backends) {
    if (!sb.instance) offer_to_portable();
    else if (!offer_to(sb)) break;
  }
}

void Partitioner::write_report() {
  PlacementReport& rep = out_.report;
  for (size_t n = 0; n < n_nodes_; ++n) {
    const ir::Node& x = g_.nodes[n];
    NodePlacement p;
    p.node = x.label();
    p.op_type = x.domain.empty() ? x.op_type : x.domain + "." + x.op_type;
    if (p_.states[n] == NodeState::kFolded) {
      p.placement = "folded";
    } else if (out_.claimed_by[n] >= 0) {
      const PartitionInfo& info = rep.partitions[static_cast<size_t>(out_.claimed_by[n])];
      p.placement = info.backend;
      p.partition = info.id;
    } else {
      p.placement = "portable";
    }
    p.reasons = std::move(reasons_[n]);
    rep.nodes.push_back(std::move(p));
  }
  sort_partitions();
}

// Partitions in the order of their first node, for reading.
void Partitioner::sort_partitions() {
  PlacementReport& rep = out_.report;
  std::vector<size_t> first(rep.partitions.size(), n_nodes_);
  for (size_t n = n_nodes_; n-- > 0;)
    if (out_.claimed_by[n] >= 0) first[static_cast<size_t>(out_.claimed_by[n])] = n;
  std::vector<size_t> order(rep.partitions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first[a] < first[b]; });
  std::vector<PartitionInfo> sorted;
  for (size_t i : order) sorted.push_back(std::move(rep.partitions[i]));
  rep.partitions = std::move(sorted);
}

Status Partitioner::check_unselected_custom_ops() const {
  for (size_t n = 0; n < n_nodes_; ++n) {
    if (p_.states[n] == NodeState::kFolded || out_.claimed_by[n] >= 0) continue;
    const ir::Node& x = g_.nodes[n];
    if (p_.registry.has_op(x.domain, x.op_type)) continue;
    for (const auto& [op, plugin] : p_.request.unselected_custom_ops) {
      if (op.domain == x.domain && op.op_type == x.op_type) {
        return unimplemented("node ", x.label(), ": op ", x.domain, ".", x.op_type, " is a custom op of backend '",
                             plugin, "', which is not selected (add it to the backend list)");
      }
    }
  }
  return Status::ok();
}

Status Partitioner::check_fallback() const {
  if (p_.request.fallback != FallbackPolicy::kRequire) return Status::ok();
  std::string list;
  size_t count = 0, considered = 0;
  for (size_t n = 0; n < n_nodes_; ++n) {
    if (p_.states[n] == NodeState::kFolded) continue;
    ++considered;
    if (out_.claimed_by[n] >= 0 || portable_claimed_[n]) continue;
    ++count;
    list += (list.empty() ? "" : "; ") + g_.nodes[n].label() + " (";
    const auto& r = out_.report.nodes[n].reasons;
    if (r.empty()) list += "no backend was offered it";
    for (size_t i = 0; i < r.size(); ++i) list += (i ? ", " : "") + r[i].first + ": " + r[i].second;
    list += ")";
  }
  if (count == 0) return Status::ok();
  std::string tried;
  for (const SelectedBackend& b : p_.request.backends) tried += (tried.empty() ? "" : ", ") + b.name;
  return make_status(StatusCode::kUnimplemented, "fallback policy 'require': ", count, " of ", considered,
                     " nodes would fall back to portable kernels (backends tried: ",
                     tried.empty() ? std::string("none") : tried, "): ", list);
}

}  // namespace

Result<PartitionOutcome> partition_graph(const PartitionParams& params) {
  Partitioner p(params);
  p.place_custom_ops();
  p.offer_to_backends();
  p.report_dropped_constants();
  p.write_report();
  KILN_RETURN_IF_ERROR(p.check_unselected_custom_ops());
  KILN_RETURN_IF_ERROR(p.check_fallback());
  return p.take();
}

}  // namespace kiln::runtime
