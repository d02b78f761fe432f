// What the oneDNN backend compiles a partition into: a device-independent
// list of ops over numbered values (partition inputs, constants copied at
// compile, values computed inside), with fusions already applied (post-ops,
// LayerNorm and GELU patterns). onednn_plan.h turns it into oneDNN
// primitives for given input shapes and a thread count.
//
// Byte format (little-endian), version 2:
//   "KDNL" u32 version, str onednn_version, str isa, u8 winograd
//   u32 num_values { u32 rank, i64 dims[rank] }
//   u32 n_inputs  { i32 value }
//   u32 n_outputs { i32 value }
//   u32 n_consts  { i32 value, u32 rank, i64 dims[rank], f32 data[numel] }
//   u32 n_ops     { u8 kind, i32 alg, u32 n, i32 in[n], i32 out, u32 n, i64 ints[n],
//                   u32 n, f32 floats[n], u32 n, { u8 kind, i32 alg, f32 alpha, f32 beta, i32 value }[n] }
//   u32 checksum32 of every byte before it (onednn_program.cpp)
// (str: u32 length, bytes.) Import refuses a blob whose oneDNN version or
// ISA differs from the library loaded here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln_onednn {

enum class OpKind : uint8_t {
  kConv = 0,        // ints: group, strides[2], dilations[2], pads[4] (t,l,b,r); in: x, W, [B]
  kDeconv = 1,      // ConvTranspose; ints as kConv + output_padding[2]
  kMatMul = 2,      // in: A, B, [bias]; ints: transA, transB (Gemm), rank of result
  kPool = 3,        // alg max/avg; ints: kernel[2], strides[2], pads[4], global, count_include_pad
  kBatchNorm = 4,   // in: x, scale, bias, mean, var; floats: epsilon
  kEltwise = 5,     // alg + floats alpha, beta
  kBinary = 6,      // alg; in: a, b
  kSoftmax = 7,     // ints: axis (normalized)
  kTranspose = 8,   // ints: perm
  kReshape = 9,     // ints: output dims (0 / -1 resolved at build); Flatten/Squeeze/Unsqueeze/Identity
  kConcat = 10,     // ints: axis
  kLayerNorm = 11,  // in: x, [scale], [bias]; floats: epsilon (normalizes the last axis)
  kReduce = 12,     // alg; ints: keepdims, axes...
  kErf = 13,        // no oneDNN primitive: a plain loop
};

enum class PostKind : uint8_t { kEltwise = 0, kSum = 1, kBinary = 2 };

struct PostOp {
  PostKind kind = PostKind::kEltwise;
  int32_t alg = 0;
  float alpha = 0.f;
  float beta = 0.f;
  int32_t value = -1;  // kSum, kBinary: the other operand
};

struct Op {
  OpKind kind = OpKind::kEltwise;
  int32_t alg = 0;
  std::vector<int32_t> in;  // -1: omitted optional input
  int32_t out = -1;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<PostOp> post;
};

struct Constant {
  int32_t value = -1;
  std::vector<int64_t> dims;
  std::vector<float> data;
};

struct Program {
  std::string onednn_version;  // of the library that compiled it
  std::string isa;
  uint8_t winograd = 0;  // 0 off, 1 on, 2 auto
  uint32_t num_values = 0;
  std::vector<std::vector<int64_t>> dims;  // of every value (static shapes only)
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<Constant> constants;
  std::vector<Op> ops;

  /// Checks value indices, op arities and that every value is defined before use.
  void validate() const;
  void check_shapes(const Op& op, const std::string& what) const;
  std::vector<uint8_t> serialize() const;
  /// Parses and validates; throws kiln::sdk::Error naming the problem.
  static Program parse(const uint8_t* bytes, size_t size);
};

const char* op_name(OpKind k);

/// Why a program compiled for p.onednn_version / p.isa cannot run with the
/// library found here ("" when it can).
std::string target_mismatch(const Program& p, const std::string& version, const std::string& isa);

}  // namespace kiln_onednn
