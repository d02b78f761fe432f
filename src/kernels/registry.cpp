#include "kernels/registry.h"

#include "kernels/default_registry.h"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace kiln::kernels {

std::string KernelRegistry::key(std::string_view domain, std::string_view op) {
  std::string k(canonical_domain(domain));
  k += '\0';
  k += op;
  return k;
}

void KernelRegistry::add(KernelDef def) {
  def.domain = std::string(canonical_domain(def.domain));
  defs_[key(def.domain, def.op_type)].push_back(std::move(def));
}

const KernelDef* KernelRegistry::find(std::string_view domain, std::string_view op_type, int opset,
                                      std::span<const DType> input_dtypes, std::string* why) const {
  auto it = defs_.find(key(domain, op_type));
  if (it == defs_.end()) {
    if (why) *why = "no portable kernel for op " + std::string(op_type);
    return nullptr;
  }
  bool opset_ok = false;
  DType dtype = DType::kUndefined;
  for (const KernelDef& d : it->second) {
    if (opset < d.since_version || opset > d.until_version) continue;
    opset_ok = true;
    if (d.type_input < 0 || static_cast<size_t>(d.type_input) >= input_dtypes.size()) return &d;
    dtype = input_dtypes[static_cast<size_t>(d.type_input)];
    if (dtype == DType::kUndefined || (d.dtypes & dtype_bit(dtype))) return &d;
  }
  if (why) {
    *why = opset_ok ? "no portable kernel for " + std::string(op_type) + " with dtype " + dtype_name(dtype)
                    : "no portable kernel for " + std::string(op_type) + " at opset " + std::to_string(opset);
  }
  return nullptr;
}

bool KernelRegistry::has_op(std::string_view domain, std::string_view op_type) const {
  return defs_.count(key(domain, op_type)) != 0;
}

std::vector<const KernelDef*> KernelRegistry::all() const {
  std::vector<const KernelDef*> out;
  for (const auto& [k, v] : defs_)
    for (const KernelDef& d : v) out.push_back(&d);
  return out;
}

namespace {

// The libraries added so far and the registry built from them. A registry
// is rebuilt (never changed in place) when a library is added, and the old
// one is leaked on purpose: programs built from it keep pointers into it.
struct DefaultRegistry {
  std::mutex mu;
  std::vector<KernelLibrary> libraries;
  std::atomic<const KernelRegistry*> current{nullptr};
};

DefaultRegistry& default_state() {
  static DefaultRegistry* state = new DefaultRegistry();
  return *state;
}

}  // namespace

void add_kernel_library(KernelLibrary library) {
  DefaultRegistry& s = default_state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (std::find(s.libraries.begin(), s.libraries.end(), library) != s.libraries.end()) return;
  s.libraries.push_back(library);
  auto* r = new KernelRegistry();
  for (KernelLibrary lib : s.libraries) lib(*r);
  s.current.store(r, std::memory_order_release);
}

const KernelRegistry& default_registry() {
  DefaultRegistry& s = default_state();
  if (const KernelRegistry* r = s.current.load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.current.load(std::memory_order_relaxed)) s.current.store(new KernelRegistry(), std::memory_order_release);
  return *s.current.load(std::memory_order_relaxed);
}

}  // namespace kiln::kernels
