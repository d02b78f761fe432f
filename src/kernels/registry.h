// KernelRegistry: the explicit table of portable kernels, keyed by domain,
// op type, opset range and the dtype of one input. Filled by
// register_portable_kernels() from one list (portable/all.cpp); there are no
// static initializers, and a runtime may own several registries.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/kernel.h"

namespace kiln::kernels {

struct KernelDef {
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int since_version = 1;     // first opset this kernel implements
  int until_version = 1000;  // last opset (inclusive)
  DTypeSet dtypes = kAllDTypes;  // accepted dtypes of input `type_input`
  int type_input = 0;            // which input's dtype is checked (-1: none)
  KernelFactory factory = nullptr;
  uint32_t flags = 0;  // kAliasesInput0, kNondeterministic
};

class KernelRegistry {
 public:
  /// Adds a kernel definition. Definitions for one op must not overlap in
  /// both opset range and dtypes (checked by the registry test).
  void add(KernelDef def);

  /// The definition for a node, given the dtypes of its inputs (kUndefined,
  /// or a missing entry, matches any). Null when none fits; `why` then says
  /// whether the op, the opset or the dtype is what is missing.
  const KernelDef* find(std::string_view domain, std::string_view op_type, int opset,
                        std::span<const DType> input_dtypes, std::string* why = nullptr) const;

  /// True if any definition exists for this op (any opset, any dtype).
  bool has_op(std::string_view domain, std::string_view op_type) const;

  /// Every definition, for listing.
  std::vector<const KernelDef*> all() const;

 private:
  static std::string key(std::string_view domain, std::string_view op);
  std::unordered_map<std::string, std::vector<KernelDef>> defs_;
};

/// Fills `registry` with every portable kernel (portable/all.cpp).
void register_portable_kernels(KernelRegistry& registry);

/// The process-wide registry of portable kernels, built on first use.
const KernelRegistry& portable_registry();

/// Normalizes a domain name: "ai.onnx" -> "".
inline std::string_view canonical_domain(std::string_view d) { return d == "ai.onnx" ? std::string_view() : d; }

}  // namespace kiln::kernels
