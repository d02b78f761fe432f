// Kiln backend SDK, part 4: what execute's inputs are checked against
// before a plugin's execute runs (InputSpec, recorded from the partition at
// compile; check_input). Included by kiln/c/backend_sdk.hpp.
//
// \since 1.1
#ifndef KILN_C_BACKEND_SDK_INPUTS_HPP_
#define KILN_C_BACKEND_SDK_INPUTS_HPP_

#ifndef KILN_C_BACKEND_SDK_HPP_
#error "include kiln/c/backend_sdk.hpp, not this file"
#endif

namespace kiln::sdk {

/// What one execute input must be: recorded by the SDK at compile from the
/// partition's input value (its name, dtype, rank and known dims) and checked
/// before every execute. Unknown parts (dtype UNDEFINED, rank -1, dim -1)
/// match anything. \since 1.1
struct InputSpec {
  std::string name;                       ///< "" when unknown (an imported handle)
  int32_t dtype = KILN_DTYPE_UNDEFINED;
  int64_t rank = -1;
  std::vector<int64_t> dims;              ///< rank entries when rank >= 0
  /// Where the tensor must live: HOST, or (once the host has read
  /// Compiled::input_memory_kinds; a 1.0 host never does) the declared kind.
  int32_t memory_kind = KILN_MEMORY_HOST;

  /// The spec of a partition input value (a tensor; other kinds match anything).
  static InputSpec of(const Value& v) {
    InputSpec s;
    s.name = v.name();
    if (v.kind() != KILN_VALUE_TENSOR) return s;
    s.dtype = v.dtype();
    s.rank = v.rank();
    if (s.rank >= 0) s.dims = v.dims();
    return s;
  }
  /// "[2, ?, 16]"
  std::string shape_string() const {
    if (rank < 0) return "any shape";
    std::string r = "[";
    for (size_t i = 0; i < dims.size(); ++i) r += (i ? ", " : "") + (dims[i] < 0 ? std::string("?") : std::to_string(dims[i]));
    return r + "]";
  }
};

/// "input 1 'bias'" (or "input 1" when the name is unknown) for messages.
inline std::string input_label(size_t index, const std::string& name) {
  return "input " + std::to_string(index) + (name.empty() ? std::string() : " '" + name + "'");
}

/// Throws INVALID_ARGUMENT, naming the input, when `t` does not match
/// `spec`, or when the view is inconsistent in itself (fewer bytes than its
/// shape needs, no data for a non-empty tensor). \since 1.1
inline void check_input(size_t index, const InputSpec& spec, const TensorView& t) {
  const std::string who = input_label(index, spec.name);
  if (spec.dtype != KILN_DTYPE_UNDEFINED && t.dtype != spec.dtype) {
    fail(KILN_STATUS_INVALID_ARGUMENT, who + " is " + dtype_name(t.dtype) + "; the partition was compiled for " +
                                           dtype_name(spec.dtype));
  }
  bool shape_ok = spec.rank < 0 || t.rank == static_cast<size_t>(spec.rank);
  for (size_t d = 0; shape_ok && spec.rank >= 0 && d < t.rank && d < spec.dims.size(); ++d)
    shape_ok = spec.dims[d] < 0 || spec.dims[d] == t.dims[d];
  if (!shape_ok) {
    fail(KILN_STATUS_INVALID_ARGUMENT, who + " has shape " + dims_string(t.dims, t.rank) +
                                           "; the partition was compiled for " + spec.shape_string());
  }
  const size_t elem = dtype_size(t.dtype);
  size_t need = elem;  // bytes the shape needs; SIZE_MAX when that overflows
  for (size_t d = 0; d < t.rank; ++d) {
    if (t.dims[d] < 0) fail(KILN_STATUS_INVALID_ARGUMENT, who + " has a negative dim: " + dims_string(t.dims, t.rank));
    const uint64_t dim = static_cast<uint64_t>(t.dims[d]);
    need = dim != 0 && need > SIZE_MAX / dim ? SIZE_MAX : static_cast<size_t>(need * dim);
  }
  if (elem > 0 && t.nbytes < need) {
    fail(KILN_STATUS_INVALID_ARGUMENT, who + " holds " + std::to_string(t.nbytes) + " bytes; its shape " +
                                           dims_string(t.dims, t.rank) + " of " + dtype_name(t.dtype) + " needs " +
                                           (need == SIZE_MAX ? std::string("more than fits in memory") : std::to_string(need)));
  }
  if (t.nbytes > 0 && !t.data) fail(KILN_STATUS_INVALID_ARGUMENT, who + " has " + std::to_string(t.nbytes) + " bytes and no data");
  if (t.memory_kind != spec.memory_kind) {
    fail(KILN_STATUS_INVALID_ARGUMENT, who + " is in " + memory_kind_name(t.memory_kind) +
                                           " memory; the partition declared " + memory_kind_name(spec.memory_kind));
  }
}

}  // namespace kiln::sdk

#endif  // KILN_C_BACKEND_SDK_INPUTS_HPP_
