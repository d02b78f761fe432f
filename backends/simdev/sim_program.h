// A compiled simdev partition: ops over numbered slots (partition inputs,
// device copies of constants, per-run intermediates, outputs), built from a
// graph view, and the code that runs it on the compute engine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/c/backend_sdk.hpp"
#include "sim_device.h"
#include "sim_kernels.h"

namespace simdev {

/// Why simdev would not run `node` ("" when it would).
std::string decline_reason(const kiln::sdk::Node& node);

enum class OpKind { kAdd, kRelu, kMatMul, kConv };

struct Op {
  OpKind kind = OpKind::kAdd;
  std::string label;         // "Add 'add_1'" for traces and messages
  std::vector<int32_t> in;   // slots; -1 for an omitted optional input
  int32_t out = -1;
  ConvAttrs conv;
};

enum class SlotKind { kInput, kConstant, kTemp, kOutput };

struct Slot {
  SlotKind kind = SlotKind::kTemp;
  int32_t index = -1;      // input or output index
  void* device = nullptr;  // constants: the device copy
  Dims dims;               // constants: their dims
};

struct Program {
  std::vector<Slot> slots;
  std::vector<Op> ops;
  std::vector<int32_t> inputs;   // slot per partition input
  std::vector<int32_t> outputs;  // slot per partition output
  std::vector<Dims> input_dims;  // declared dims (-1 unknown); empty with unknown rank
  uint64_t workspace_bytes = 0;  // device scratch (Conv im2col) at the declared shapes
  std::vector<size_t> inplace;   // input, output pairs
  std::vector<std::string> owned_constants;
  std::vector<ContentHash> constant_hashes;  // released with the program

  /// Dims of every slot for these input dims (throws on a mismatch).
  std::vector<Dims> infer(const std::vector<Dims>& inputs) const;
};

/// A program's hold on its device: releases its constants when destroyed.
struct ProgramState {
  ProgramState(std::shared_ptr<Device> d, Program p) : device(std::move(d)), program(std::move(p)) {}
  ~ProgramState();
  ProgramState(const ProgramState&) = delete;
  ProgramState& operator=(const ProgramState&) = delete;
  std::shared_ptr<Device> device;
  Program program;
};

/// Compiles `part` of `graph` for `device` (constants uploaded or shared).
std::shared_ptr<ProgramState> compile_program(const kiln::sdk::Graph& graph, const kiln::sdk::Partition& part,
                                              std::shared_ptr<Device> device);

/// Everything one run needs, gathered on the calling thread.
struct RunArgs {
  std::vector<void*> ptrs;   // per slot (temps filled by run_program)
  std::vector<Dims> dims;    // per slot
  kiln_exec_context_t* ctx = nullptr;
  int64_t latency_us = 0;    // simulated time per op
  void* workspace = nullptr; // device scratch from the host, or NULL
  size_t workspace_size = 0;
  bool fail_oom = false;     // fail_after: refuse this run as out of memory
  bool traced = false;       // registered with Device::begin_trace at enqueue
  std::vector<void*> temps;  // device blocks of this run (intermediates, workspace)
};

/// Allocates the run's intermediates (and the Conv workspace when the host
/// gave none) from device memory, when the run is queued: a device that
/// is full says so as the call's own RESOURCE_EXHAUSTED (nothing queued),
/// which the host may answer by running the partition on portable kernels.
void reserve_run_memory(ProgramState& state, RunArgs& args);
void release_run_memory(ProgramState& state, RunArgs& args);

/// Runs the program (on the compute engine) and releases the run's memory;
/// NULL or an error status.
kiln_status_t* run_program(const kiln::sdk::Host& host, ProgramState& state, RunArgs& args);

}  // namespace simdev
