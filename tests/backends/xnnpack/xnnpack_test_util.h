// What the XNNPACK plugin's test files share: one registry holding the
// plugin, and short names for the attribute builders of optimizer/test_graph.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "abi_test_util.h"
#include "optimizer/test_graph.h"

namespace kiln::abi_test {

/// The registry with the built XNNPACK plugin (one per test binary).
inline std::shared_ptr<BackendRegistry> reg() {
  static std::shared_ptr<BackendRegistry> r = registry_of({KILN_XNNPACK_PLUGIN});
  return r;
}

/// What `g` computes from `in` on portable kernels alone: the reference the
/// plugin's outputs are checked against.
inline Result<std::vector<Value>> portable_outputs(std::shared_ptr<ir::Graph> g, const std::vector<Value>& in) {
  auto p = build(std::move(g), nullptr, {});
  if (!p.ok()) return p.status().clone();
  return (*p)->run(in, {}, nullptr);
}

/// Claims every group, whatever its size (option min_macs_per_byte=0): for
/// tests of what the plugin computes, not of what it chooses to claim.
inline BackendOption claim_all() { return {"xnnpack", "min_macs_per_byte", "0"}; }

inline ir::Attribute a_int(const char* n, int64_t v) { return optimizer::testing::attr_int(n, v); }
inline ir::Attribute a_ints(const char* n, std::vector<int64_t> v) {
  return optimizer::testing::attr_ints(n, std::move(v));
}
inline ir::Attribute a_float(const char* n, float v) { return optimizer::testing::attr_float(n, v); }

// The variant of the plugin's own kernels (xnn_isa.h) that runs when capped
// at `cap` ($KILN_XNNPACK_ISA or $KILN_XNNPACK_WINOGRAD_ISA: avx512, avx2,
// none/baseline) on this CPU: "avx512", "avx2", or `none` where neither runs.
inline std::string plugin_kernel_isa(const std::string& cap, const std::string& none = "none") {
#if defined(__x86_64__) || defined(__i386__)
  if (cap == "avx512" && __builtin_cpu_supports("avx512f")) return "avx512";
  if (cap != "none" && cap != "baseline" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "avx2";
#endif
  return none;
}

}  // namespace kiln::abi_test
