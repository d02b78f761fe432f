// What the template backend compiles a partition into: a list of ops over
// numbered slots (partition inputs, constants copied at compile, values
// computed inside), and its byte format for export/import.
//
// Byte format (little-endian), version 1:
//   "KTPL" u32 version u32 num_slots
//   u32 n_inputs  { i32 slot, i32 rank (-1 unknown), i64 dims[rank] (-1 unknown) }
//   u32 n_outputs { i32 slot }
//   u32 n_consts  { i32 slot, u32 rank, i64 dims[rank], f32 data[numel] }
//   u32 n_ops     { u8 kind, u32 n_in, i32 in[n_in], i32 out }
//   u32 fnv1a32 of every byte before it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/c/backend_sdk.hpp"

namespace kiln_template {

enum class OpKind : uint8_t { kAdd = 0, kMul = 1, kRelu = 2, kMatMul = 3, kMulAdd = 4 };

struct Op {
  OpKind kind = OpKind::kAdd;
  std::vector<int32_t> in;
  int32_t out = -1;
};

struct Input {
  int32_t slot = -1;
  int32_t rank = -1;          // -1: unknown
  std::vector<int64_t> dims;  // -1: unknown or symbolic
};

struct Constant {
  int32_t slot = -1;
  std::vector<int64_t> dims;
  std::vector<float> data;
};

struct Program {
  uint32_t num_slots = 0;
  std::vector<Input> inputs;
  std::vector<int32_t> outputs;
  std::vector<Constant> constants;
  std::vector<Op> ops;

  /// Checks slot indices, op arities and that every output is computed.
  void validate() const;
  std::vector<uint8_t> serialize() const;
  /// Parses and validates bytes from serialize(); throws kiln::sdk::Error
  /// naming what is wrong. Touches no device.
  static Program parse(const uint8_t* bytes, size_t size);

  /// What execute's inputs must be (float32, the recorded rank and dims),
  /// for a handle imported without a partition.
  std::vector<kiln::sdk::InputSpec> input_specs() const;

  /// Runs the ops on inputs the SDK has checked (count, dtype, shape, bytes),
  /// writes outputs into host memory from ctx.allocate_output, scratch from
  /// the host allocator.
  void run(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& inputs) const;
};

const char* op_name(OpKind k);

}  // namespace kiln_template
