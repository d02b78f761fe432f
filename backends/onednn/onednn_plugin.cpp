// The oneDNN backend plugin: runs float32 convolutions, matmuls, pooling,
// normalizations and element-wise ops with oneDNN 2.x, loaded lazily with
// dlopen (dnnl_api.h), so the plugin loads and registers everywhere and is
// available where libdnnl.so.2 is installed. See README.md in this folder.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dnnl_api.h"
#include "kiln/c/backend_sdk.hpp"
#include "onednn_claims.h"
#include "onednn_lower.h"
#include "onednn_plan.h"
#include "onednn_program.h"

namespace kiln_onednn {

using kiln::sdk::Capability;
using kiln::sdk::Compiled;
using kiln::sdk::ExecContext;
using kiln::sdk::fail;
using kiln::sdk::Graph;
using kiln::sdk::Inputs;
using kiln::sdk::Instance;
using kiln::sdk::Options;
using kiln::sdk::OptionSpec;
using kiln::sdk::Partition;
using kiln::sdk::Plugin;

namespace {

void require_library() {
  if (!dnnl_api()) fail(KILN_STATUS_UNAVAILABLE, dnnl_unavailable_reason());
}

// Refuses a program built for another oneDNN version or ISA.
void check_target(const Program& p) {
  require_library();
  std::string why = target_mismatch(p, dnnl_version_string(), dnnl_isa_string());
  if (!why.empty()) fail(KILN_STATUS_INVALID_ARGUMENT, why);
}

class OnednnCompiled final : public Compiled {
 public:
  explicit OnednnCompiled(Program program) : program_(std::move(program)) {}

  void execute(ExecContext& ctx, const Inputs& inputs) override { plan(ctx.num_threads()).execute(ctx, inputs); }
  size_t num_inputs() const override { return program_.inputs.size(); }
  size_t num_outputs() const override { return program_.outputs.size(); }
  // Plans own their intermediate buffers: one execute at a time per handle.
  kiln_concurrency_t concurrency() const override { return KILN_CONCURRENCY_SERIAL; }
  std::vector<uint8_t> export_bytes() const override { return program_.serialize(); }

  /// The plan for `threads` (built on first use; compile builds the one-thread plan).
  Plan& plan(int threads) {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<Plan>& p = plans_[threads];
    if (!p) p = std::make_unique<Plan>(program_, threads);
    return *p;
  }

 private:
  Program program_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<Plan>> plans_;
};

uint8_t winograd_mode(const std::string& s) {
  if (s == "off") return 0;
  if (s == "on") return 1;
  if (s == "auto") return 2;
  fail(KILN_STATUS_INVALID_ARGUMENT, "option 'winograd' must be auto, on or off, got '" + s + "'");
}

class OnednnInstance final : public Instance {
 public:
  using Instance::Instance;

  void get_capability(const Graph& graph, Capability& cap) override {
    // Connected supported nodes form one group, so layouts stay blocked across it.
    cap.add_connected_groups(graph, cap.decline_unsupported(graph, decline_reason));
  }

  std::unique_ptr<Compiled> compile(const Graph& graph, const Partition& part) override {
    require_library();
    Program prog = lower_partition(graph, part);
    prog.onednn_version = dnnl_version_string();
    prog.isa = dnnl_isa_string();
    prog.winograd = winograd_mode(options_.get("winograd"));
    auto c = std::make_unique<OnednnCompiled>(std::move(prog));
    Plan& plan = c->plan(1);  // primitives are created now, not on the first run
    if (options_.get_bool("verbose")) {
      std::string s;
      for (const std::string& i : plan.implementations()) s += " " + i;
      graph.host().log(KILN_LOG_INFO, "onednn compiled " + part.id + ":" + s);
    }
    return c;
  }

  std::unique_ptr<Compiled> import_compiled(const uint8_t* bytes, size_t size) override {
    Program prog = Program::parse(bytes, size);
    check_target(prog);
    std::vector<kiln::sdk::InputSpec> specs;  // no partition here: the program's static input shapes
    for (int32_t v : prog.inputs)
      specs.push_back({"", KILN_DTYPE_FLOAT32, static_cast<int64_t>(prog.dims[static_cast<size_t>(v)].size()),
                       prog.dims[static_cast<size_t>(v)], KILN_MEMORY_HOST});
    auto c = std::make_unique<OnednnCompiled>(std::move(prog));
    c->set_input_specs(std::move(specs));
    c->plan(1);
    return c;
  }
};

class OnednnPlugin final : public Plugin {
 public:
  // plugin_release: the host is done with every instance and partition. End
  // the OpenMP pool oneDNN started from this thread, so no worker outlives the
  // plugin (clang 14's LeakSanitizer also crashes at exit on a live libgomp
  // worker's dynamic TLS).
  ~OnednnPlugin() override { dnnl_end_worker_threads(); }

  Info info() const override {
    Info i;
    i.name = "onednn";
    i.version = "1.0.0";
    i.vendor = "Kiln project";
    i.vendor_sdk_version = dnnl_api() ? "oneDNN " + dnnl_version_string() + " (" + dnnl_isa_string() + ")" : "";
    i.description = "oneDNN 2.x (loaded with dlopen): Conv with fused post-ops, MatMul/Gemm, pooling, normalizations, element-wise";
    i.priority = 60;
    return i;
  }
  std::string unavailable_reason() override { return dnnl_api() ? std::string() : dnnl_unavailable_reason(); }
  std::vector<Device> devices() const override {
    return {{"cpu", KILN_DEVICE_CPU, dnnl_api() ? "the host CPU (oneDNN " + dnnl_isa_string() + ")" : "the host CPU"}};
  }
  std::vector<OptionSpec> option_schema() const override {
    return {
        {"winograd", KILN_OPTION_STRING, "auto",
         "Winograd F(4x4,3x3) for 3x3 stride-1 convolutions on AVX-512: auto (where measured faster), on, off"},
        {"verbose", KILN_OPTION_BOOL, "false", "log the oneDNN implementation of every primitive at compile"},
    };
  }
  void validate_options(const Options& o) const override { winograd_mode(o.get("winograd")); }
  std::unique_ptr<Instance> create_instance(size_t, Options options) override {
    require_library();
    return std::make_unique<OnednnInstance>(std::move(options));
  }
  bool supports_export() const override { return true; }
  void check_compiled(const uint8_t* bytes, size_t size) const override { check_target(Program::parse(bytes, size)); }
};

}  // namespace
}  // namespace kiln_onednn

KILN_BACKEND_PLUGIN(kiln_onednn::OnednnPlugin)
