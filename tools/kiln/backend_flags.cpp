#include "backend_flags.h"

#include <map>

namespace kiln::cli {

std::vector<FlagSpec> with_backend_flags(std::span<const FlagSpec> base) {
  std::vector<FlagSpec> out(base.begin(), base.end());
  out.insert(out.end(), std::begin(kBackendFlagSpecs), std::end(kBackendFlagSpecs));
  return out;
}

Status apply_backend_flags(const Args& args, SessionOptions* options) {
  if (auto list = args.value("--backends")) {
    KILN_ASSIGN_OR_RETURN(options->backends, parse_backend_list(*list));
  }
  for (const std::string& p : args.values("--backend-path")) options->backend_paths.push_back(p);
  for (const std::string& o : args.values("--backend-option")) {
    KILN_ASSIGN_OR_RETURN(BackendOption opt, parse_backend_option(o));
    options->backend_options.push_back(std::move(opt));
  }
  if (auto d = args.value("--cache-dir")) options->cache_dir = *d;
  if (auto f = args.value("--fallback")) {
    Result<FallbackPolicy> p = parse_fallback_policy(*f);
    if (!p.is_ok()) return std::move(p).status().with_context("--fallback");
    options->fallback = *p;
  }
  return Status::ok();
}

std::string placement_summary(const PlacementReport& report) {
  if (report.backends.size() <= 1 && report.partitions.empty()) return "";
  std::map<std::string, std::pair<size_t, size_t>> per;  // backend -> partitions, nodes
  std::vector<std::string> order;
  for (const PartitionInfo& p : report.partitions) {
    if (!per.count(p.backend)) order.push_back(p.backend);
    per[p.backend].first += 1;
    per[p.backend].second += p.nodes.size();
  }
  std::string s;
  for (const std::string& b : order) {
    s += (s.empty() ? "" : "; ") + b + ": " + std::to_string(per[b].first) + " partition" +
         (per[b].first == 1 ? "" : "s") + ", " + std::to_string(per[b].second) + " nodes";
  }
  s += (s.empty() ? "" : "; ") + std::string("portable: ") + std::to_string(report.num_fallback()) + " nodes";
  if (report.num_fallback() > 0) s += " (kiln inspect shows why)";
  return s;
}

}  // namespace kiln::cli
