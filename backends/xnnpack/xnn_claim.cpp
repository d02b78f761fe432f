#include "xnn_claim.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "xnn_lower.h"

namespace kiln_xnnpack {

using kiln::sdk::Graph;
using kiln::sdk::Node;
using kiln::sdk::Value;

namespace {

// Producers (in the view) of each node's inputs.
std::vector<std::vector<size_t>> predecessors(const Graph& g) {
  std::vector<std::vector<size_t>> pred(g.num_nodes());
  for (size_t i = 0; i < pred.size(); ++i) {
    Node n = g.node(i);
    for (size_t k = 0; k < n.num_inputs(); ++k) {
      Value v = n.input(k);
      Node p = v ? v.producer() : Node();
      if (p && p.index() < pred.size()) pred[i].push_back(p.index());
    }
  }
  return pred;
}

// Kahn's order of the view's nodes (nodes on a cycle, which a valid graph
// has not, come last in index order).
std::vector<size_t> topological_order(const std::vector<std::vector<size_t>>& pred) {
  const size_t n = pred.size();
  std::vector<std::vector<size_t>> succ(n);
  std::vector<size_t> missing(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (size_t p : pred[i]) {
      succ[p].push_back(i);
      ++missing[i];
    }
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i)
    if (missing[i] == 0) order.push_back(i);
  for (size_t k = 0; k < order.size(); ++k)
    for (size_t s : succ[order[k]])
      if (--missing[s] == 0) order.push_back(s);
  std::vector<uint8_t> seen(n, 0);
  for (size_t i : order) seen[i] = 1;
  for (size_t i = 0; i < n; ++i)
    if (!seen[i]) order.push_back(i);
  return order;
}

double numel_of(const Value& v) {
  if (!v || !v.is_static()) return 0;
  double e = 1;
  for (int64_t d : v.dims()) e *= static_cast<double>(d);
  return e;
}

bool is_depthwise(const Node& n) {
  if (n.op_type() != "Conv" || !n.input(0) || n.input(0).rank() != 4) return false;
  const int64_t group = n.attr_int("group", 1);
  return group > 1 && group == n.input(0).dim(1);
}

// A depthwise Conv of the part within `steps` edges of n (producers and
// readers, through nodes that are not convolutions or fully connected:
// activations, squeeze-excite scales).
bool depthwise_near(const Node& n, const std::set<size_t>& part, int steps) {
  std::vector<Node> at{n};
  std::set<size_t> seen{n.index()};
  for (int s = 0; s < steps && !at.empty(); ++s) {
    std::vector<Node> next;
    auto visit = [&](const Node& m) {
      if (!m || !part.count(m.index()) || !seen.insert(m.index()).second) return false;
      if (is_depthwise(m)) return true;
      const std::string op = m.op_type();
      if (op != "Conv" && op != "Gemm" && op != "MatMul") next.push_back(m);
      return false;
    };
    for (const Node& u : at) {
      for (size_t k = 0; k < u.num_inputs(); ++k)
        if (u.input(k) && visit(u.input(k).producer())) return true;
      for (size_t k = 0; k < u.num_outputs(); ++k)
        if (u.output(k))
          for (const Node& r : u.output(k).consumers())
            if (visit(r)) return true;
    }
    at = std::move(next);
  }
  return false;
}

// MACs of the convolutions the plugin runs faster than portable kernels:
// dense and grouped ones with a window (XNNPACK's igemm, the plugin's
// Winograd), and 1x1s next to a depthwise convolution (inverted-residual
// blocks the plugin fuses). Alone, a 1x1 Conv or a fully connected layer is
// a GEMM portable kernels run as fast (1x1 464->1024 on 7x7: 0.56 ms against
// 0.49 with its two transposes; 320->1280: 0.40 against 0.41), and so is a
// depthwise Conv (3x3 96ch on 56x56: 0.28 ms against 0.22).
double heavy_macs(const Node& n, const std::set<size_t>& part) {
  if (n.op_type() != "Conv" || n.num_inputs() < 2 || !n.input(1) || !n.input(0) || is_depthwise(n)) return 0;
  const std::vector<int64_t> w = n.input(1).dims();  // [M, C / group, kh, kw]
  if (w.size() != 4) return 0;
  if (w[2] * w[3] == 1 && !depthwise_near(n, part, 3)) return 0;
  return numel_of(n.output(0)) * static_cast<double>(w[1] * w[2] * w[3]) * conv_tap_density(n);
}

double transposed_bytes(const Value& v) { return v && v.rank() == 4 ? numel_of(v) * 4.0 : 0.0; }

}  // namespace

std::vector<std::vector<size_t>> convex_parts(const Graph& g, const std::vector<size_t>& group) {
  const std::vector<std::vector<size_t>> pred = predecessors(g);
  std::vector<uint8_t> in_group(g.num_nodes(), 0);
  for (size_t i : group) in_group[i] = 1;
  // level: for group nodes, how often a path from the group left it and came
  // back before reaching them; for others, the highest level of a group node
  // that reaches them (-1: none).
  std::vector<int64_t> level(g.num_nodes(), -1);
  for (size_t u : topological_order(pred)) {
    int64_t l = in_group[u] ? 0 : -1;
    for (size_t p : pred[u]) {
      if (level[p] < 0) continue;
      l = std::max(l, in_group[u] && !in_group[p] ? level[p] + 1 : level[p]);
    }
    level[u] = l;
  }
  std::map<int64_t, std::vector<size_t>> by_level;
  for (size_t i : group) by_level[level[i]].push_back(i);
  std::vector<std::vector<size_t>> parts;
  for (auto& [l, nodes] : by_level) {
    std::sort(nodes.begin(), nodes.end());
    parts.push_back(std::move(nodes));
  }
  return parts;
}

PartCost part_cost(const Graph& g, const std::vector<size_t>& part) {
  std::set<size_t> in_part(part.begin(), part.end());
  std::set<const kiln_value_t*> seen;
  PartCost c;
  for (size_t i : part) {
    Node n = g.node(i);
    c.heavy_macs += heavy_macs(n, in_part);
    for (size_t k = 0; k < n.num_inputs(); ++k) {  // inputs computed outside the part
      Value v = n.input(k);
      if (!v || v.is_constant() || !seen.insert(v.raw()).second) continue;
      Node p = v.producer();
      if (!p || !in_part.count(p.index())) c.transposed_bytes += transposed_bytes(v);
    }
    for (size_t k = 0; k < n.num_outputs(); ++k) {  // outputs read outside the part
      Value v = n.output(k);
      if (!v) continue;
      bool outside = v.is_graph_output() || v.has_outside_consumers();
      for (const Node& r : v.consumers()) outside |= !in_part.count(r.index());
      if (outside) c.transposed_bytes += transposed_bytes(v);
    }
  }
  return c;
}

std::string padding_reason(const Node& n) {
  if (n.op_type() != "Conv") return "";
  const double live = conv_tap_density(n);
  if (live >= kMinTapDensity) return "";
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "Conv whose taps read padding more often than the input (%.0f%% live); XNNPACK multiplies every tap, "
                "portable kernels skip those",
                live * 100);
  return buf;
}

std::string unpaid_reason(const PartCost& cost, double min_macs_per_byte) {
  if (min_macs_per_byte <= 0 || cost.transposed_bytes <= 0 ||
      cost.heavy_macs >= min_macs_per_byte * cost.transposed_bytes)
    return "";
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "partition too small to pay its layout transposes: %.3g MACs of convolutions XNNPACK runs faster "
                "(KxK, or 1x1 in an inverted-residual block) for %.3g bytes transposed at its boundary (%.1f per "
                "byte; option xnnpack.min_macs_per_byte=%g)",
                cost.heavy_macs, cost.transposed_bytes, cost.heavy_macs / cost.transposed_bytes, min_macs_per_byte);
  return buf;
}

}  // namespace kiln_xnnpack
