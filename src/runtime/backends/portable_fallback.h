// PortableFallback: the nodes of one backend partition on portable kernels,
// for when the plugin answers KILN_STATUS_RESOURCE_EXHAUSTED (its device ran
// out of memory) and the session's fallback policy is `allow`. The kernels
// are made on first use, so partitions that never fall back cost only the
// list of their nodes and shared handles of the constants they read.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/registry.h"
#include "runtime/node_inputs.h"

namespace kiln::runtime {

class PortableFallback {
 public:
  /// The group `nodes` of `g` (topological order) with the partition's
  /// boundary. Null when some node has no portable kernel or reads a
  /// subgraph. `g` and `registry` must outlive the fallback (the Program
  /// holds its graph; registries are process-wide).
  static std::unique_ptr<PortableFallback> make(const ir::Graph& g, const ConstantMap& constants,
                                                const std::vector<int32_t>& nodes,
                                                const kernels::KernelRegistry& registry,
                                                std::vector<ir::ValueId> inputs, std::vector<ir::ValueId> outputs);

  /// Runs the nodes with the partition node's inputs and sets its outputs.
  Status run(kernels::KernelContext& ctx) const;

 private:
  PortableFallback(const ir::Graph& g, const kernels::KernelRegistry& registry) : g_(g), registry_(registry) {}
  Status make_kernels() const;

  const ir::Graph& g_;
  const kernels::KernelRegistry& registry_;
  std::vector<const ir::Node*> nodes_;
  std::vector<ir::ValueId> inputs_, outputs_;
  ConstantMap constants_;  // the constants the nodes read (memory shared with the Program's)
  mutable std::once_flag made_;
  mutable Status made_status_;
  mutable std::vector<std::unique_ptr<kernels::Kernel>> kernels_;
};

}  // namespace kiln::runtime
