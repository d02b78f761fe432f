#include "onednn_claims.h"

#include <oneapi/dnnl/dnnl_types.h>

#include <set>

namespace kiln_onednn {

using kiln::sdk::Node;
using kiln::sdk::TensorView;
using kiln::sdk::Value;

bool constant_scalar(const Value& v, float* out) {
  if (!v || !v.is_constant() || v.dtype() != KILN_DTYPE_FLOAT32) return false;
  TensorView t = v.constant();
  if (t.numel() != 1) return false;
  *out = t.as<float>()[0];
  return true;
}

bool constant_ints(const Value& v, std::vector<int64_t>* out) {
  if (!v || !v.is_constant()) return false;
  TensorView t = v.constant();
  out->clear();
  if (t.dtype == KILN_DTYPE_INT64) out->assign(t.as<int64_t>(), t.as<int64_t>() + t.numel());
  else if (t.dtype == KILN_DTYPE_INT32) out->assign(t.as<int32_t>(), t.as<int32_t>() + t.numel());
  else return false;
  return true;
}

namespace {

const std::set<std::string>& eltwise_ops() {
  static const std::set<std::string> ops = {"Relu", "LeakyRelu", "Elu", "Sigmoid", "Tanh", "Exp", "Sqrt",
                                            "Abs", "Neg", "Softplus", "HardSwish", "Clip", "Erf", "Identity"};
  return ops;
}
const std::set<std::string>& binary_ops() {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
  return ops;
}
const std::set<std::string>& other_ops() {
  static const std::set<std::string> ops = {
      "Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
      "BatchNormalization", "Softmax", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Concat",
      "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"};
  return ops;
}

std::string check_tensor(const Value& v, const std::string& what) {
  if (!v) return what + " is omitted";
  if (v.kind() != KILN_VALUE_TENSOR) return what + " '" + v.name() + "' is not a tensor";
  if (v.dtype() != KILN_DTYPE_FLOAT32)
    return what + " '" + v.name() + "' is " + kiln::sdk::dtype_name(v.dtype()) + "; oneDNN runs float32 only";
  if (!v.is_static()) return what + " '" + v.name() + "' has a dynamic shape; the oneDNN backend needs static shapes";
  if (v.rank() > DNNL_MAX_NDIMS) return what + " '" + v.name() + "' has rank " + std::to_string(v.rank());
  return "";
}

std::string check_conv(const Node& n, bool transpose) {
  if (n.input(0).rank() != 4) return n.op_type() + " on rank " + std::to_string(n.input(0).rank()) + " (only 2-D images, rank 4)";
  if (!n.input(1) || !n.input(1).is_constant()) return n.op_type() + " with non-constant weights";
  if (n.num_inputs() > 2 && n.input(2) && !n.input(2).is_constant()) return n.op_type() + " with a non-constant bias";
  std::string pad = n.attr_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return n.op_type() + " with auto_pad " + pad;
  if (transpose && n.find_attribute("output_shape")) return "ConvTranspose with output_shape";
  return "";
}

std::string check_pool(const Node& n) {
  const std::string op = n.op_type();
  if (n.input(0).rank() != 4) return op + " on rank " + std::to_string(n.input(0).rank()) + " (only 2-D images, rank 4)";
  if (op.rfind("Global", 0) == 0) return "";
  if (n.num_outputs() > 1 && n.output(1)) return "MaxPool with the Indices output";
  std::string pad = n.attr_string("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return op + " with auto_pad " + pad;
  if (n.attr_int("storage_order", 0) != 0) return "MaxPool with storage_order 1";
  if (op == "AveragePool" && n.attr_int("ceil_mode", 0) && n.attr_int("count_include_pad", 0))
    return "AveragePool with ceil_mode and count_include_pad";
  return "";
}

std::string check_binary(const Node& n) {
  const std::string op = n.op_type();
  if (op == "Pow") {
    float e;
    if (!constant_scalar(n.input(1), &e)) return "Pow with a non-constant or non-scalar exponent";
    return "";
  }
  // oneDNN broadcasts the second operand only; Add/Mul/Max/Min are swapped as needed.
  const bool commutative = op != "Sub" && op != "Div";
  std::vector<int64_t> a = n.input(0).dims(), b = n.input(1).dims(), y = n.output(0).dims();
  if (a != y && b != y) return op + " where neither input has the output's shape (both broadcast)";
  if (!commutative && a != y) return op + " broadcasting its first input";
  return "";
}

std::string check_misc(const Node& n) {
  const std::string op = n.op_type();
  if (op == "Gemm") {
    if (n.attr_float("alpha", 1.f) != 1.f) return "Gemm with alpha != 1";
    if (n.num_inputs() > 2 && n.input(2) && !n.input(2).is_constant()) return "Gemm with a non-constant C";
  } else if (op == "MatMul") {
    if (n.input(0).rank() < 2 || n.input(1).rank() < 2) return "MatMul with a 1-D input";
  } else if (op == "BatchNormalization") {
    if (n.num_outputs() > 1 && n.output(1)) return "BatchNormalization in training mode";
    if (n.attr_int("training_mode", 0)) return "BatchNormalization in training mode";
    for (size_t i = 1; i < 5; ++i)
      if (!n.input(i) || !n.input(i).is_constant()) return "BatchNormalization with non-constant statistics";
  } else if (op == "Softmax") {
    int64_t r = n.input(0).rank(), axis = n.attr_int("axis", n.opset() >= 13 ? -1 : 1);
    if (n.opset() < 13 && axis != -1 && axis != r - 1) return "Softmax (opset < 13) over more than the last axis";
  } else if (op == "LayerNormalization") {
    int64_t r = n.input(0).rank(), axis = n.attr_int("axis", -1);
    if (axis != -1 && axis != r - 1) return "LayerNormalization over more than the last axis";
    for (size_t i = 1; i < n.num_inputs(); ++i)
      if (n.input(i) && !n.input(i).is_constant()) return "LayerNormalization with non-constant scale or bias";
    for (size_t i = 1; i < n.num_outputs(); ++i)
      if (n.output(i)) return "LayerNormalization with the Mean/InvStdDev outputs";
  } else if (op.rfind("Reduce", 0) == 0) {
    if (n.num_inputs() > 1) return op + " with axes as an input";
    if (n.attr_int("noop_with_empty_axes", 0)) return op + " with noop_with_empty_axes";
  } else if (op == "Clip") {
    float f;
    for (size_t i = 1; i < n.num_inputs(); ++i)
      if (n.input(i) && !constant_scalar(n.input(i), &f)) return "Clip with non-constant bounds";
  }
  return "";
}

}  // namespace

std::string decline_reason(const Node& n) {
  const std::string op = n.op_type();
  if (!n.domain().empty()) return "domain '" + n.domain() + "' is not supported by oneDNN";
  // oneDNN's jit log is an approximation: log(1) gives -1.4e-6, not 0.
  if (op == "Log") return "oneDNN's Log is approximate (log(1) = -1.4e-6); portable kernels are exact";
  // Its soft_relu loses precision for large negative inputs (ONNX 1.22's
  // test_mish_expanded: 832 of 10000 outputs off by more than 1e-3 relative).
  if (op == "Softplus") return "oneDNN's Softplus is approximate for inputs below about -8 (relative error > 1e-3)";
  if (!eltwise_ops().count(op) && !binary_ops().count(op) && !other_ops().count(op)) return "op " + op + " has no oneDNN primitive here";
  if (n.num_outputs() < 1 || !n.output(0)) return "the node has no output";
  if (std::string why = check_tensor(n.output(0), "output"); !why.empty()) return why;
  // Inputs that must be float32 tensors (shape/axes/bounds inputs are checked per op).
  size_t data_inputs = n.num_inputs();
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Clip") data_inputs = 1;
  if (op == "Concat") data_inputs = n.num_inputs();
  for (size_t i = 0; i < data_inputs; ++i) {
    if (!n.input(i) && i > 0) continue;
    if (std::string why = check_tensor(n.input(i), "input " + std::to_string(i)); !why.empty()) return why;
  }
  if (op == "Conv") return check_conv(n, false);
  if (op == "ConvTranspose") return check_conv(n, true);
  if (op.find("Pool") != std::string::npos) return check_pool(n);
  if (binary_ops().count(op)) return n.num_inputs() == 2 ? check_binary(n) : op + " with " + std::to_string(n.num_inputs()) + " inputs";
  return check_misc(n);
}

}  // namespace kiln_onednn
