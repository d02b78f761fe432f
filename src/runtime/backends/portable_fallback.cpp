#include "runtime/backends/portable_fallback.h"

#include <unordered_map>

#include "ir/subgraphs.h"
#include "kernels/heap_allocator.h"
#include "runtime/program.h"

namespace kiln::runtime {
namespace {

}  // namespace

std::unique_ptr<PortableFallback> PortableFallback::make(const ir::Graph& g, const ConstantMap& constants,
                                                         const std::vector<int32_t>& nodes,
                                                         const kernels::KernelRegistry& registry,
                                                         std::vector<ir::ValueId> inputs,
                                                         std::vector<ir::ValueId> outputs) {
  std::unique_ptr<PortableFallback> f(new PortableFallback(g, registry));
  for (int32_t ni : nodes) {
    const ir::Node& n = g.nodes[static_cast<size_t>(ni)];
    if (ir::has_subgraph(n)) return nullptr;
    const NodeInputs in = describe_inputs(n, g, constants);
    if (!registry.find(n.domain, n.op_type, n.opset, in.dtypes, nullptr)) return nullptr;
    for (ir::ValueId v : n.inputs) {
      auto it = v == ir::kNoValue ? constants.end() : constants.find(v);
      if (it != constants.end()) f->constants_.emplace(v, it->second);
    }
    f->nodes_.push_back(&n);
  }
  f->inputs_ = std::move(inputs);
  f->outputs_ = std::move(outputs);
  return f;
}

Status PortableFallback::make_kernels() const {
  std::call_once(made_, [&] {
    for (const ir::Node* n : nodes_) {
      const NodeInputs in = describe_inputs(*n, g_, constants_);
      std::string why;
      const kernels::KernelDef* def = registry_.find(n->domain, n->op_type, n->opset, in.dtypes, &why);
      if (!def) {
        made_status_ = unimplemented("node ", n->label(), ": ", why);
        return;
      }
      kernels::KernelInit init{*n, g_, in.infos, n->opset};
      auto k = def->factory(init);
      if (!k.is_ok()) {
        made_status_ = std::move(k).status().with_context("node " + n->label());
        return;
      }
      kernels_.push_back(std::move(k).value());
    }
  });
  return made_status_.clone();
}

Status PortableFallback::run(kernels::KernelContext& ctx) const {
  KILN_RETURN_IF_ERROR(make_kernels());
  std::unordered_map<ir::ValueId, Value> slots;  // element addresses stay valid as it grows
  for (const auto& [id, t] : constants_) slots[id] = Value(t);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const Value* v = ctx.input_value(i);
    if (!v) return internal_error("fallback: partition input ", i, " is missing");
    slots[inputs_[i]] = *v;
  }
  kernels::HeapAllocator alloc;
  std::vector<const Value*> in;
  std::vector<Value*> out;
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const ir::Node& n = *nodes_[k];
    in.clear();
    out.clear();
    for (ir::ValueId v : n.inputs) in.push_back(v == ir::kNoValue ? nullptr : &slots[v]);
    for (ir::ValueId v : n.outputs) out.push_back(v == ir::kNoValue ? nullptr : &slots[v]);
    kernels::KernelContext node_ctx(n, in.data(), in.size(), out.data(), out.size(), &alloc, ctx.pool(),
                                    ctx.subgraphs());
    node_ctx.set_run_options(ctx.run_options());
    KILN_RETURN_IF_ERROR(compute_guarded(*kernels_[k], node_ctx).with_context("node " + n.label()));
  }
  for (size_t i = 0; i < outputs_.size(); ++i) ctx.set_output_value(i, std::move(slots[outputs_[i]]));
  return Status::ok();
}

}  // namespace kiln::runtime
