// PartitionKernel: the step that runs one compiled partition. The executor
// sees an ordinary kernel on an ordinary node (domain "kiln.backend", op
// "Partition", inputs and outputs = the partition's boundary), so boundary
// tensors stay in host memory and in the memory plan. compute() hands the
// plugin views of the inputs and lets it allocate outputs through the
// KernelContext. A handle that declares device memory kinds, async execution
// or workspace (ABI 1.1) runs through compute_device instead, with the run's
// DeviceRun (runtime/device_edges.h): device buffers, fences, staging.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/kernel.h"
#include "runtime/backends/plugin.h"
#include "runtime/backends/portable_fallback.h"

namespace kiln::runtime {

class DeviceRun;
struct DevicePartitionPlan;

/// "" when `dtype` and `shape` fit `type` (an unknown dtype, rank or dim
/// fits anything), else what differs.
std::string output_mismatch(const ir::ValueType& type, DType dtype, const Shape& shape);

/// The domain and op type of partition nodes.
inline constexpr const char* kPartitionDomain = "kiln.backend";
inline constexpr const char* kPartitionOp = "Partition";

class PartitionKernel final : public kernels::Kernel {
 public:
  /// `declared`: the boundary outputs as the plugin was told at compile
  /// time (name and type, in node->outputs order); each output the plugin
  /// allocates is checked against its static dtype and known dims. With
  /// `fallback`, a KILN_STATUS_RESOURCE_EXHAUSTED from the plugin re-runs
  /// the partition on portable kernels (logged as a warning).
  PartitionKernel(std::shared_ptr<CompiledPartition> compiled, std::unique_ptr<ir::Node> node,
                  std::vector<ir::ValueInfo> declared = {}, std::unique_ptr<PortableFallback> fallback = nullptr);

  /// The partition's node (owned by the kernel; steps point at it).
  const ir::Node* node() const { return node_.get(); }
  const CompiledPartition& compiled() const { return *compiled_; }

  Status compute(kernels::KernelContext& ctx) const override;

  /// Forgets the portable fallback (and the constants it holds): the host
  /// dropped a constant the plugin owns, which the fallback would read.
  void drop_fallback() { fallback_.reset(); }
  bool has_fallback() const { return fallback_ != nullptr; }

 private:
  // The 1.1 path (partition_device.cpp): device memory kinds, staging,
  // workspace, in-place pairs and async calls, with the run's DeviceRun.
  Status compute_device(kernels::KernelContext& ctx, DeviceRun& run, const DevicePartitionPlan& plan) const;

  std::shared_ptr<CompiledPartition> compiled_;
  std::unique_ptr<ir::Node> node_;
  std::vector<ir::ValueInfo> declared_;
  std::unique_ptr<PortableFallback> fallback_;
  std::string plugin_label_;  // "backend 'x'"
  std::string crash_label_;  // "backend 'x' in partition 'id'" (crash_report.h)
};

}  // namespace kiln::runtime
