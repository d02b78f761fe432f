// Program: a graph made ready to run. At build it picks a kernel for every
// node, folds constant nodes, computes value lifetimes and the static memory
// plan, and builds programs for subgraphs. run() executes it; it is const and
// may be called from several threads at once.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "ir/graph.h"
#include "kernels/prepack.h"
#include "kernels/registry.h"
#include "kiln/backends.h"
#include "kiln/profile.h"
#include "kiln/run_options.h"
#include "optimizer/optimizer.h"
#include "runtime/memory_plan.h"

namespace kiln::runtime {

struct PartitionRequest;
class DeviceEdgePlan;

struct ProgramOptions {
  const kernels::KernelRegistry* registry = nullptr;  // null: kernels::default_registry()
  bool fold_constants = true;
  /// Load-time graph rewrites (src/optimizer): phase A after folding and
  /// before partitioning, phase B on the nodes left to portable kernels.
  /// Main graphs only: subgraphs keep their nodes as imported.
  bool rewrite = true;
  /// Largest output (bytes) a folded node may produce; bigger stays a node.
  size_t max_folded_bytes = size_t{64} << 20;
  /// Backends to partition the main graph over (runtime/backends/
  /// partitioner.h); null: every node on portable kernels. Constants fold
  /// first, so backends see folded values as constants. Not applied to
  /// subgraphs (a backend that claims an If/Loop runs its bodies itself).
  const PartitionRequest* partition = nullptr;
  /// Constant-weight packings kept across loads (a .kiln program's); offered
  /// to the main graph's portable kernels, not to subgraphs. Null: none.
  kernels::PrepackStore* prepack = nullptr;
  /// A static memory plan made earlier (a .kiln program's). Used instead of
  /// planning when it fits this build: one offset and size per value, every
  /// planned value placed, inside the arena, and no two values that are live
  /// at once sharing bytes (verify_plan); otherwise the plan is made again.
  const MemoryPlan* stored_plan = nullptr;
  /// Keep constants that plugins own (kiln_compiled_info_t.owned_constants)
  /// and nothing else reads; by default the host drops its copies. For code
  /// that compiles partitions again from the Program's constants (kiln
  /// verify, check-backend's guard checks).
  bool keep_owned_constants = false;
  /// Run steps whose kernels bind to the static plan's shapes as static
  /// calls (runtime/static_steps.h). Off: every step through compute()
  /// (tests compare the two; KILN_STATIC_CALLS=0 turns it off process-wide).
  bool static_calls = true;
};

struct Step {
  const ir::Node* node = nullptr;
  std::unique_ptr<kernels::Kernel> kernel;
  uint32_t flags = 0;
  std::vector<ir::ValueId> release;  // values last used by this step
};

class RunState;
class StaticSteps;

/// Runs kernel.compute, turning a std exception from library code into a Status.
Status compute_guarded(const kernels::Kernel& kernel, kernels::KernelContext& ctx);

class Program {
 public:
  /// Builds a program over `graph`, which the program takes ownership of.
  static Result<std::unique_ptr<Program>> build(std::shared_ptr<ir::Graph> graph, const ProgramOptions& options);
  ~Program();

  const ir::Graph& graph() const { return *graph_; }
  size_t num_steps() const { return steps_.size(); }
  const std::vector<Step>& steps() const { return steps_; }
  /// Groups of consecutive steps that may run at once (runtime/schedule.h):
  /// group i is steps [groups()[i], groups()[i + 1]).
  const std::vector<uint32_t>& groups() const { return groups_; }

  /// Runs with `inputs` in graph-input order (already validated by the
  /// caller). `outer` supplies outer-scope values for subgraphs (indexed by
  /// this graph's outer_refs order); empty for a main graph.
  /// With `profile`, records one event per step (nested subgraph steps are
  /// not recorded separately). With `options`, checks its cancel flag and
  /// deadline before every step (subgraph steps included) and hands them to
  /// kernels that poll (backend partitions).
  Result<std::vector<Value>> run(std::span<const Value> inputs, std::span<const Value* const> outer,
                                 ThreadPool* pool, RunProfile* profile = nullptr,
                                 const RunOptions* options = nullptr) const;

  /// The program of a subgraph attribute of one of this graph's nodes.
  const Program* subprogram(const ir::Graph* g) const {
    auto it = subprograms_.find(g);
    return it == subprograms_.end() ? nullptr : it->second.get();
  }
  /// For each outer ref of `sub`'s graph, this graph's value id of it.
  const std::vector<ir::ValueId>& outer_bindings() const { return outer_bindings_; }

  /// Where each node went (empty unless ProgramOptions::partition was set).
  const PlacementReport& placement() const { return placement_; }
  /// Initializers and values folded at load, by id; without the constants
  /// dropped because plugins own them (PlacementReport::num_dropped_constants).
  const std::unordered_map<ir::ValueId, Tensor>& constants() const { return constants_; }
  /// How many constants build dropped because plugins own copies.
  size_t num_dropped_constants() const { return dropped_constants_; }

  /// The load-time rewrites that applied, with counts.
  const optimizer::RewriteStats& rewrites() const { return rewrites_; }

  /// Arena bytes of the static plan (0 if there is none yet).
  size_t static_arena_bytes() const;
  /// The plan made (or taken from ProgramOptions::stored_plan) at build for
  /// the static input shapes; null when an input shape is not static.
  std::shared_ptr<const MemoryPlan> static_plan() const;
  /// Whether build used ProgramOptions::stored_plan.
  bool used_stored_plan() const { return used_stored_plan_; }
  /// Device edges of device plugins' partitions (runtime/device_edges.h);
  /// null when no partition declares device memory, async or workspace.
  const std::shared_ptr<const DeviceEdgePlan>& device_plan() const { return device_plan_; }
  /// Steps bound as static calls under the static plan (runtime/static_steps.h);
  /// null when there is no static plan or no step binds.
  const StaticSteps* static_steps() const { return static_steps_.get(); }

 private:
  friend class RunState;
  friend class Executor;
  Program() = default;
  // Folds constants, partitions over the selected backends and makes
  // portable kernels for the rest, in named steps (program.cpp).
  Status build_steps(const ProgramOptions& options);
  void compute_lifetimes();
  void drop_owned_constants(const std::vector<ir::ValueId>& ids);
  std::shared_ptr<const MemoryPlan> plan_for(const std::vector<size_t>& sizes) const;
  std::string signature(std::span<const Value> inputs) const;

  std::shared_ptr<ir::Graph> graph_;
  std::vector<Step> steps_;
  std::vector<uint32_t> groups_;
  PlacementReport placement_;
  optimizer::RewriteStats rewrites_;
  // Nodes the optimizer's phase B made (steps point at them; stable addresses).
  std::deque<ir::Node> fused_nodes_;
  std::unordered_map<ir::ValueId, Tensor> constants_;  // initializers + folded values
  std::vector<Lifetime> lifetimes_;
  std::vector<int8_t> plannable_;  // per value: may live in the arena
  std::unordered_map<const ir::Graph*, std::unique_ptr<Program>> subprograms_;
  std::vector<ir::ValueId> outer_bindings_;  // set by the parent for subprograms
  std::string static_signature_;             // the static plan's key in plans_
  bool has_static_plan_ = false;
  bool used_stored_plan_ = false;
  std::shared_ptr<const DeviceEdgePlan> device_plan_;
  std::unique_ptr<const StaticSteps> static_steps_;
  std::vector<ir::ValueId> step_outputs_;  // non-constant outputs of steps: cleared after each run
  size_t dropped_constants_ = 0;

  // Plans per input-shape signature; the static one is made at build.
  struct PlanEntry {
    std::shared_ptr<const MemoryPlan> plan;
    std::vector<size_t> sizes;  // bytes observed or inferred per value
    int replans = 0;
  };
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, PlanEntry> plans_;
  mutable std::vector<std::unique_ptr<RunState>> idle_states_;
};

}  // namespace kiln::runtime
