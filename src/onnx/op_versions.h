// Kiln's own schema data for ONNX op versions that Debian's libonnx (ONNX
// 1.12, opsets up to 17) does not know: input/output counts and attributes
// of every op version from opset 18 on whose signature differs from the
// version libonnx would pick in its place, plus ops libonnx lacks.
//
// libonnx stays the source for what it knows. Where a model's opset selects
// a version listed here that is newer than libonnx's, this data decides:
// the importer checks the node against it, and libonnx's shape inference
// does not see the node (it would apply the older version's inference, e.g.
// ReduceMean-13 ignoring the axes input); Kiln's own inference
// (op_version_infer.cpp) types its outputs where it can, so the static
// memory plan still covers them.
#pragma once

#include <span>
#include <string_view>

namespace kiln::importer {

enum class AttrKind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph };

struct OpAttr {
  const char* name;
  AttrKind kind;
  bool required = false;
};

inline constexpr int kVariadic = 1 << 30;

struct OpVersion {
  const char* domain;  // "" for ai.onnx
  const char* op_type;
  int since_version;
  int min_inputs, max_inputs;
  int min_outputs, max_outputs;
  std::span<const OpAttr> attributes;
  // The formal names of the required inputs, comma-separated: exactly the
  // first min_inputs inputs (no listed version has a required input after
  // an optional one, nor variadic inputs), so none of them may be given as
  // an empty name.
  const char* required_inputs = "";
};

/// Every listed op version (for tests of the table itself).
std::span<const OpVersion> op_versions();

/// The formal name of required input `i` of `v` ("" when out of range).
std::string_view required_input_name(const OpVersion& v, int i);

/// The newest listed version of `op` with since_version <= `opset`; null
/// when none is listed (then libonnx's schema, if any, applies).
const OpVersion* find_op_version(std::string_view domain, std::string_view op, int opset);

}  // namespace kiln::importer
