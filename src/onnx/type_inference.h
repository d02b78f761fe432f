// Runs ONNX shape inference for the importer, on a copy of the model, with
// guards around libonnx 1.12 defects that crash (not throw) on models it
// does not expect. Internal to src/onnx.
#pragma once

#include <memory>

#include "onnx/graph_converter.h"
#include "onnx/onnx_pb.h"

namespace kiln::importer {

/// Returns a copy of `model` (large tensors without their data) after
/// onnx::shape_inference::InferShapes with check_type off, error_mode 0 and
/// data propagation on; or null when inference throws or cannot be run
/// safely, in which case the model's own declarations are the only types.
/// `model` is briefly changed (large tensor data moved out and back) while
/// it is copied.
/// `model` must already have passed the importer's structural checks (every
/// name a node reads is defined): libonnx dereferences unchecked pointers
/// otherwise.
///
/// Guards: a model with a node that does not fit its schema (input/output
/// counts, required attributes, attribute types; Scan without body or
/// num_scan_inputs crashes libonnx) is not inferred. Data propagation of Shape-15
/// crashes when the input has no type at all, so when the model has Shape
/// nodes it is first inferred without data propagation, and data
/// propagation runs only when every Shape input then has a type.
std::unique_ptr<onnx::ModelProto> infer_types(onnx::ModelProto& model, const OpsetMap& opsets);

/// Checks every node of `g` (and its subgraphs) whose op has an ONNX schema at
/// the model's opset: input and output counts, required inputs given
/// (non-empty names), required attributes present, attribute types. Errors
/// name the node and what is wrong; kernels may then rely on them.
Status check_schemas(const onnx::GraphProto& g, const OpsetMap& opsets);
Status check_node_schema(const onnx::NodeProto& n, const OpsetMap& opsets);

struct OpVersion;
/// Kiln's own schema data for `n` (op_versions.h) when it decides: the op
/// version the model's opset selects is newer than what libonnx knows, or
/// libonnx lacks the op. Null when libonnx's schema (or none) applies.
const OpVersion* kiln_op_version(const onnx::NodeProto& n, const OpsetMap& opsets);

}  // namespace kiln::importer
