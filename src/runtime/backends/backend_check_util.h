// What the groups of the backend conformance kit (kiln/backend_check.h)
// share: loading the plugin under test alone, with its log captured.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/backend_check.h"
#include "runtime/backends/partition_kernel.h"
#include "runtime/backends/plugin.h"
#include "runtime/backends/selection.h"
#include "runtime/program.h"

namespace kiln::backend_check {

/// Log lines a plugin wrote (through the host), for leak and misuse reports.
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;
  runtime::PluginLoadOptions load_options();
  /// Lines containing `needle`.
  std::vector<std::string> find(const std::string& needle);
};

/// A registry holding only the plugin under test (loaded with `capture`).
Result<std::shared_ptr<BackendRegistry>> load_for_check(const Options& o, LogCapture& capture);

/// The registry and its one plugin.
struct Loaded {
  std::shared_ptr<BackendRegistry> registry;
  std::shared_ptr<runtime::LoadedPlugin> plugin;
};

/// Loads the plugin; adds a failure (it does not load) or a skip (it is not
/// available here) under `what` and returns false when it cannot be used.
bool load_usable(const Options& o, LogCapture& capture, Report& r, const char* what, Loaded* out);

/// Tolerances of the float32 comparisons against portable kernels.
struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-5;
};

/// A float32 tensor of `shape`, uniform in [-1, 1), the same for the same seed.
Tensor random_tensor(const Shape& shape, uint32_t seed);
/// A small graph of common float32 ops (and, with `unknown`, an op of a
/// domain no plugin can know), every shape static.
std::shared_ptr<ir::Graph> probe_graph(bool unknown);

/// Outputs of a directly executed partition, in host memory.
class HeapOutputs final : public runtime::ExecOutputs {
 public:
  explicit HeapOutputs(size_t n) : t_(n) {}
  size_t num_outputs() const override { return t_.size(); }
  Result<Tensor*> allocate(size_t i, DType dt, const Shape& s) override {
    t_[i] = Tensor::allocate(dt, s);
    return &t_[i];
  }
  std::vector<Tensor> t_;
};

/// "" when the float32 tensors match (NaN equal to NaN), else the first difference.
std::string compare_all(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const Tolerance& tol);

/// Inputs of the right shape for partition `pk` (random), and views of them.
struct PartitionInputs {
  std::vector<Tensor> tensors;
  std::vector<kiln_tensor_t> views;
};
PartitionInputs inputs_for(const runtime::Program& program, const runtime::PartitionKernel& pk);

/// The probe graph (probe_graph(false)) built through the plugin alone (then
/// portable kernels), and on portable kernels only.
struct ProbePrograms {
  std::unique_ptr<runtime::PartitionRequest> request;  // what `program` was built with
  std::unique_ptr<runtime::Program> program;
  std::unique_ptr<runtime::Program> reference;
};
Result<ProbePrograms> build_probe(const Options& o, const Loaded& l);

/// Runs every partition of `program` once more on its own, on random inputs,
/// each output between guard bytes: "" when no plugin wrote outside an
/// output buffer, else which partition, op and output, and how far.
std::string guard_problems(const runtime::Program& program);

}  // namespace kiln::backend_check
