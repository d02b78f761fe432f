#include "kernels/registry.h"

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

const KernelRegistry& portable_registry() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    register_portable_kernels(*r);
    return r;
  }();
  return *registry;
}

}  // namespace kiln::kernels
