#include "runtime/backends/subgroup.h"

#include <algorithm>

#include "runtime/backends/graph_view.h"
#include "runtime/backends/guarded_outputs.h"

namespace kiln::runtime {

SubgroupRunner::SubgroupRunner(const Program& program)
    : program_(program), g_(program.graph()), producers_(program.graph().producers()) {
  const PlacementReport& rep = program.placement();
  folded_.assign(g_.nodes.size(), 0);
  for (size_t n = 0; n < g_.nodes.size() && n < rep.nodes.size(); ++n) folded_[n] = rep.nodes[n].placement == "folded";
  readers_.resize(g_.values.size());
  for (size_t n = 0; n < g_.nodes.size(); ++n) {
    if (folded_[n]) continue;
    for (ir::ValueId v : reads_of(g_.nodes[n], g_)) readers_[static_cast<size_t>(v)].push_back(static_cast<int32_t>(n));
  }
}

std::vector<int32_t> SubgroupRunner::nodes_of(const std::string& id) const {
  std::vector<int32_t> out;
  const PlacementReport& rep = program_.placement();
  for (size_t n = 0; n < rep.nodes.size() && n < g_.nodes.size(); ++n)
    if (rep.nodes[n].partition == id) out.push_back(static_cast<int32_t>(n));
  return out;
}

const PartitionKernel* SubgroupRunner::kernel_of(const std::string& id) const {
  for (const Step& s : program_.steps()) {
    auto* k = dynamic_cast<const PartitionKernel*>(s.kernel.get());
    if (k && k->node()->name == id) return k;
  }
  return nullptr;
}

std::string SubgroupRunner::producer_label(ir::ValueId v) const {
  const int32_t p = v == ir::kNoValue ? -1 : producers_[static_cast<size_t>(v)];
  return p < 0 ? std::string() : g_.nodes[static_cast<size_t>(p)].label();
}

Status SubgroupRunner::gather_inputs(const std::vector<ir::ValueId>& ids, const ValuesByName& values,
                                     std::vector<Tensor>* tensors) const {
  for (ir::ValueId v : ids) {
    auto it = values.find(g_.value_name(v));
    if (it == values.end()) return not_found("no reference value for partition input '", g_.value_name(v), "'");
    tensors->push_back(it->second);
  }
  return Status::ok();
}

GroupRun SubgroupRunner::execute(const CompiledPartition& cp, const std::vector<ir::ValueId>& inputs,
                                 std::vector<ir::ValueId> outputs, const ValuesByName& values) const {
  GroupRun run;
  run.outputs = std::move(outputs);
  std::vector<Tensor> in;
  run.status = gather_inputs(inputs, values, &in);
  if (!run.status.is_ok()) return run;
  std::vector<kiln_tensor_t> views(in.size());
  std::vector<const kiln_tensor_t*> ptrs(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    run.status = tensor_view(in[i], &views[i]);
    if (!run.status.is_ok()) return run;
    ptrs[i] = &views[i];
  }
  GuardedOutputs outs(run.outputs.size());
  kiln_exec_context ec;
  ec.outputs = &outs;
  run.status = cp.execute(&ec, ptrs.data(), ptrs.size());
  std::vector<std::string> names;
  for (ir::ValueId v : run.outputs) {
    const std::string producer = producer_label(v);
    names.push_back("'" + g_.value_name(v) + "'" + (producer.empty() ? "" : " (of " + producer + ")"));
  }
  if (std::string damage = outs.guard_damage(names); !damage.empty()) {
    run.status = internal_error(cp.instance().plugin().label(), " wrote outside its output buffers: ", damage);
  }
  if (!run.status.is_ok()) return run;
  run.tensors = outs.take();
  for (size_t i = 0; i < run.tensors.size(); ++i) {
    if (!run.tensors[i].defined()) {
      run.status = internal_error(cp.instance().plugin().label(), " returned OK without producing output ", i, " '",
                                  g_.value_name(run.outputs[i]), "'");
      run.tensors.clear();
      break;
    }
  }
  return run;
}

GroupRun SubgroupRunner::run_partition(const PartitionKernel& pk, const ValuesByName& values) const {
  return execute(pk.compiled(), pk.node()->inputs, pk.node()->outputs, values);
}

GroupRun SubgroupRunner::run_subgroup(BackendInstance& instance, const std::vector<int32_t>& nodes,
                                      const ValuesByName& values) const {
  std::vector<int8_t> in(g_.nodes.size(), 0);
  for (int32_t n : nodes) in[static_cast<size_t>(n)] = 1;
  std::vector<int8_t> graph_output(g_.values.size(), 0);
  for (ir::ValueId v : g_.outputs) graph_output[static_cast<size_t>(v)] = 1;
  std::vector<ir::ValueId> inputs, outputs;
  for (int32_t n : nodes) {
    for (ir::ValueId v : reads_of(g_.nodes[static_cast<size_t>(n)], g_)) {
      const int32_t p = producers_[static_cast<size_t>(v)];
      if ((p >= 0 && in[static_cast<size_t>(p)]) || program_.constants().count(v)) continue;
      if (std::find(inputs.begin(), inputs.end(), v) == inputs.end()) inputs.push_back(v);
    }
    for (ir::ValueId v : g_.nodes[static_cast<size_t>(n)].outputs) {
      if (v == ir::kNoValue) continue;
      bool needed = graph_output[static_cast<size_t>(v)] || n == nodes.back();
      for (int32_t r : readers_[static_cast<size_t>(v)]) needed |= !in[static_cast<size_t>(r)];
      if (needed) outputs.push_back(v);
    }
  }
  // The plugin is offered only the sub-group; every other node that runs is
  // hidden (what it reads counts as read outside the view).
  std::vector<int32_t> hidden;
  for (size_t n = 0; n < g_.nodes.size(); ++n)
    if (!folded_[n] && !in[n]) hidden.push_back(static_cast<int32_t>(n));
  std::unique_ptr<kiln_graph> view = make_graph_view(g_, &program_.constants(), nodes, hidden);
  std::vector<size_t> view_nodes;
  for (int32_t n : nodes) view_nodes.push_back(static_cast<size_t>(view->view_index[static_cast<size_t>(n)]));
  std::vector<const kiln_value_t*> in_ptrs, out_ptrs;
  for (ir::ValueId v : inputs) in_ptrs.push_back(&view->values[static_cast<size_t>(v)]);
  for (ir::ValueId v : outputs) out_ptrs.push_back(&view->values[static_cast<size_t>(v)]);
  const std::string id = "kiln_verify:subgroup";
  kiln_partition_t desc{};
  desc.struct_size = sizeof(desc);
  desc.id = id.c_str();
  desc.num_nodes = view_nodes.size();
  desc.nodes = view_nodes.data();
  desc.num_inputs = in_ptrs.size();
  desc.inputs = in_ptrs.data();
  desc.num_outputs = out_ptrs.size();
  desc.outputs = out_ptrs.data();
  Result<std::shared_ptr<CompiledPartition>> compiled = instance.compile(view.get(), desc);
  if (!compiled.is_ok()) {
    GroupRun run;
    run.outputs = outputs;
    run.status = make_status(compiled.status().code(), "compile of a sub-group of ", nodes.size(), " nodes: ",
                             compiled.status().message());
    return run;
  }
  return execute(**compiled, inputs, outputs, values);
}

}  // namespace kiln::runtime
