#include "backend_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace kiln::cli {
namespace {

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string json_list(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + json_quote(v[i]);
  return s + "]";
}

std::string bytes_text(int64_t b) {
  if (b < 0) return "unknown (dynamic shapes)";
  char buf[64];
  if (b >= (1 << 20)) std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof(buf), "%.1f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(b));
  return buf;
}

std::string histogram_text(const std::vector<std::pair<std::string, int>>& h) {
  std::string s;
  for (const auto& [op, n] : h) s += (s.empty() ? "" : ", ") + op + " x" + std::to_string(n);
  return s;
}

// Values are listed up to `max`, then "... (N more)".
std::string value_list(const std::vector<std::string>& v, size_t max = 4) {
  if (v.empty()) return "(none)";
  std::vector<std::string> head(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(max, v.size())));
  std::string s = join(head, ", ");
  if (v.size() > max) s += ", ... (" + std::to_string(v.size() - max) + " more)";
  return s;
}

// A reason with the names in it ('conv_1', 'x') replaced by '*', so nodes
// declined for the same cause share one line.
std::string reason_key(const std::string& reason) {
  std::string out;
  for (size_t i = 0; i < reason.size(); ++i) {
    const size_t end = reason[i] == '\'' ? reason.find('\'', i + 1) : std::string::npos;
    if (end == std::string::npos) {
      out += reason[i];
      continue;
    }
    out += "'*'";
    i = end;
  }
  return out;
}

// One line per distinct reason (every non-portable backend's, joined):
// "  3 nodes (2 x Gather, 1 x Slice): xnnpack: ...", most nodes first.
void print_fallback_by_reason(const PlacementReport& r, std::ostream& os) {
  struct Group {
    size_t count = 0;
    std::vector<std::pair<std::string, int>> ops;  // op type -> count, first seen first
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  for (const NodePlacement& n : r.nodes) {
    if (n.placement != "portable") continue;
    std::string key;
    for (const auto& [backend, reason] : n.reasons)
      if (backend != "portable") key += (key.empty() ? "" : "; ") + backend + ": " + reason_key(reason);
    if (key.empty()) key = "(no plugin was tried)";
    auto [it, fresh] = groups.try_emplace(key);
    if (fresh) order.push_back(key);
    Group& g = it->second;
    ++g.count;
    auto op = std::find_if(g.ops.begin(), g.ops.end(), [&](const auto& p) { return p.first == n.op_type; });
    if (op == g.ops.end()) g.ops.emplace_back(n.op_type, 1);
    else ++op->second;
  }
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return groups[a].count > groups[b].count;
  });
  os << "\non portable kernels (" << r.num_fallback() << " nodes, by reason; --verbose lists each node):\n";
  for (const std::string& key : order) {
    const Group& g = groups[key];
    std::string ops;
    for (const auto& [op, c] : g.ops) ops += (ops.empty() ? "" : ", ") + std::to_string(c) + " x " + op;
    os << "  " << g.count << " node" << (g.count == 1 ? "" : "s") << " (" << ops << "): " << key << "\n";
  }
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void print_backends_text(const BackendRegistry& registry, std::ostream& os) {
  const char* env = std::getenv("KILN_BACKEND_PATH");
  os << "search folders: " << (registry.search_dirs().empty() ? "(none found)" : join(registry.search_dirs(), ", "))
     << "\nKILN_BACKEND_PATH: " << (env && *env ? env : "(unset)") << "\n";
  const std::vector<BackendInfo> all = registry.backends();
  if (all.empty()) os << "\nno plugins loaded\n";
  for (const BackendInfo& b : all) {
    os << "\n" << b.name << " " << b.version << (b.vendor.empty() ? "" : " (" + b.vendor + ")")
       << (b.description.empty() ? "" : ": " + b.description) << "\n";
    os << "  path:        " << b.path << "\n";
    os << "  available:   " << (b.available ? "yes" : "no: " + b.unavailable_reason) << "\n";
    os << "  abi:         " << b.abi_version << "    priority: " << b.priority
       << (b.priority <= 0 ? " (used only when named)" : "") << "    export/import: "
       << (b.supports_export ? "yes" : "no") << "\n";
    os << "  vendor sdk:  " << (b.vendor_sdk_version.empty() ? "(none)" : b.vendor_sdk_version) << "\n";
    os << "  devices:    ";
    for (size_t i = 0; i < b.devices.size(); ++i) {
      os << (i ? "," : "") << " " << i << ": " << b.devices[i].name << " [" << b.devices[i].kind << "]"
         << (b.devices[i].description.empty() ? "" : " " + b.devices[i].description);
    }
    os << "\n  options:" << (b.options.empty() ? "     (none)" : "") << "\n";
    size_t wn = 0, wt = 0, wd = 0;
    for (const BackendOptionInfo& o : b.options) {
      wn = std::max(wn, o.name.size());
      wt = std::max(wt, o.type.size());
      wd = std::max(wd, o.default_value.size());
    }
    auto pad = [](const std::string& s, size_t w) { return s + std::string(w - s.size(), ' '); };
    for (const BackendOptionInfo& o : b.options) {
      os << "    " << b.name << "." << pad(o.name, wn) << "  " << pad(o.type, wt) << "  default " << pad(o.default_value, wd)
         << "  " << o.doc << "\n";
    }
    if (!b.custom_ops.empty()) {
      os << "  custom ops:\n";
      for (const BackendCustomOpInfo& c : b.custom_ops)
        os << "    " << c.domain << "." << c.op_type << " (since opset " << c.since_version << "): " << c.doc << "\n";
    }
  }
  const std::vector<BackendLoadError> errors = registry.errors();
  if (!errors.empty()) {
    os << "\nnot loaded:\n";
    for (const BackendLoadError& e : errors) os << "  " << e.path << ": " << e.message << "\n";
  }
}

void print_backends_json(const BackendRegistry& registry, std::ostream& os) {
  os << "{\n  \"search_dirs\": " << json_list(registry.search_dirs()) << ",\n  \"backends\": [";
  const std::vector<BackendInfo> all = registry.backends();
  for (size_t k = 0; k < all.size(); ++k) {
    const BackendInfo& b = all[k];
    os << (k ? "," : "") << "\n    {\"name\": " << json_quote(b.name) << ", \"version\": " << json_quote(b.version)
       << ", \"vendor\": " << json_quote(b.vendor) << ", \"vendor_sdk_version\": " << json_quote(b.vendor_sdk_version)
       << ", \"description\": " << json_quote(b.description) << ", \"path\": " << json_quote(b.path)
       << ", \"abi_version\": " << json_quote(b.abi_version) << ", \"priority\": " << b.priority
       << ", \"available\": " << (b.available ? "true" : "false")
       << ", \"unavailable_reason\": " << json_quote(b.unavailable_reason)
       << ", \"supports_export\": " << (b.supports_export ? "true" : "false")
       << ", \"no_unload\": " << (b.no_unload ? "true" : "false")
       << ", \"shared_instances\": " << (b.shared_instances ? "true" : "false") << ",\n     \"devices\": [";
    for (size_t i = 0; i < b.devices.size(); ++i) {
      const BackendDeviceInfo& d = b.devices[i];
      os << (i ? ", " : "") << "{\"name\": " << json_quote(d.name) << ", \"kind\": " << json_quote(d.kind)
         << ", \"description\": " << json_quote(d.description) << ", \"vendor_id\": " << d.vendor_id
         << ", \"device_id\": " << d.device_id << ", \"uuid\": " << json_quote(d.uuid)
         << ", \"memory_bytes\": " << d.memory_bytes << ", \"driver_version\": " << json_quote(d.driver_version) << "}";
    }
    os << "],\n     \"options\": [";
    for (size_t i = 0; i < b.options.size(); ++i) {
      const BackendOptionInfo& o = b.options[i];
      os << (i ? ", " : "") << "{\"name\": " << json_quote(o.name) << ", \"type\": " << json_quote(o.type)
         << ", \"default\": " << json_quote(o.default_value) << ", \"doc\": " << json_quote(o.doc) << "}";
    }
    os << "],\n     \"custom_ops\": [";
    for (size_t i = 0; i < b.custom_ops.size(); ++i) {
      const BackendCustomOpInfo& c = b.custom_ops[i];
      os << (i ? ", " : "") << "{\"domain\": " << json_quote(c.domain) << ", \"op_type\": " << json_quote(c.op_type)
         << ", \"since_version\": " << c.since_version << ", \"doc\": " << json_quote(c.doc) << "}";
    }
    os << "]}";
  }
  os << "\n  ],\n  \"errors\": [";
  const std::vector<BackendLoadError> errors = registry.errors();
  for (size_t i = 0; i < errors.size(); ++i) {
    os << (i ? "," : "") << "\n    {\"path\": " << json_quote(errors[i].path) << ", \"message\": "
       << json_quote(errors[i].message) << "}";
  }
  os << "\n  ]\n}\n";
}

void print_placement_text(const std::string& model, const PlacementReport& r, std::ostream& os, bool verbose) {
  size_t folded = 0, placed = 0;
  for (const NodePlacement& n : r.nodes) {
    folded += n.placement == "folded";
    placed += !n.partition.empty();
  }
  os << "model: " << model << "\n";
  os << "backends tried: " << join(r.backends, ", ") << " (fallback: " << fallback_policy_name(r.fallback) << ")\n";
  os << "nodes: " << r.nodes.size() << " (" << placed << " in " << r.partitions.size() << " partitions, "
     << r.num_fallback() << " on portable, " << folded << " folded at load)\n";
  if (!r.rewrites.empty()) {
    os << "rewrites applied: ";
    for (size_t i = 0; i < r.rewrites.size(); ++i) os << (i ? ", " : "") << r.rewrites[i].first << " " << r.rewrites[i].second;
    os << "\n";
  }
  if (!r.partitions.empty()) os << "\npartitions:\n";
  for (const PartitionInfo& p : r.partitions) {
    os << "  " << p.id << "  " << p.backend << "  " << p.nodes.size() << " node" << (p.nodes.size() == 1 ? "" : "s")
       << "  " << histogram_text(p.op_histogram) << (p.custom_op ? "  (custom op)" : "") << "\n";
    os << "    nodes:    " << value_list(p.nodes, 6) << "\n";
    os << "    inputs:   " << value_list(p.inputs) << "\n";
    os << "    outputs:  " << value_list(p.outputs) << "\n";
    os << "    boundary: " << bytes_text(p.boundary_bytes) << " per run"
       << (p.serial ? " (serial: runs one at a time)" : "") << "\n";
  }
  if (r.num_fallback() > 0) print_fallback_by_reason(r, os);
  if (r.num_fallback() > 0 && verbose) {
    os << "\non portable kernels, node by node:\n";
    for (const NodePlacement& n : r.nodes) {
      if (n.placement != "portable") continue;
      os << "  " << n.node << "\n";
      for (const auto& [backend, reason] : n.reasons) {
        if (backend == "portable") continue;
        os << "    " << backend << ": " << reason << "\n";
      }
      bool any = false;
      for (const auto& reason : n.reasons) any |= reason.first != "portable";
      if (!any) os << "    (no plugin was tried)\n";
    }
  }
  if (!r.notes.empty()) {
    os << "\nnotes:\n";
    for (const std::string& n : r.notes) os << "  " << n << "\n";
  }
}

void print_placement_json(const std::string& model, const PlacementReport& r, std::ostream& os) {
  os << "{\n  \"model\": " << json_quote(model) << ",\n  \"backends\": " << json_list(r.backends)
     << ",\n  \"fallback\": " << json_quote(fallback_policy_name(r.fallback)) << ",\n  \"partitions\": [";
  for (size_t k = 0; k < r.partitions.size(); ++k) {
    const PartitionInfo& p = r.partitions[k];
    os << (k ? "," : "") << "\n    {\"id\": " << json_quote(p.id) << ", \"backend\": " << json_quote(p.backend)
       << ", \"node_count\": " << p.nodes.size() << ", \"op_histogram\": {";
    for (size_t i = 0; i < p.op_histogram.size(); ++i)
      os << (i ? ", " : "") << json_quote(p.op_histogram[i].first) << ": " << p.op_histogram[i].second;
    os << "}, \"nodes\": " << json_list(p.nodes) << ", \"inputs\": " << json_list(p.inputs)
       << ", \"outputs\": " << json_list(p.outputs) << ", \"boundary_bytes\": " << p.boundary_bytes
       << ", \"serial\": " << (p.serial ? "true" : "false") << ", \"custom_op\": " << (p.custom_op ? "true" : "false")
       << "}";
  }
  os << "\n  ],\n  \"nodes\": [";
  for (size_t k = 0; k < r.nodes.size(); ++k) {
    const NodePlacement& n = r.nodes[k];
    os << (k ? "," : "") << "\n    {\"node\": " << json_quote(n.node) << ", \"op_type\": " << json_quote(n.op_type)
       << ", \"placement\": " << json_quote(n.placement) << ", \"partition\": " << json_quote(n.partition)
       << ", \"reasons\": [";
    for (size_t i = 0; i < n.reasons.size(); ++i) {
      os << (i ? ", " : "") << "{\"backend\": " << json_quote(n.reasons[i].first) << ", \"reason\": "
         << json_quote(n.reasons[i].second) << "}";
    }
    os << "]}";
  }
  os << "\n  ],\n  \"rewrites\": {";
  for (size_t i = 0; i < r.rewrites.size(); ++i)
    os << (i ? ", " : "") << json_quote(r.rewrites[i].first) << ": " << r.rewrites[i].second;
  os << "},\n  \"notes\": " << json_list(r.notes) << ",\n  \"warnings\": " << json_list(r.warnings)
     << ",\n  \"fallback_nodes\": " << r.num_fallback() << "\n}\n";
}

}  // namespace kiln::cli
