// A harness to run one portable kernel in isolation (as TFLite Micro's
// kernel_runner): builds a one-node graph, makes the kernel through the
// registry, runs it with heap-allocated outputs. For kernel unit tests.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/registry.h"
#include "kiln/value.h"

namespace kiln::testing {

ir::Attribute attr(std::string name, int64_t v);
ir::Attribute attr(std::string name, int v);
ir::Attribute attr(std::string name, float v);
ir::Attribute attr(std::string name, std::string v);
ir::Attribute attr(std::string name, const char* v);
ir::Attribute attr(std::string name, std::vector<int64_t> v);
ir::Attribute attr(std::string name, std::vector<float> v);
ir::Attribute attr(std::string name, std::vector<std::string> v);
ir::Attribute attr(std::string name, Tensor v);

struct OpCall {
  std::string op_type;
  std::vector<Value> inputs;           // Value::none() for an omitted optional input
  std::vector<ir::Attribute> attrs;
  int opset = 17;
  size_t num_outputs = 1;
  std::string domain;
  bool inputs_are_constant = false;    // factories see inputs as initializers
  int threads = 1;
};

/// Runs the call; returns its outputs, or the error from the factory or compute
/// with the context the runtime adds ("node Op 'name': ").
Result<std::vector<Value>> run_op(const OpCall& call);

/// Shorthand: one output tensor.
Result<Tensor> run_op1(const std::string& op_type, std::vector<Value> inputs,
                       std::vector<ir::Attribute> attrs = {}, int opset = 17);

}  // namespace kiln::testing
