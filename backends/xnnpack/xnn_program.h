// What the XNNPACK plugin compiles a partition into, before XNNPACK sees it:
// values with the shapes XNNPACK uses (4-D tensors in NHWC), constants
// already transformed (filters repacked, BatchNormalization folded,
// broadcast constants permuted to NHWC), and a list of ops with their
// parameters. The runtime (xnn_runtime.h) turns it into XNNPACK subgraphs;
// export writes it out and import reads it back, so an imported partition
// rebuilds without the ONNX model.
//
// Byte format (little-endian), version 1:
//   "KXNN" u32 version
//   u32 n_values  { u32 rank, i64 dims[rank], i32 constant (-1: none) }
//   u32 n_consts  { u64 numel, f32 data[numel] }
//   u32 n_inputs  { u32 value, u8 nchw }
//   u32 n_outputs { u32 value, u8 nchw }
//   u32 n_ops     { u8 kind, u32 n_in, u32 in[n_in], u32 out, u32 n_i, i64 ints[n_i], u32 n_f, f32 floats[n_f] }
//   u32 fnv1a32 of every byte before it
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln_xnnpack {

constexpr uint32_t kNoValue = UINT32_MAX;
constexpr uint32_t kFormatVersion = 2;  // 2: checksum32 instead of byte-wise FNV-1a

enum class OpKind : uint8_t {
  kConv = 0,       // in {x, filter, bias|none}; ints {pt, pr, pb, pl, kh, kw, sh, sw, dh, dw, groups, gic, goc}; floats {min, max}
  kDepthwise,      // in {x, filter, bias|none}; ints {pt, pr, pb, pl, kh, kw, sh, sw, dh, dw, multiplier, channels}; floats {min, max}
  kFullyConnected, // in {x, filter [N, K], bias|none}; floats {min, max}
  kMaxPool,        // ints {pt, pr, pb, pl, kh, kw, sh, sw, dh, dw}; floats {min, max}
  kAveragePool,    // ints {pt, pr, pb, pl, kh, kw, sh, sw}; floats {min, max}
  kGlobalAveragePool,  // floats {min, max}
  kAdd, kMul, kSub, kDiv,  // floats {min, max}
  kMax, kMin,
  kClamp,          // floats {min, max}
  kElu,            // floats {alpha}
  kLeakyRelu,      // floats {slope}
  kHardSwish, kSigmoid, kSoftmax, kAbs, kNeg, kSqrt, kFloor, kCeil,
  kPRelu,          // in {x, slope [C]}
  kReshape,        // ints {new dims}
  kPad,            // ints {pre[rank], post[rank]}; floats {value}
  kResize,         // ints {height, width, mode (kResize*)}
  kDepthToSpace,   // ints {block}
  kConcat,         // in {parts...}; ints {axis}: run by the plugin, not by XNNPACK
  kSiLU,           // x * sigmoid(x): run by the plugin (xnn_silu.h)
  kCount
};

// Resize coordinate modes (ints[2] of kResize).
constexpr int64_t kResizeHalfPixel = 0, kResizeAlignCorners = 1, kResizeAsymmetric = 2;

const char* op_name(OpKind k);
/// Ops that take an output clamp (floats {min, max}).
bool has_output_clamp(OpKind k);

struct ValueInfo {
  std::vector<int64_t> dims;  // as XNNPACK sees them (4-D: NHWC)
  int32_t constant = -1;      // index into Program::constants, or -1
};

struct Op {
  OpKind kind = OpKind::kClamp;
  std::vector<uint32_t> in;
  uint32_t out = kNoValue;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

struct Boundary {
  uint32_t value = kNoValue;
  bool nchw = false;  // the host's tensor is NCHW, the value NHWC: transpose at the boundary
};

struct Program {
  std::vector<ValueInfo> values;
  std::vector<std::vector<float>> constants;
  std::vector<Boundary> inputs;
  std::vector<Boundary> outputs;
  std::vector<Op> ops;

  uint32_t add_value(std::vector<int64_t> dims);
  uint32_t add_constant(std::vector<int64_t> dims, std::vector<float> data);
  /// The host's dims of a boundary value (NCHW when nchw).
  std::vector<int64_t> host_dims(const Boundary& b) const;
  /// Number of boundary values that need a layout transpose.
  size_t num_transposes() const;

  /// Checks indices, arities and that every value read is defined first.
  void validate() const;
  std::vector<uint8_t> serialize() const;
  /// Shape rules for ops the plugin runs itself or computes sizes from.
  void check_shapes(const Op& op) const;
  /// Parses and validates bytes from serialize(); throws kiln::sdk::Error
  /// naming what is wrong (bad magic, version, checksum, truncation).
  static Program parse(const uint8_t* bytes, size_t size);
};

int64_t numel(const std::vector<int64_t>& dims);

}  // namespace kiln_xnnpack
