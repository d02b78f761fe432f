#include "kernels/registry.h"

#include "kernels/default_registry.h"

#include <algorithm>
#include <atomic>
#include <memory>
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

// The libraries added so far and the registries built from them. A registry
// is rebuilt (never changed in place) when a library is added; the old ones
// are kept, since programs built from them keep pointers into them (few:
// one per library added).
struct DefaultRegistry {
  std::mutex mu;
  std::vector<KernelLibrary> libraries;
  std::vector<std::unique_ptr<KernelRegistry>> built;  // the last is current
  std::atomic<const KernelRegistry*> current{nullptr};

  // Makes a registry of every library added (call with `mu` held).
  void rebuild() {
    built.push_back(std::make_unique<KernelRegistry>());
    for (KernelLibrary lib : libraries) lib(*built.back());
    current.store(built.back().get(), std::memory_order_release);
  }
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
  s.rebuild();
}

const KernelRegistry& default_registry() {
  DefaultRegistry& s = default_state();
  if (const KernelRegistry* r = s.current.load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.current.load(std::memory_order_relaxed)) s.rebuild();
  return *s.current.load(std::memory_order_relaxed);
}

}  // namespace kiln::kernels
