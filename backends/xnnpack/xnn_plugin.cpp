// The XNNPACK backend: runs float32 convolutional nets (Conv, Gemm/MatMul
// with constant weights, pooling, element-wise ops, ...) through XNNPACK's
// subgraph API, NHWC inside each partition. See README.md.
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/c/backend_sdk.hpp"
#include "xnn_api.h"
#include "xnn_claim.h"
#include "xnn_lower.h"
#include "xnn_runtime.h"

#ifndef KILN_XNNPACK_VERSION
#define KILN_XNNPACK_VERSION "unknown"
#endif

namespace kiln_xnnpack {

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

/// Thread pools of an instance, one per size, shared by its partitions.
class Pools {
 public:
  std::shared_ptr<Pool> get(size_t threads) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Pool> p = pools_[threads].lock();
    if (!p) {
      p = std::make_shared<Pool>(threads);
      pools_[threads] = p;
    }
    return p;
  }

 private:
  std::mutex mu_;
  std::map<size_t, std::weak_ptr<Pool>> pools_;
};

class XnnCompiled final : public Compiled {
 public:
  XnnCompiled(std::shared_ptr<const Program> program, std::shared_ptr<Pools> pools, int64_t threads, bool native_dw,
              WinogradMode winograd, BlockFusion fusion)
      : program_(std::move(program)), pools_(std::move(pools)), fixed_threads_(threads > 0), native_dw_(native_dw),
        winograd_(winograd), fusion_(fusion) {
    // Weights are packed here, for the thread count we expect (Kiln's
    // default session has 1 thread); a session with another count rebuilds
    // once, on its first run.
    const size_t n = threads > 0 ? static_cast<size_t>(threads) : 1;
    runtime_ = std::make_unique<Runtime>(program_, pools_->get(n), native_dw_, winograd_, fusion_);
  }
  void execute(ExecContext& ctx, const Inputs& inputs) override {
    const size_t want = static_cast<size_t>(std::max(1, ctx.num_threads()));
    if (!fixed_threads_ && runtime_->threads() != want)
      runtime_ = std::make_unique<Runtime>(program_, pools_->get(want), native_dw_, winograd_, fusion_);
    runtime_->run(ctx, inputs);
  }
  size_t num_inputs() const override { return program_->inputs.size(); }
  size_t num_outputs() const override { return program_->outputs.size(); }
  // The XNNPACK runtime and the boundary buffers are per handle.
  kiln_concurrency_t concurrency() const override { return KILN_CONCURRENCY_SERIAL; }
  std::vector<uint8_t> export_bytes() const override { return program_->serialize(); }
  const Runtime& runtime() const { return *runtime_; }

 private:
  std::shared_ptr<const Program> program_;
  std::shared_ptr<Pools> pools_;
  bool fixed_threads_;
  bool native_dw_;
  WinogradMode winograd_;
  BlockFusion fusion_;
  std::unique_ptr<Runtime> runtime_;
};

// What a connected group of claimable nodes holds, which decides whether it
// is worth a partition: spatial ops (convolutions, pooling: XNNPACK's
// strength, NHWC inside), else dense ops (fully connected, softmax: portable
// kernels run the transformer-style groups these form as fast, measured on
// bench's bert_encoder), else only light element-wise/reshape ops (cheaper
// than their partition boundary).
enum class GroupKind { kLight, kDense, kSpatial };

GroupKind group_kind(const kiln::sdk::Graph& g, const std::vector<size_t>& group) {
  static const char* const spatial[] = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Resize",
                                        "BatchNormalization", "DepthToSpace"};
  static const char* const dense[] = {"Gemm", "MatMul", "Softmax"};
  GroupKind kind = GroupKind::kLight;
  for (size_t i : group) {
    const std::string op = g.node(i).op_type();
    for (const char* h : spatial)
      if (op == h) return GroupKind::kSpatial;
    for (const char* h : dense)
      if (op == h) kind = GroupKind::kDense;
  }
  return kind;
}

class XnnInstance final : public Instance {
 public:
  explicit XnnInstance(Options options) : Instance(std::move(options)), pools_(std::make_shared<Pools>()) { check(); }

  void set_property(const std::string& key, const std::string& value) override {
    Options before = options_;
    options_.set(key, value);
    try {
      check();
    } catch (...) {
      options_ = std::move(before);
      throw;
    }
  }

  void get_capability(const Graph& graph, Capability& cap) override {
    const size_t n = graph.num_nodes();
    std::vector<int8_t> ok(n, 0);
    const bool concat = options_.get_bool("concat");
    const bool costed = options_.get_float("min_macs_per_byte") > 0;
    for (size_t i = 0; i < n; ++i) {
      kiln::sdk::Node node = graph.node(i);
      std::string why = node.op_type() == "Concat" && !concat ? "Concat (option xnnpack.concat=false)" : decline_reason(node);
      if (why.empty() && costed) why = padding_reason(node);
      if (why.empty()) ok[i] = 1;
      else cap.decline(i, why);
    }
    // Connected claimable nodes become one group (the host makes it convex).
    std::vector<size_t> parent(n);
    std::iota(parent.begin(), parent.end(), size_t{0});
    auto find = [&](size_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    for (size_t i = 0; i < n; ++i) {
      if (!ok[i]) continue;
      kiln::sdk::Node node = graph.node(i);
      for (size_t k = 0; k < node.num_inputs(); ++k) {
        kiln::sdk::Node p = node.input(k) ? node.input(k).producer() : kiln::sdk::Node();
        if (p && ok[p.index()]) parent[find(i)] = find(p.index());
      }
    }
    std::map<size_t, std::vector<size_t>> groups;
    for (size_t i = 0; i < n; ++i)
      if (ok[i]) groups[find(i)].push_back(i);
    for (auto& [root, nodes] : groups) {
      const GroupKind kind = group_kind(graph, nodes);
      if (kind == GroupKind::kSpatial || (kind == GroupKind::kDense && options_.get_bool("dense_groups")) ||
          (kind == GroupKind::kLight && !options_.get_bool("skip_light_groups"))) {
        claim_parts(graph, nodes, kind == GroupKind::kSpatial, cap);
        continue;
      }
      const char* why = kind == GroupKind::kDense
                            ? "only in a group of fully connected/element-wise ops with no convolution or pooling "
                              "(portable kernels are as fast there; option xnnpack.dense_groups=true claims it)"
                            : "only in a group of light element-wise/reshape ops, not worth a partition boundary";
      for (size_t i : nodes) cap.decline(i, why);
    }
  }

  // The convex parts of a claimable group (as the host would split it);
  // a part of a spatial group whose boundary transposes cost more than its
  // heavy ops win is declined (xnn_claim.h). Groups claimed by option
  // (dense, light) are taken as asked.
  void claim_parts(const Graph& graph, const std::vector<size_t>& nodes, bool costed, Capability& cap) const {
    const double min_macs = options_.get_float("min_macs_per_byte");
    if (!costed || min_macs <= 0) return cap.add_group(nodes);
    for (std::vector<size_t>& part : convex_parts(graph, nodes)) {
      const std::string why = unpaid_reason(part_cost(graph, part), min_macs);
      if (why.empty()) {
        cap.add_group(std::move(part));
        continue;
      }
      for (size_t i : part) cap.decline(i, why);
    }
  }

  std::unique_ptr<Compiled> compile(const Graph& graph, const Partition& part) override {
    auto program = std::make_shared<const Program>(lower_partition(graph, part));
    auto c = std::make_unique<XnnCompiled>(program, pools_, options_.get_int("threads"),
                                           options_.get_bool("native_depthwise"),
                                           parse_winograd_mode(options_.get("winograd")), fusion());
    // One line per partition; kiln inspect prints it under the partition.
    if (options_.get_bool("verbose") || graph.host().log_enabled(KILN_LOG_INFO)) {
      const Runtime& r = c->runtime();
      const size_t t = r.num_transposes();
      graph.host().log(KILN_LOG_INFO, "compiled " + part.id + ": " + std::to_string(part.nodes.size()) + " nodes -> " +
                                          std::to_string(program->ops.size()) + " XNNPACK ops in " +
                                          std::to_string(r.num_segments()) + " segment" + (r.num_segments() == 1 ? "" : "s") +
                                          " (" + std::to_string(r.num_direct_convs()) +
                                          " convolutions write into their Concat, " +
                                          std::to_string(r.num_native_depthwise()) +
                                          " depthwise run by the plugin's kernel, " +
                                          std::to_string(r.num_fused_blocks()) + " inverted-residual blocks fused, " +
                                          std::to_string(r.num_stems()) + " stem convolutions from NCHW, " +
                                          std::to_string(r.num_fused_heads_fc()) +
                                          " classifier heads run with their fully connected), " +
                                          std::to_string(t) +
                                          " boundary transpose" + (t == 1 ? "" : "s") + " (NCHW<->NHWC), " +
                                          std::to_string(r.scratch_bytes()) + " bytes of plugin buffers; " +
                                          r.winograd().summary() + "; " + std::to_string(r.num_silu()) +
                                          " SiLU (x * sigmoid(x)) by the plugin's " + r.silu_isa() +
                                          " kernel; plugin kernels: " + isa_name(r.kernel_isa()));
    }
    return c;
  }

  std::unique_ptr<Compiled> import_compiled(const uint8_t* bytes, size_t size) override {
    auto program = std::make_shared<const Program>(Program::parse(bytes, size));
    return std::make_unique<XnnCompiled>(program, pools_, options_.get_int("threads"),
                                         options_.get_bool("native_depthwise"),
                                         parse_winograd_mode(options_.get("winograd")), fusion());
  }

 private:
  void check() const {
    const int64_t t = options_.get_int("threads");
    if (t < 0 || t > 1024) fail(KILN_STATUS_INVALID_ARGUMENT, "option 'threads' must be in [0, 1024], got " + options_.get("threads"));
    const double m = options_.get_float("min_macs_per_byte");
    if (!(m >= 0 && m <= 1e9))
      fail(KILN_STATUS_INVALID_ARGUMENT, "option 'min_macs_per_byte' must be in [0, 1e9], got " + options_.get("min_macs_per_byte"));
    const int64_t rows = options_.get_int("block_rows");
    if (rows < 0 || rows > 4096)
      fail(KILN_STATUS_INVALID_ARGUMENT, "option 'block_rows' must be in [0, 4096], got " + options_.get("block_rows"));
    (void)parse_winograd_mode(options_.get("winograd"));
    (void)parse_block_split(options_.get("block_split"));
  }
  BlockFusion fusion() const {
    return {options_.get_bool("fuse_blocks"), static_cast<size_t>(options_.get_int("block_rows")),
            parse_block_split(options_.get("block_split")), options_.get_bool("fuse_stem"),
            options_.get_bool("fuse_head_fc")};
  }
  std::shared_ptr<Pools> pools_;
};

class XnnPlugin final : public Plugin {
 public:
  Info info() const override {
    Info i;
    i.name = "xnnpack";
    i.version = "1.0.0";
    i.vendor = "Kiln project";
    i.vendor_sdk_version = KILN_XNNPACK_VERSION;
    i.description = "XNNPACK (float32, NHWC): convolutions, fully connected, pooling, element-wise";
    i.priority = 50;
    return i;
  }
  std::string unavailable_reason() override { return load_error(); }
  std::vector<OptionSpec> option_schema() const override {
    return {
        {"threads", KILN_OPTION_INT, "0", "threads of the plugin's pthreadpool (0: the session's thread count)"},
        {"concat", KILN_OPTION_BOOL, "true", "claim Concat (copied in NHWC by the plugin between XNNPACK runtimes)"},
        {"dense_groups", KILN_OPTION_BOOL, "false",
         "claim groups of Gemm/MatMul/Softmax with no conv or pooling (transformer layers)"},
        {"skip_light_groups", KILN_OPTION_BOOL, "true",
         "decline groups of only element-wise/reshape ops (not worth their boundary)"},
        {"min_macs_per_byte", KILN_OPTION_FLOAT, kDefaultMinMacsPerByte,
         "decline a partition with fewer MACs of convolutions it runs faster (KxK; 1x1 in inverted-residual blocks) "
         "per byte transposed (NCHW<->NHWC) at its boundary, and convolutions that mostly read padding (0: no cost "
         "rules, claim all it can run)"},
        {"native_depthwise", KILN_OPTION_BOOL, "true",
         "run 3x3 depthwise convolutions (16n channels) on the plugin's AVX-512/AVX2 kernel instead of XNNPACK's"},
        {"fuse_blocks", KILN_OPTION_BOOL, "true",
         "run inverted-residual blocks (1x1 expand -> 3x3 depthwise -> 1x1 project [+ Add]) fused in row bands (AVX-512/AVX2)"},
        {"fuse_stem", KILN_OPTION_BOOL, "true",
         "run KxK convolutions of a partition's NCHW input with <= 4 channels (a net's stem) on the plugin's kernel "
         "straight from NCHW (no layout transpose), fused with the depthwise -> project block after them (AVX-512/AVX2)"},
        {"block_rows", KILN_OPTION_INT, "0", "output rows a fused block computes at a time (0: sized to the L2 cache)"},
        {"block_split", KILN_OPTION_STRING, "auto",
         "how threads share a fused block: bands (each thread expands its own rows), phases (expand all rows first), "
         "channels (each thread expands + convolves its slice of the expanded channels, then the project by rows), "
         "auto"},
        {"fuse_head_fc", KILN_OPTION_BOOL, "true",
         "run a classifier's FullyConnected inside its fused head (1x1 conv + global pool), streaming its weights "
         "in while the head computes"},
        {"winograd", KILN_OPTION_STRING, "auto",
         "3x3 stride-1 convolutions by Winograd F(4x4,3x3): auto (shapes that gain), off, always"},
        {"verbose", KILN_OPTION_BOOL, "false", "log each compiled partition at info level"},
    };
  }
  std::unique_ptr<Instance> create_instance(size_t, Options options) override {
    if (!load_error().empty()) fail(KILN_STATUS_UNAVAILABLE, load_error());
    return std::make_unique<XnnInstance>(std::move(options));
  }
  bool supports_export() const override { return true; }
  void check_compiled(const uint8_t* bytes, size_t size) const override { (void)Program::parse(bytes, size); }
};

}  // namespace kiln_xnnpack

KILN_BACKEND_PLUGIN(kiln_xnnpack::XnnPlugin)
