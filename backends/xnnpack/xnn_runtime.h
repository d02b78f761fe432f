// A compiled XNNPACK partition at run time: the Program's ops split into
// segments (runs of ops XNNPACK's subgraph API takes, each one xnn_runtime,
// and ops the plugin runs itself: a Concat, and the convolutions that feed a
// channel Concat, run as XNNPACK operators whose output pixel stride is the
// Concat's channel count, so they write straight into their slice), the
// buffers for values that cross segments or the NCHW<->NHWC boundary, and
// the pthreadpool they run on. Everything is allocated when it is built;
// run() allocates nothing.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kiln/c/backend_sdk.hpp"
#include "xnn_api.h"
#include "xnn_block.h"
#include "xnn_isa.h"
#include "xnn_memory.h"
#include "xnn_profile.h"
#include "xnn_program.h"
#include "xnn_silu.h"
#include "xnn_winograd.h"

namespace kiln_xnnpack {

/// A pthreadpool of a fixed size (nullptr inside for one thread: XNNPACK
/// then runs on the calling thread).
class Pool {
 public:
  explicit Pool(size_t threads);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  pthreadpool_t get() const { return pool_; }
  size_t threads() const { return threads_; }

 private:
  pthreadpool_t pool_ = nullptr;
  size_t threads_ = 1;
};

class Runtime {
 public:
  /// Builds XNNPACK runtimes (packing weights) on `pool`. With
  /// `native_depthwise`, 3x3 depthwise convolutions the plugin's own kernel
  /// takes (xnn_dwconv.h) run on it instead of XNNPACK's; `winograd` picks
  /// the 3x3 convolutions run with Winograd F(4x4, 3x3) (xnn_winograd.h);
  /// `fusion`: inverted-residual blocks run fused in row bands (xnn_block.h).
  Runtime(std::shared_ptr<const Program> program, std::shared_ptr<Pool> pool, bool native_depthwise = true,
          WinogradMode winograd = WinogradMode::kAuto, BlockFusion fusion = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  void run(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& inputs);
  size_t threads() const { return pool_->threads(); }
  /// Bytes of buffers the plugin owns (boundary layout copies, cross-segment values).
  size_t scratch_bytes() const { return scratch_bytes_; }
  size_t num_segments() const { return segments_.size(); }
  /// Convolutions that write straight into their Concat's buffer.
  size_t num_direct_convs() const {
    size_t n = 0;
    for (xnn_operator_t op : operators_) n += op != nullptr;
    return n;
  }
  /// Depthwise convolutions run by the plugin's own kernel.
  size_t num_native_depthwise() const {
    size_t n = 0;
    for (uint8_t d : native_dw_) n += d;
    return n;
  }
  /// The variant of the plugin's own kernels (depthwise, fused blocks) this runtime runs.
  Isa kernel_isa() const { return isa_; }
  /// Inverted-residual blocks run fused.
  size_t num_fused_blocks() const { return blocks_ ? blocks_->count() : 0; }
  /// Stem convolutions run by the plugin's kernel from the NCHW input (xnn_stem.h).
  size_t num_stems() const { return blocks_ ? blocks_->stems() : 0; }
  /// Boundary values transposed (NCHW <-> NHWC) each run: the Program's,
  /// less the inputs a stem reads in NCHW.
  size_t num_transposes() const;
  /// Classifier heads (1x1 conv + global pool) that run their FullyConnected too.
  size_t num_fused_heads_fc() const { return blocks_ ? blocks_->heads_with_fc() : 0; }
  /// Convolutions run with Winograd, and the residual Adds fused into them.
  const WinogradOps& winograd() const { return wino_; }
  /// x * sigmoid(x) ops run by the plugin's kernel, and its variant.
  size_t num_silu() const;
  const char* silu_isa() const { return silu_.isa; }

 private:
  struct Segment {
    bool native = false;  // ops run by the plugin (Concat, Convs into it, native depthwise)
    size_t begin = 0, end = 0;
    xnn_runtime_t runtime = nullptr;
    std::vector<uint32_t> external;          // program value per external value
    std::vector<xnn_external_value> bound;   // as last passed to xnn_setup_runtime
  };

  void plan_direct_concat();
  void plan_segments();
  void place_owned();
  void build_direct_conv(size_t op_index);
  void build_segment(Segment& seg, const std::vector<uint8_t>& materialized);
  void define_op(xnn_subgraph_t sg, const Op& op, const std::vector<uint32_t>& local) const;
  void bind_inputs(const kiln::sdk::Inputs& inputs);
  void bind_outputs(kiln::sdk::ExecContext& ctx, std::vector<float*>& host_out);
  void run_segment(Segment& seg);
  void run_concat(size_t op_index);
  void run_depthwise(size_t op_index, bool last);
  void run_winograd(size_t op_index);
  void run_silu(size_t op_index, bool last);
  void transpose(const float* src, float* dst, const std::vector<int64_t>& nhwc, bool to_nhwc) const;
  void plan_steps();

  std::shared_ptr<const Program> program_;
  std::shared_ptr<Pool> pool_;
  std::vector<Segment> segments_;
  // Per op: for a Conv writing straight into a channel Concat, the Concat's
  // op index and the channel offset (-1: not such a Conv). Per Concat input:
  // whether a Conv already wrote it.
  std::vector<int64_t> into_concat_, channel_offset_;
  std::vector<xnn_operator_t> operators_;  // per op (nullptr: none)
  std::vector<uint8_t> native_dw_;         // per op: a depthwise convolution run by xnn_dwconv
  Isa isa_ = Isa::kNone;                   // the plugin's kernels' variant (xnn_isa.h), read when built
  std::unique_ptr<FusedBlocks> blocks_;    // inverted-residual blocks run fused (xnn_block.h)
  WinogradOps wino_;                       // per op: a convolution run by xnn_winograd (+ its fused Add)
  SiluKernel silu_ = pick_silu();          // the SiLU variant this CPU runs
  std::vector<int64_t> producer_;          // per value: the op writing it (-1: none)
  int64_t producer_of(uint32_t v) const { return producer_[v]; }
  std::vector<float*> ptr_;                   // per value: where its data is this run (nullptr: XNNPACK's own)
  std::vector<uint8_t> owned_;                // per value: held in arena_ (else host memory or XNNPACK's)
  FloatBuffer arena_;                         // every owned value, placed by place_owned() (huge pages)
  std::vector<float*> host_out_;              // per output: host memory this run
  size_t scratch_bytes_ = 0;
  StepTimer timer_;                           // KILN_XNNPACK_PROFILE (xnn_profile.h)
  size_t step_in_ = 0, step_out_ = 0;         // timer steps: the input and output boundary
  std::vector<size_t> step_of_;               // per op: its timer step (a segment's ops share one)
};

}  // namespace kiln_xnnpack
