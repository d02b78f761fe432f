// A compiled XNNPACK partition at run time: the Program's ops split into
// segments (runs of ops XNNPACK's subgraph API takes, each one xnn_runtime,
// and ops the plugin runs itself, such as a channel Concat in NHWC), the
// buffers for values that cross segments or the NCHW<->NHWC boundary, and
// the pthreadpool they run on. Everything is allocated when it is built;
// run() allocates nothing.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kiln/c/backend_sdk.hpp"
#include "xnn_api.h"
#include "xnn_program.h"

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
  /// Builds XNNPACK runtimes (packing weights) on `pool`.
  Runtime(std::shared_ptr<const Program> program, std::shared_ptr<Pool> pool);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  void run(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& inputs);
  size_t threads() const { return pool_->threads(); }
  /// Bytes of buffers the plugin owns (boundary layout copies, cross-segment values).
  size_t scratch_bytes() const { return scratch_bytes_; }
  size_t num_segments() const { return segments_.size(); }

 private:
  struct Segment {
    bool native = false;  // ops run by the plugin (Concat)
    size_t begin = 0, end = 0;
    xnn_runtime_t runtime = nullptr;
    std::vector<uint32_t> external;          // program value per external value
    std::vector<xnn_external_value> bound;   // as last passed to xnn_setup_runtime
  };

  void plan_segments();
  void build_segment(Segment& seg, const std::vector<uint8_t>& materialized);
  void define_op(xnn_subgraph_t sg, const Op& op, const std::vector<uint32_t>& local) const;
  void bind_inputs(const kiln::sdk::Inputs& inputs);
  void bind_outputs(kiln::sdk::ExecContext& ctx, std::vector<float*>& host_out);
  void run_segment(Segment& seg);
  void run_concat(const Op& op);
  void transpose(const float* src, float* dst, const std::vector<int64_t>& nhwc, bool to_nhwc) const;

  std::shared_ptr<const Program> program_;
  std::shared_ptr<Pool> pool_;
  std::vector<Segment> segments_;
  std::vector<float*> ptr_;                   // per value: where its data is this run (nullptr: XNNPACK's own)
  std::vector<std::vector<float>> owned_;     // per value: plugin-owned storage (empty: none)
  std::vector<float*> host_out_;              // per output: host memory this run
  size_t scratch_bytes_ = 0;
};

}  // namespace kiln_xnnpack
