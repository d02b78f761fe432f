// One compiled_execute call through the backend ABI, with the template plugin
// (backends/template) on a one-node partition, z = x + y on float32[1, W].
//
//   BM_PluginExecuteRaw:    the C call alone: api.compiled_execute(handle,
//                           ctx, inputs) with the host's real execute context
//                           (exec_allocate_output into a preallocated tensor)
//   BM_PluginExecuteHost:   the same through the host wrapper
//                           (runtime::CompiledPartition::execute: status
//                           conversion, serialization of non-reentrant handles)
//
// The plugin is loaded with dlopen exactly as sessions load it. W = 1 keeps
// the Add itself negligible, so the time is the cost of crossing the ABI.
#include <benchmark/benchmark.h>

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

#include "onnx/importer.h"
#include "runtime/backends/graph_view.h"
#include "runtime/backends/host.h"
#include "runtime/backends/plugin.h"

namespace kiln::bench {

namespace {

std::string add_model(int width) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("add");
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* v = g->add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(1);
    t->mutable_shape()->add_dim()->set_dim_value(width);
  }
  onnx::ValueInfoProto* z = g->add_output();
  z->set_name("z");
  auto* t = z->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_value(1);
  t->mutable_shape()->add_dim()->set_dim_value(width);
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Add");
  n->set_name("add");
  n->add_input("x");
  n->add_input("y");
  n->add_output("z");
  return m.SerializeAsString();
}

// Output memory allocated once: the benchmark measures the call, not malloc.
class FixedOutputs final : public runtime::ExecOutputs {
 public:
  explicit FixedOutputs(Tensor t) : tensor_(std::move(t)) {}
  size_t num_outputs() const override { return 1; }
  Result<Tensor*> allocate(size_t index, DType dtype, const Shape& shape) override {
    if (index != 0 || dtype != tensor_.dtype() || shape != tensor_.shape())
      return invalid_argument("the benchmark's output is float32", tensor_.shape().to_string());
    return &tensor_;
  }

 private:
  Tensor tensor_;
};

// Everything one benchmark needs, set up once per benchmark run.
struct Fixture {
  ir::Model model;
  std::unique_ptr<kiln_graph> view;
  std::shared_ptr<runtime::CompiledPartition> compiled;
  std::vector<Tensor> inputs;
  std::vector<kiln_tensor_t> views;
  std::vector<const kiln_tensor_t*> pointers;
  std::unique_ptr<FixedOutputs> outputs;
  kiln_exec_context ctx;
};

Result<std::unique_ptr<Fixture>> make_fixture(int width) {
  auto f = std::make_unique<Fixture>();
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::LoadedPlugin> plugin,
                        runtime::LoadedPlugin::load(KILN_TEMPLATE_PLUGIN_PATH));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::BackendInstance> instance, plugin->create_instance(0, {}));
  const std::string bytes = add_model(width);
  KILN_ASSIGN_OR_RETURN(f->model, importer::import_model_bytes(
                                      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                               bytes.size())));
  const ir::Graph& g = f->model.graph;
  const int32_t offered[] = {0};
  f->view = runtime::make_graph_view(g, nullptr, offered, {});
  KILN_ASSIGN_OR_RETURN(runtime::Capability cap, instance->get_capability(f->view.get()));
  if (cap.groups.size() != 1) return internal_error("the template plugin did not claim the Add node");

  std::vector<const kiln_value_t*> in_values, out_values;
  for (ir::ValueId id : g.inputs) in_values.push_back(&f->view->values[static_cast<size_t>(id)]);
  for (ir::ValueId id : g.outputs) out_values.push_back(&f->view->values[static_cast<size_t>(id)]);
  const size_t nodes[] = {0};
  kiln_partition_t partition{};
  partition.struct_size = sizeof(partition);
  partition.id = "template:bench_add";
  partition.num_nodes = 1;
  partition.nodes = nodes;
  partition.num_inputs = in_values.size();
  partition.inputs = in_values.data();
  partition.num_outputs = out_values.size();
  partition.outputs = out_values.data();
  KILN_ASSIGN_OR_RETURN(f->compiled, instance->compile(f->view.get(), partition));

  const Shape shape{1, width};
  for (int i = 0; i < 2; ++i) {
    Tensor t = Tensor::allocate(DType::kFloat32, shape);
    for (int64_t j = 0; j < t.numel(); ++j) t.data<float>()[j] = static_cast<float>(i + j);
    f->inputs.push_back(std::move(t));
  }
  f->views.resize(f->inputs.size());
  for (size_t i = 0; i < f->inputs.size(); ++i) {
    KILN_RETURN_IF_ERROR(runtime::tensor_view(f->inputs[i], &f->views[i]));
    f->pointers.push_back(&f->views[i]);
  }
  f->outputs = std::make_unique<FixedOutputs>(Tensor::allocate(DType::kFloat32, shape));
  f->ctx.outputs = f->outputs.get();
  f->ctx.pool = nullptr;
  return f;
}

void BM_PluginExecuteRaw(benchmark::State& state) {
  Result<std::unique_ptr<Fixture>> f = make_fixture(static_cast<int>(state.range(0)));
  if (!f.ok()) {
    state.SkipWithError(("template plugin setup failed: " + f.status().message()).c_str());
    return;
  }
  const kiln_backend_api_t& api = (*f)->compiled->instance().plugin().api();
  kiln_compiled_t* handle = (*f)->compiled->handle();
  for (auto _ : state) {
    kiln_status_t* status = api.compiled_execute(handle, &(*f)->ctx, (*f)->pointers.data(), (*f)->pointers.size());
    if (status) {
      state.SkipWithError(runtime::take_status(status, "compiled_execute").message().c_str());
      break;
    }
  }
  benchmark::DoNotOptimize((*f)->outputs.get());
}
BENCHMARK(BM_PluginExecuteRaw)->ArgName("width")->Arg(1)->Arg(64);

void BM_PluginExecuteHost(benchmark::State& state) {
  Result<std::unique_ptr<Fixture>> f = make_fixture(static_cast<int>(state.range(0)));
  if (!f.ok()) {
    state.SkipWithError(("template plugin setup failed: " + f.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    Status s = (*f)->compiled->execute(&(*f)->ctx, (*f)->pointers.data(), (*f)->pointers.size());
    if (!s.is_ok()) {
      state.SkipWithError(s.message().c_str());
      break;
    }
  }
  benchmark::DoNotOptimize((*f)->outputs.get());
}
BENCHMARK(BM_PluginExecuteHost)->ArgName("width")->Arg(1)->Arg(64);

}  // namespace

}  // namespace kiln::bench
