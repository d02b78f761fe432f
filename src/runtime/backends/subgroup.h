// Running a program's partitions on their own, and sub-groups of them, for
// differential testing (kiln/verify.h) and the conformance kit: a partition
// (or a convex subset of its nodes, compiled by the same plugin instance
// through the public ABI) is executed on given values of its inputs, each
// output between guard bytes (guarded_outputs.h).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/backends/partition_kernel.h"
#include "runtime/program.h"

namespace kiln::runtime {

/// Values by name (a reference run's inputs and intermediates).
using ValuesByName = std::unordered_map<std::string, Tensor>;

/// What one run of a (sub-)group gave.
struct GroupRun {
  Status status;                       ///< compile or execute failure, or guard damage
  std::vector<ir::ValueId> outputs;    ///< the group's boundary outputs
  std::vector<Tensor> tensors;         ///< their values (same order; empty on failure)
};

class SubgroupRunner {
 public:
  /// `program` was built with the plugin; its graph, constants and placement
  /// describe the partitions. It must outlive the runner.
  explicit SubgroupRunner(const Program& program);

  /// The ir node indices (topological order) of partition `id`.
  std::vector<int32_t> nodes_of(const std::string& id) const;
  /// The partition kernel with `id` (null when none).
  const PartitionKernel* kernel_of(const std::string& id) const;

  /// Runs the compiled partition on `values` of its inputs.
  GroupRun run_partition(const PartitionKernel& pk, const ValuesByName& values) const;
  /// Compiles `nodes` (ir indices, topological, a convex part of one of the
  /// plugin's groups) on `instance` and runs it on `values`. The group's
  /// outputs are the values its nodes compute that anything outside the
  /// group reads (or the graph returns), and every output of its last node.
  GroupRun run_subgroup(BackendInstance& instance, const std::vector<int32_t>& nodes,
                        const ValuesByName& values) const;

  /// "Relu 'r1'": the label of the node that computes `v` ("" for inputs and constants).
  std::string producer_label(ir::ValueId v) const;

 private:
  Status gather_inputs(const std::vector<ir::ValueId>& ids, const ValuesByName& values,
                       std::vector<Tensor>* tensors) const;
  GroupRun execute(const CompiledPartition& cp, const std::vector<ir::ValueId>& inputs,
                   std::vector<ir::ValueId> outputs, const ValuesByName& values) const;

  const Program& program_;
  const ir::Graph& g_;
  std::vector<int32_t> producers_;
  std::vector<std::vector<int32_t>> readers_;  // per value: non-folded nodes reading it
  std::vector<int8_t> folded_;                 // per node
};

}  // namespace kiln::runtime
