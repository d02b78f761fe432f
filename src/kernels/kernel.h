// The portable kernel interface.
//
// A kernel is made once per node when a session loads (its factory reads and
// checks attributes and whatever is static: constant inputs, known dtypes and
// shapes), then compute() runs it on every Session::run. compute() is const
// and may run on several threads at once for concurrent runs; it gets its
// memory from the context (the planned arena), never from new/malloc for
// tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"
#include "ir/graph.h"
#include "kiln/result.h"
#include "kiln/run_options.h"
#include "kiln/value.h"

namespace kiln::kernels {

/// What a factory knows about one node input at load time.
struct InputInfo {
  const ir::ValueType* type = nullptr;  // null when the input is absent
  const Tensor* constant = nullptr;     // the initializer, when the input is one
  bool present() const { return type != nullptr; }
};

/// Runs a subgraph (If/Loop/Scan bodies). The runtime implements it; a
/// kernel gets one from its context.
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  /// Runs `graph` (a subgraph attribute of the current node) with `inputs`
  /// bound to graph.inputs in order. Outer-scope values are resolved from the
  /// enclosing run. Returns the graph outputs in order.
  virtual Result<std::vector<Value>> run(const ir::Graph& graph, std::span<const Value> inputs) = 0;
};

/// Hands out output memory. The executor's implementation uses the static
/// plan; the test harness allocates on the heap.
class OutputAllocator {
 public:
  virtual ~OutputAllocator() = default;
  /// Gives `out` memory for `numel(shape)` elements of `dtype` for value `id`.
  virtual Status allocate(ir::ValueId id, DType dtype, const Shape& shape, Tensor* out) = 0;
};

/// What compute() sees: inputs, outputs, the thread pool. Built per node per
/// run on the stack; cheap.
class KernelContext {
 public:
  KernelContext(const ir::Node& node, const Value* const* inputs, size_t num_inputs,
                Value* const* outputs, size_t num_outputs, OutputAllocator* allocator,
                ThreadPool* pool, SubgraphRunner* subgraphs)
      : node_(node), inputs_(inputs), num_inputs_(num_inputs), outputs_(outputs),
        num_outputs_(num_outputs), allocator_(allocator), pool_(pool), subgraphs_(subgraphs) {}

  const ir::Node& node() const { return node_; }

  size_t num_inputs() const { return num_inputs_; }
  /// True if input i exists and holds a value (optional inputs may not).
  bool has_input(size_t i) const {
    return i < num_inputs_ && inputs_[i] != nullptr && !inputs_[i]->is_none();
  }
  /// Input i as a tensor; has_input(i) must be true and the value a tensor.
  const Tensor& input(size_t i) const { return inputs_[i]->tensor(); }
  /// Input i of any kind, or null when absent.
  const Value* input_value(size_t i) const { return i < num_inputs_ ? inputs_[i] : nullptr; }

  size_t num_outputs() const { return num_outputs_; }
  /// True if the node's output i is consumed or a graph output (not omitted).
  bool wants_output(size_t i) const { return i < num_outputs_ && outputs_[i] != nullptr; }

  /// Allocates output i as a tensor of `dtype` and `shape` and returns it.
  /// When the output was omitted by the model, returns scratch memory that is
  /// discarded. Numeric contents are uninitialized.
  Result<Tensor*> allocate_output(size_t i, DType dtype, const Shape& shape);
  /// Sets output i to a tensor that shares memory with an input (Reshape,
  /// Identity, Squeeze...). Only for kernels registered with kAliasesInput0.
  void set_output_alias(size_t i, Tensor view) {
    if (wants_output(i)) *outputs_[i] = Value(std::move(view));
  }
  /// Sets output i to an owned value (sequences, optionals, control flow).
  void set_output_value(size_t i, Value v) {
    if (wants_output(i)) *outputs_[i] = std::move(v);
  }

  ThreadPool* pool() const { return pool_; }
  SubgraphRunner* subgraphs() const { return subgraphs_; }
  /// The run's cancel flag and deadline (null: none), for kernels that poll
  /// inside long computations (backend partitions do).
  const RunOptions* run_options() const { return run_options_; }
  void set_run_options(const RunOptions* options) { run_options_ = options; }

 private:
  const ir::Node& node_;
  const Value* const* inputs_;
  size_t num_inputs_;
  Value* const* outputs_;
  size_t num_outputs_;
  OutputAllocator* allocator_;
  ThreadPool* pool_;
  SubgraphRunner* subgraphs_;
  const RunOptions* run_options_ = nullptr;
  std::vector<std::unique_ptr<Tensor>> scratch_;  // omitted outputs (pointers stay valid)
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status compute(KernelContext& ctx) const = 0;
};

/// What a factory gets: the node, its graph, what is known of its inputs, and
/// typed attribute reads.
///
/// Attribute reads follow TensorFlow's OpKernelConstruction: a read returns
/// the value (or the default when the attribute is absent); an attribute
/// present with another type records an error naming it and returns the
/// default. The factory returns the first recorded error (make_kernel does,
/// ahead of any error init() found with the default), so a factory reads its
/// attributes in a row and checks once.
class KernelInit {
 public:
  KernelInit(const ir::Node& n, const ir::Graph& g, std::span<const InputInfo> in, int node_opset)
      : node(n), graph(g), inputs(in), opset(node_opset) {}

  const ir::Node& node;
  const ir::Graph& graph;
  std::span<const InputInfo> inputs;
  int opset;  // the node's opset for its domain

  DType input_dtype(size_t i) const {
    return i < inputs.size() && inputs[i].type ? inputs[i].type->dtype : DType::kUndefined;
  }
  const Tensor* constant_input(size_t i) const { return i < inputs.size() ? inputs[i].constant : nullptr; }

  int64_t attr_int(std::string_view name, int64_t dflt) const { return read(node.attr_int(name, dflt), dflt); }
  float attr_float(std::string_view name, float dflt) const { return read(node.attr_float(name, dflt), dflt); }
  std::string attr_string(std::string_view name, std::string_view dflt) const {
    return read(node.attr_string(name, dflt), std::string(dflt));
  }
  std::vector<int64_t> attr_ints(std::string_view name) const { return read(node.attr_ints(name), {}); }
  std::vector<float> attr_floats(std::string_view name) const { return read(node.attr_floats(name), {}); }
  std::vector<std::string> attr_strings(std::string_view name) const { return read(node.attr_strings(name), {}); }
  const Tensor* attr_tensor(std::string_view name) const { return read(node.attr_tensor(name), nullptr); }
  const ir::Graph* attr_graph(std::string_view name) const { return read(node.attr_graph(name), nullptr); }

  /// The first attribute-type error of the reads so far (OK when none).
  Status attr_status() const { return attr_error_.clone(); }

 private:
  template <class T>
  T read(Result<T> r, std::type_identity_t<T> dflt) const {
    if (r.ok()) return std::move(r).value();
    if (attr_error_.is_ok()) attr_error_ = std::move(r).status();
    return dflt;
  }
  mutable Status attr_error_;
};

using KernelFactory = Result<std::unique_ptr<Kernel>> (*)(const KernelInit& init);

/// Kernels whose first output may share the memory of their first input.
inline constexpr uint32_t kAliasesInput0 = 1u << 0;
/// Kernels whose outputs are not a function of inputs alone (random ops):
/// never constant-folded, and conformance tests cannot compare them.
inline constexpr uint32_t kNondeterministic = 1u << 1;

/// Finishes a kernel made by a factory: runs `k->init(init)` when K has one
/// and returns k, or the first attribute-type error of init's reads (it
/// explains whatever followed from the default), or init's own error.
template <class K>
Result<std::unique_ptr<Kernel>> init_kernel(std::unique_ptr<K> k, const KernelInit& init) {
  if constexpr (requires(K& x) { x.init(init); }) {
    Status st = k->init(init);
    Status attr = init.attr_status();
    if (!attr.is_ok()) return attr;
    if (!st.is_ok()) return st;
  }
  return std::unique_ptr<Kernel>(std::move(k));
}

/// `make_kernel<K>`: a KernelFactory for a Kernel type K with either a
/// constructor K() plus `Status init(const KernelInit&)`, or just K().
template <class K>
Result<std::unique_ptr<Kernel>> make_kernel(const KernelInit& init) {
  return init_kernel(std::make_unique<K>(), init);
}

}  // namespace kiln::kernels
