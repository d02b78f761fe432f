#include "runtime/backends/partitioner.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <queue>

#include "runtime/backends/graph_view.h"
#include "runtime/backends/partition_kernel.h"

namespace kiln::runtime {
namespace {

// Every value a node reads: its inputs and its subgraphs' outer references.
std::vector<ir::ValueId> reads_of(const ir::Node& n, const ir::Graph& g) {
  std::vector<ir::ValueId> r;
  for (ir::ValueId v : n.inputs)
    if (v != ir::kNoValue && std::find(r.begin(), r.end(), v) == r.end()) r.push_back(v);
  for (ir::ValueId v : implicit_inputs(n, g))
    if (std::find(r.begin(), r.end(), v) == r.end()) r.push_back(v);
  return r;
}

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

Result<PartitionOutcome> partition_graph(const ir::Graph& g,
                                         const std::unordered_map<ir::ValueId, Tensor>& constants,
                                         std::span<const NodeState> states, const PartitionRequest& request,
                                         const kernels::KernelRegistry& registry) {
  const size_t n_nodes = g.nodes.size();
  PartitionOutcome out;
  out.claimed_by.assign(n_nodes, -1);
  PlacementReport& rep = out.report;
  rep.fallback = request.fallback;
  rep.notes = request.notes;
  bool portable_named = false;
  for (const SelectedBackend& b : request.backends) {
    rep.backends.push_back(b.name);
    portable_named |= b.instance == nullptr;
  }
  if (!portable_named) rep.backends.push_back("portable");

  std::vector<int32_t> unit_of(n_nodes);
  for (size_t n = 0; n < n_nodes; ++n) unit_of[n] = states[n] == NodeState::kFolded ? -1 : static_cast<int32_t>(n);
  std::vector<int8_t> portable_claimed(n_nodes, 0);
  std::vector<std::vector<std::pair<std::string, std::string>>> reasons(n_nodes);
  const std::vector<int32_t> producers = g.producers();
  std::vector<std::vector<int32_t>> readers(g.values.size());
  std::vector<std::vector<ir::ValueId>> reads(n_nodes);
  for (size_t n = 0; n < n_nodes; ++n) {
    if (states[n] == NodeState::kFolded) continue;
    reads[n] = reads_of(g.nodes[n], g);
    for (ir::ValueId v : reads[n]) readers[static_cast<size_t>(v)].push_back(static_cast<int32_t>(n));
  }
  std::vector<int8_t> graph_output(g.values.size(), 0);
  for (ir::ValueId v : g.outputs) graph_output[static_cast<size_t>(v)] = 1;

  auto is_open = [&](size_t n) {
    return states[n] == NodeState::kOpen && out.claimed_by[n] < 0 && !portable_claimed[n];
  };
  auto make_view = [&] {
    std::vector<int32_t> offered, hidden;
    for (size_t n = 0; n < n_nodes; ++n) {
      if (is_open(n)) offered.push_back(static_cast<int32_t>(n));
      else if (states[n] != NodeState::kFolded) hidden.push_back(static_cast<int32_t>(n));
    }
    return make_graph_view(g, &constants, offered, hidden);
  };

  auto boundary_of = [&](const std::vector<int32_t>& nodes) {
    std::vector<int8_t> in(n_nodes, 0);
    for (int32_t n : nodes) in[static_cast<size_t>(n)] = 1;
    Boundary b;
    for (int32_t n : nodes) {
      for (ir::ValueId v : reads[static_cast<size_t>(n)]) {
        int32_t p = producers[static_cast<size_t>(v)];
        if ((p >= 0 && in[static_cast<size_t>(p)]) || constants.count(v)) continue;
        if (std::find(b.inputs.begin(), b.inputs.end(), v) == b.inputs.end()) b.inputs.push_back(v);
      }
      for (ir::ValueId v : g.nodes[static_cast<size_t>(n)].outputs) {
        if (v == ir::kNoValue) continue;
        bool needed = graph_output[static_cast<size_t>(v)];
        for (int32_t r : readers[static_cast<size_t>(v)]) needed |= !in[static_cast<size_t>(r)];
        if (needed) b.outputs.push_back(v);
      }
    }
    return b;
  };

  // Compiles `nodes` (ir indices, sorted) on `sb`; OK when it became a partition.
  auto compile_group = [&](const SelectedBackend& sb, const kiln_graph& view, const std::vector<int32_t>& nodes,
                           bool custom_op) -> Status {
    Boundary b = boundary_of(nodes);
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
    const std::string id = partition_id(sb.name, g, nodes);
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
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<CompiledPartition> compiled, sb.instance->compile(&view, desc));

    auto node = std::make_unique<ir::Node>();
    node->name = id;
    node->op_type = kPartitionOp;
    node->domain = kPartitionDomain;
    node->opset = 1;
    node->inputs = b.inputs;
    node->outputs = b.outputs;
    node->doc = sb.name;

    PartitionInfo info;
    info.id = id;
    info.backend = sb.name;
    info.boundary_bytes = bytes;
    info.serial = compiled->concurrency() != KILN_CONCURRENCY_REENTRANT;
    info.custom_op = custom_op;
    std::map<std::string, int> hist;
    for (int32_t n : nodes) {
      const ir::Node& x = g.nodes[static_cast<size_t>(n)];
      info.nodes.push_back(x.label());
      ++hist[x.domain.empty() ? x.op_type : x.domain + "." + x.op_type];
    }
    info.op_histogram.assign(hist.begin(), hist.end());
    std::stable_sort(info.op_histogram.begin(), info.op_histogram.end(),
                     [](const auto& a, const auto& c) { return a.second > c.second; });
    for (ir::ValueId v : b.inputs) info.inputs.push_back(g.value_name(v));
    for (ir::ValueId v : b.outputs) info.outputs.push_back(g.value_name(v));

    const auto k = static_cast<int32_t>(out.kernels.size());
    auto kernel = std::make_unique<PartitionKernel>(std::move(compiled), std::move(node));
    out.nodes.push_back(kernel->node());
    out.kernels.push_back(std::move(kernel));
    for (int32_t n : nodes) {
      out.claimed_by[static_cast<size_t>(n)] = k;
      unit_of[static_cast<size_t>(n)] = static_cast<int32_t>(n_nodes) + k;
    }
    rep.partitions.push_back(std::move(info));
    return Status::ok();
  };

  // 1. Custom ops of selected plugins, whatever the order.
  for (const SelectedBackend& sb : request.backends) {
    if (!sb.instance || sb.instance->plugin().info().custom_ops.empty()) continue;
    const auto& ops = sb.instance->plugin().info().custom_ops;
    std::unique_ptr<kiln_graph> view;
    for (size_t n = 0; n < n_nodes; ++n) {
      if (!is_open(n)) continue;
      const ir::Node& x = g.nodes[n];
      bool match = false;
      for (const BackendCustomOpInfo& op : ops)
        match |= op.domain == x.domain && op.op_type == x.op_type && x.opset >= op.since_version;
      if (!match) continue;
      if (!view) view = make_view();
      Status st = compile_group(sb, *view, {static_cast<int32_t>(n)}, true);
      if (!st.is_ok()) reasons[n].emplace_back(sb.name, "custom op: " + st.message());
    }
  }

  // 2. The backends, in order.
  for (const SelectedBackend& sb : request.backends) {
    if (!sb.instance) {  // portable: claims what it has kernels for
      for (size_t n = 0; n < n_nodes; ++n) {
        if (!is_open(n)) continue;
        const ir::Node& x = g.nodes[n];
        std::vector<DType> dtypes;
        for (ir::ValueId v : x.inputs) {
          auto c = v == ir::kNoValue ? constants.end() : constants.find(v);
          dtypes.push_back(v == ir::kNoValue ? DType::kUndefined
                                             : c != constants.end() ? c->second.dtype() : g.value(v).type.dtype);
        }
        std::string why;
        if (registry.find(x.domain, x.op_type, x.opset, dtypes, &why)) portable_claimed[n] = 1;
        else reasons[n].emplace_back("portable", why);
      }
      continue;
    }
    std::unique_ptr<kiln_graph> view = make_view();
    if (view->nodes.empty()) break;
    Result<Capability> cap = sb.instance->get_capability(view.get());
    if (!cap.ok()) {
      std::string msg = "get_capability failed: " + cap.status().message();
      for (int32_t n : view->ir_index) reasons[static_cast<size_t>(n)].emplace_back(sb.name, msg);
      rep.notes.push_back("backend '" + sb.name + "': " + msg);
      continue;
    }
    for (const std::string& p : cap->problems) rep.notes.push_back("backend '" + sb.name + "': " + p);
    std::vector<int8_t> answered(view->nodes.size(), 0);
    for (const auto& [vi, reason] : cap->declined) {
      reasons[static_cast<size_t>(view->ir_index[vi])].emplace_back(sb.name, reason);
      answered[vi] = 1;
    }
    for (const std::vector<size_t>& group : cap->groups) {
      std::vector<int32_t> ir_nodes;
      for (size_t vi : group) {
        ir_nodes.push_back(view->ir_index[vi]);
        answered[vi] = 1;
      }
      std::sort(ir_nodes.begin(), ir_nodes.end());
      std::vector<std::vector<int32_t>> parts = split_convex_with(g, unit_of, ir_nodes, producers, reads);
      if (parts.size() > 1) {
        rep.notes.push_back("backend '" + sb.name + "': a group of " + std::to_string(ir_nodes.size()) +
                            " nodes was not convex (a path leaves it and comes back); split into " +
                            std::to_string(parts.size()) + " partitions");
      }
      for (const std::vector<int32_t>& part : parts) {
        Status st = compile_group(sb, *view, part, false);
        if (st.is_ok()) continue;
        for (int32_t n : part) reasons[static_cast<size_t>(n)].emplace_back(sb.name, "compile failed: " + st.message());
      }
    }
    for (size_t vi = 0; vi < answered.size(); ++vi)
      if (!answered[vi]) reasons[static_cast<size_t>(view->ir_index[vi])].emplace_back(sb.name, "not claimed (no reason given)");
  }

  // 3. The report, one entry per node.
  for (size_t n = 0; n < n_nodes; ++n) {
    const ir::Node& x = g.nodes[n];
    NodePlacement p;
    p.node = x.label();
    p.op_type = x.domain.empty() ? x.op_type : x.domain + "." + x.op_type;
    if (states[n] == NodeState::kFolded) {
      p.placement = "folded";
    } else if (out.claimed_by[n] >= 0) {
      const PartitionInfo& info = rep.partitions[static_cast<size_t>(out.claimed_by[n])];
      p.placement = info.backend;
      p.partition = info.id;
    } else {
      p.placement = "portable";
    }
    p.reasons = std::move(reasons[n]);
    rep.nodes.push_back(std::move(p));
  }

  // Partitions in the order of their first node, for reading.
  std::vector<size_t> first(rep.partitions.size(), n_nodes);
  for (size_t n = n_nodes; n-- > 0;)
    if (out.claimed_by[n] >= 0) first[static_cast<size_t>(out.claimed_by[n])] = n;
  std::vector<size_t> order(rep.partitions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first[a] < first[b]; });
  std::vector<PartitionInfo> sorted;
  for (size_t i : order) sorted.push_back(std::move(rep.partitions[i]));
  rep.partitions = std::move(sorted);

  // 4. Custom ops of plugins the user did not select.
  for (size_t n = 0; n < n_nodes; ++n) {
    if (states[n] == NodeState::kFolded || out.claimed_by[n] >= 0) continue;
    const ir::Node& x = g.nodes[n];
    if (registry.has_op(x.domain, x.op_type)) continue;
    for (const auto& [op, plugin] : request.unselected_custom_ops) {
      if (op.domain == x.domain && op.op_type == x.op_type) {
        return unimplemented("node ", x.label(), ": op ", x.domain, ".", x.op_type, " is a custom op of backend '",
                             plugin, "', which is not selected (add it to the backend list)");
      }
    }
  }

  // 5. The fallback policy.
  if (request.fallback == FallbackPolicy::kRequire) {
    std::string list;
    size_t count = 0, considered = 0;
    for (size_t n = 0; n < n_nodes; ++n) {
      if (states[n] == NodeState::kFolded) continue;
      ++considered;
      if (out.claimed_by[n] >= 0 || portable_claimed[n]) continue;
      ++count;
      list += (list.empty() ? "" : "; ") + g.nodes[n].label() + " (";
      const auto& r = rep.nodes[n].reasons;
      if (r.empty()) list += "no backend was offered it";
      for (size_t i = 0; i < r.size(); ++i) list += (i ? ", " : "") + r[i].first + ": " + r[i].second;
      list += ")";
    }
    if (count > 0) {
      return make_status(StatusCode::kUnimplemented, "fallback policy 'require': ", count, " of ", considered,
                         " nodes would fall back to portable kernels (backends tried: ",
                         [&] {
                           std::string s;
                           for (const SelectedBackend& b : request.backends) s += (s.empty() ? "" : ", ") + b.name;
                           return s.empty() ? std::string("none") : s;
                         }(),
                         "): ", list);
    }
  }
  return out;
}

}  // namespace kiln::runtime
