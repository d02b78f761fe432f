// The partitioner: hands parts of a graph to backends.
//
// Program::build calls it after constant folding and before portable kernels
// are chosen. Custom ops of selected plugins are placed first. Then backends
// are tried in the user's order; each sees a view of the nodes no earlier
// backend claimed. Claimed groups are made convex (fusing a group must not
// create a cycle: no path may leave the group and come back) by splitting
// them into layers, then compiled. Each compiled group becomes one node
// (domain kiln.backend, op Partition) whose kernel runs the compiled handle;
// its inputs and outputs are the group's boundary, so those tensors stay in
// host memory. Whatever is left runs on portable kernels; with fallback
// policy `require` that is an error naming every such node.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"
#include "kiln/backends.h"
#include "runtime/backends/plugin.h"

namespace kiln::runtime {

/// One entry of the backend order. `instance` is null for "portable".
struct SelectedBackend {
  std::string name;
  std::shared_ptr<BackendInstance> instance;
};

/// Stands between the partitioner and a backend's compile: a program file
/// supplies exported blobs, the compile cache imports or stores them
/// (runtime/compile_cache.h). `key` is partition_content_key() of the group.
struct CompileHook {
  using CompileFn = std::function<Result<std::shared_ptr<CompiledPartition>>()>;
  virtual ~CompileHook() = default;
  virtual Result<std::shared_ptr<CompiledPartition>> compile(const SelectedBackend& sb, const std::string& id,
                                                             const std::string& key, const CompileFn& compile) = 0;
  /// False: the hook finds partitions by id alone and `key` is passed empty
  /// (hashing every constant a partition reads is then skipped).
  virtual bool wants_content_key() const { return true; }
};

/// What a session asks the partitioner for.
struct PartitionRequest {
  CompileHook* compile_hook = nullptr;  // null: compile every partition
  std::vector<SelectedBackend> backends;  // the order to try; portable is implied last
  FallbackPolicy fallback = FallbackPolicy::kAllow;
  std::vector<std::string> notes;         // from selection: skipped backends
  /// Custom ops of loaded plugins that are not selected: (op, plugin name).
  std::vector<std::pair<BackendCustomOpInfo, std::string>> unselected_custom_ops;
};

/// What the Program knows about each node before partitioning.
enum class NodeState : int8_t {
  kOpen = 0,      // not placed yet
  kFolded = 1,    // computed at load; its outputs are constants
  kPortable = 2,  // already a portable step (e.g. foldable but too large)
};

struct PartitionOutcome {
  /// One PartitionKernel per partition; each owns its node.
  std::vector<std::unique_ptr<kernels::Kernel>> kernels;
  std::vector<const ir::Node*> nodes;  // kernels[i]'s node
  /// Per ir node: the partition that runs it, or -1.
  std::vector<int32_t> claimed_by;
  PlacementReport report;
  /// Constants the Program drops: each is owned (kiln_compiled_info_t.
  /// owned_constants) by every partition that reads it, no other node reads
  /// it (subgraphs included) and it is no graph output. The partitions that
  /// own them have no portable fallback any more. Already passed to
  /// PartitionParams::release_constant.
  std::vector<ir::ValueId> dropped_constants;
};

/// What partition_graph works on.
struct PartitionParams {
  const ir::Graph& graph;  // the main graph
  /// Initializers and folded values.
  const std::unordered_map<ir::ValueId, Tensor>& constants;
  std::span<const NodeState> states;  // one per node of `graph`
  const PartitionRequest& request;
  const kernels::KernelRegistry& registry;  // answers for the portable pseudo-backend
  bool keep_owned_constants = false;        // ProgramOptions::keep_owned_constants: drop nothing
  /// Called once for each constant that becomes droppable (every reader
  /// compiled by a partition that owns it), right then: frees its bytes so the
  /// host's and the plugins' copies are never all resident at once. The
  /// entry must stay in `constants` (views point at it) until partitioning
  /// ends; PartitionOutcome::dropped_constants lists what to erase then.
  std::function<void(ir::ValueId)> release_constant;
};

/// Partitions the main graph, in six steps (partitioner.cpp): custom ops of
/// selected plugins; each backend in order offered the free nodes (each
/// claimed group compiled, with its boundary computed); the constants only
/// plugins that own them read; the placement report; custom ops of
/// unselected plugins; the fallback check.
Result<PartitionOutcome> partition_graph(const PartitionParams& params);

/// A stable topological order of `nodes` (each after the producers of the
/// values it reads, subgraph reads included); ties keep the given order.
Result<std::vector<size_t>> order_nodes(std::span<const ir::Node* const> nodes, const ir::Graph& g);

/// The stable id of a group: "<backend>:<12 hex digits>", a hash of the
/// backend's name and each node's domain, op type, name and output names.
std::string partition_id(const std::string& backend, const ir::Graph& g, std::span<const int32_t> nodes);

/// Splits `group` (ir node indices, each its own unit) into convex parts,
/// given every node's unit id (-1: not in the graph, e.g. folded) and the
/// producer of every value. Parts come in dependency order; a convex group
/// comes back whole.
std::vector<std::vector<int32_t>> split_convex(const ir::Graph& g, std::span<const int32_t> unit_of,
                                               std::span<const int32_t> group);

}  // namespace kiln::runtime
