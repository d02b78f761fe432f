#include "optimizer/optimizer.h"

#include "optimizer/passes.h"

namespace kiln::optimizer {

void RewriteStats::add(const std::string& name, int count) {
  if (count <= 0) return;
  for (auto& [n, c] : entries_)
    if (n == name) {
      c += count;
      return;
    }
  entries_.emplace_back(name, count);
}

int RewriteStats::count(const std::string& name) const {
  for (const auto& [n, c] : entries_)
    if (n == name) return c;
  return 0;
}

std::string RewriteStats::to_string() const {
  std::string s;
  for (const auto& [n, c] : entries_) {
    if (!s.empty()) s += ", ";
    s += n + " " + std::to_string(c);
  }
  return s;
}

Status rewrite_graph(GraphRewrite& rw) {
  const size_t n = rw.g.nodes.size();
  if (rw.eligible.size() != n) return internal_error("rewrite_graph: ", rw.eligible.size(), " eligibility flags for ", n, " nodes");
  rw.removed.assign(n, 0);
  struct Pass {
    const char* name;
    int (*run)(GraphRewrite&);
  };
  static constexpr Pass kPasses[] = {
      {"identity", remove_identities},           {"conv+batchnorm", fold_conv_batchnorm},
      {"transpose+transpose", merge_transposes},
      {"reshape chain", merge_reshapes},
  };
  // Each pass sees the others' results; a few rounds reach the fixed point
  // on real models (a chain shrinks by one node per round at worst).
  for (int round = 0; round < 8; ++round) {
    int applied = 0;
    for (const Pass& p : kPasses) {
      const int k = p.run(rw);
      if (rw.stats) rw.stats->add(p.name, k);
      applied += k;
    }
    if (applied == 0) break;
  }
  return Status::ok();
}

}  // namespace kiln::optimizer
