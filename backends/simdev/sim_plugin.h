// simdev's plugin, instance and compiled classes (on the C++ SDK), with the
// 1.1 device entries the SDK does not wrap yet as plain member functions
// that sim_abi.cpp's trampolines call.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kiln/c/backend_sdk.hpp"
#include "sim_device.h"
#include "sim_program.h"
#include "sim_stream.h"

namespace simdev {

/// Default simulated device memory (the `memory_bytes` option).
constexpr uint64_t kDefaultMemoryBytes = 256ull << 20;

class SimInstance final : public kiln::sdk::Instance {
 public:
  SimInstance(const kiln::sdk::Host& host, kiln::sdk::Options options);
  ~SimInstance() override;

  void get_capability(const kiln::sdk::Graph& graph, kiln::sdk::Capability& cap) override;
  std::unique_ptr<kiln::sdk::Compiled> compile(const kiln::sdk::Graph& graph,
                                               const kiln::sdk::Partition& part) override;
  void set_property(const std::string& key, const std::string& value) override;
  std::string get_property(const std::string& key) override;

  // ABI 1.1 (each throws kiln::sdk::Error)
  void* alloc(int32_t memory_kind, uint32_t device_index, size_t size, size_t alignment);
  void free(int32_t memory_kind, void* ptr);
  /// NULL fence: returns when done (the copies' error, if any, is thrown).
  // (not `copy`: that name is the SDK Instance's own virtual, taking sdk::Copy)
  void copy_batch(const kiln_copy_t* copies, size_t n, kiln_fence_t* fence, uint64_t value);
  void stream_wait(kiln_fence_t* fence, uint64_t value);

  const kiln::sdk::Host& host() const { return *host_; }
  /// Options execute reads, kept in atomics: set_property (instance-level)
  /// may run while a compiled handle executes (compiled-level).
  int64_t latency_us() const { return latency_us_.load(); }
  int64_t fail_after() const { return fail_after_.load(); }
  Device& device() { return *device_; }
  Stream& stream() { return *stream_; }

 private:
  void check_options() const;
  void cache_options();

  const kiln::sdk::Host* host_;
  std::shared_ptr<Device> device_;
  std::unique_ptr<Stream> stream_;
  std::atomic<int64_t> latency_us_{0}, copy_latency_us_{0}, fail_after_{0};
};

class SimCompiled final : public kiln::sdk::Compiled {
 public:
  SimCompiled(SimInstance& instance, std::shared_ptr<ProgramState> state);

  /// The SDK's synchronous path (memory kinds told apart by address).
  void execute(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& inputs) override;
  size_t num_inputs() const override { return state_->program.inputs.size(); }
  size_t num_outputs() const override { return state_->program.outputs.size(); }
  kiln_concurrency_t concurrency() const override { return KILN_CONCURRENCY_REENTRANT; }

  /// Validates the inputs, allocates the outputs and queues the run: with a
  /// fence, signals it when done and returns; without one, waits and throws
  /// the run's error.
  void enqueue(kiln_exec_context_t* ctx, const kiln_tensor_t* const* inputs, size_t n, kiln_fence_t* fence,
               uint64_t value);
  /// compiled_get_info, 1.1 members included.
  void fill_info(kiln_compiled_info_t* out) const;

 private:
  SimInstance& instance_;
  std::shared_ptr<ProgramState> state_;
  bool async_;
  std::vector<int32_t> input_kinds_, output_kinds_;
  std::vector<const char*> owned_;
};

class SimPlugin final : public kiln::sdk::Plugin {
 public:
  Info info() const override;
  std::vector<Device> devices() const override;
  std::vector<kiln::sdk::OptionSpec> option_schema() const override;
  std::unique_ptr<kiln::sdk::Instance> create_instance(size_t device_index, kiln::sdk::Options options) override;
};

}  // namespace simdev
