#include "kernels/testing/kernel_runner.h"
#include "kernels/testing/static_runner.h"
#include "kernels/heap_allocator.h"
#include "kernels/static_call.h"

#include <memory>

namespace kiln::testing {

#define KILN_ATTR_(Type, kind, field)                      \
  ir::Attribute attr(std::string name, Type v) {            \
    ir::Attribute a;                                        \
    a.name = std::move(name);                               \
    a.type = ir::AttrType::kind;                            \
    a.field = std::move(v);                                 \
    return a;                                               \
  }
KILN_ATTR_(int64_t, kInt, i)
KILN_ATTR_(float, kFloat, f)
KILN_ATTR_(std::string, kString, s)
KILN_ATTR_(std::vector<int64_t>, kInts, ints)
KILN_ATTR_(std::vector<float>, kFloats, floats)
KILN_ATTR_(std::vector<std::string>, kStrings, strings)
KILN_ATTR_(Tensor, kTensor, t)
#undef KILN_ATTR_
ir::Attribute attr(std::string name, int v) { return attr(std::move(name), static_cast<int64_t>(v)); }
ir::Attribute attr(std::string name, const char* v) { return attr(std::move(name), std::string(v)); }

namespace {

ir::ValueType type_of(const Value& v) {
  ir::ValueType t;
  if (v.is_tensor()) {
    std::vector<ir::Dim> dims;
    for (int64_t d : v.tensor().shape()) dims.push_back(ir::Dim{d, {}});
    return ir::ValueType::tensor(v.tensor().dtype(), std::move(dims));
  }
  if (v.is_sequence()) {
    t.kind = ir::ValueType::Kind::kSequence;
    t.elem = std::make_shared<ir::ValueType>();
    t.elem->kind = ir::ValueType::Kind::kTensor;
    t.elem->dtype = v.elem_dtype();
  }
  return t;
}

// Binds `kernel` to the inputs and to compute()'s outputs `reference`, and
// runs the static call on new outputs of the same dtypes and shapes.
Result<std::vector<Value>> run_static(const kernels::Kernel& kernel, const std::vector<Value>& inputs,
                                      const std::vector<Value>& reference, ThreadPool* pool) {
  const auto* callable = dynamic_cast<const kernels::StaticCallable*>(&kernel);
  if (!callable) return not_found("the kernel has no static calls");
  std::vector<kernels::TensorSig> ins(inputs.size()), outs(reference.size());
  std::vector<const void*> in_ptrs(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_tensor()) continue;
    ins[i] = {inputs[i].tensor().dtype(), inputs[i].tensor().shape()};
    in_ptrs[i] = inputs[i].tensor().raw_data();
  }
  std::vector<Value> outputs(reference.size());
  std::vector<void*> out_ptrs(reference.size(), nullptr);
  for (size_t i = 0; i < reference.size(); ++i) {
    if (!reference[i].is_tensor()) return not_found("output ", i, " is not a tensor");
    outs[i] = {reference[i].tensor().dtype(), reference[i].tensor().shape()};
    outputs[i] = Value(Tensor::allocate(outs[i].dtype, outs[i].shape));
    out_ptrs[i] = outputs[i].tensor().raw_data();
  }
  kernels::StaticCall bound;
  if (!callable->bind_static(kernels::StaticSignature{ins, outs}, &bound))
    return not_found("no static call for these shapes");
  bound.fn(bound, kernels::StaticArgs{in_ptrs.data(), out_ptrs.data(), pool});
  return outputs;
}

// run_op, or with `static_call` run_op_static.
Result<std::vector<Value>> run_op_impl(const OpCall& call, bool static_call) {
  ir::Graph g;
  g.opsets[call.domain] = call.opset;
  ir::Node node;
  node.op_type = call.op_type;
  node.domain = call.domain;
  node.opset = call.opset;
  node.name = "test_" + call.op_type;
  node.attributes = call.attrs;
  std::vector<kernels::InputInfo> infos(call.inputs.size());
  std::vector<ir::ValueType> types(call.inputs.size());
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    if (call.inputs[i].is_none() && !call.inputs_are_constant) {
      node.inputs.push_back(ir::kNoValue);
      continue;
    }
    types[i] = type_of(call.inputs[i]);
    ir::ValueId id = g.add_value("in" + std::to_string(i), types[i]);
    node.inputs.push_back(id);
    infos[i].type = &types[i];
    if (call.inputs_are_constant && call.inputs[i].is_tensor()) infos[i].constant = &call.inputs[i].tensor();
  }
  for (size_t i = 0; i < call.num_outputs; ++i) node.outputs.push_back(g.add_value("out" + std::to_string(i)));

  std::vector<DType> dtypes;
  for (const Value& v : call.inputs) dtypes.push_back(v.is_tensor() ? v.tensor().dtype() : DType::kUndefined);
  std::string why;
  const kernels::KernelDef* def =
      kernels::portable_registry().find(call.domain, call.op_type, call.opset, dtypes, &why);
  if (!def) return not_found(why);
  kernels::KernelInit init{node, g, infos, call.opset};
  // Errors get the context the runtime gives them ("node Op 'name': ").
  const std::string context = "node " + node.label();
  auto made = def->factory(init);
  if (!made.ok()) return std::move(made).status().with_context(context);
  std::unique_ptr<kernels::Kernel> kernel = std::move(made).value();

  std::vector<const Value*> in_ptrs;
  for (size_t i = 0; i < call.inputs.size(); ++i)
    in_ptrs.push_back(call.inputs[i].is_none() ? nullptr : &call.inputs[i]);
  std::vector<Value> outputs(call.num_outputs);
  std::vector<Value*> out_ptrs;
  for (Value& v : outputs) out_ptrs.push_back(&v);
  kernels::HeapAllocator alloc;
  std::unique_ptr<ThreadPool> pool;
  if (call.threads > 1) pool = std::make_unique<ThreadPool>(call.threads);
  kernels::KernelContext ctx(node, in_ptrs.data(), in_ptrs.size(), out_ptrs.data(), out_ptrs.size(), &alloc,
                             pool.get(), nullptr);
  Status st = kernel->compute(ctx);
  if (!st.is_ok()) return std::move(st).with_context(context);
  // Outputs that alias inputs must not outlive the call's inputs: copy them.
  for (Value& v : outputs)
    if (v.is_tensor() && !v.tensor().owns_memory()) v = Value(v.tensor().clone());
  if (static_call) return run_static(*kernel, call.inputs, outputs, pool.get());
  return outputs;
}

}  // namespace

Result<std::vector<Value>> run_op(const OpCall& call) { return run_op_impl(call, false); }
Result<std::vector<Value>> run_op_static(const OpCall& call) { return run_op_impl(call, true); }

Result<Tensor> run_op1(const std::string& op_type, std::vector<Value> inputs, std::vector<ir::Attribute> attrs,
                       int opset) {
  OpCall call;
  call.op_type = op_type;
  call.inputs = std::move(inputs);
  call.attrs = std::move(attrs);
  call.opset = opset;
  KILN_ASSIGN_OR_RETURN(std::vector<Value> out, run_op(call));
  if (out.empty() || !out[0].is_tensor()) return internal_error(op_type, " produced no tensor output");
  return std::move(out[0].tensor());
}

}  // namespace kiln::testing
