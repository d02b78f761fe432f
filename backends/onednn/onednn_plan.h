// A Program made runnable: oneDNN primitives, memories and buffers for one
// thread count (oneDNN's OpenMP kernels fix their work split when a
// primitive is created, so a plan is built per thread count and cached by
// the compiled partition). Inside the plan each value keeps the layout its
// producer prefers (blocked nChw16c for convolutions, ...); reorders happen
// only where a consumer needs another layout and at the partition's boundary.
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <memory>
#include <vector>

#include "kiln/c/backend_sdk.hpp"
#include "onednn_program.h"

namespace kiln_onednn {

struct DnnlApi;

class Plan {
 public:
  /// Creates every primitive (throws kiln::sdk::Error naming the op on failure).
  Plan(const Program& program, int threads);
  ~Plan();
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  /// Checks inputs against the compiled shapes, allocates outputs, runs.
  void execute(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& inputs);
  /// "conv:jit_wino_4x3:avx512_core" per primitive, for logs and tests.
  const std::vector<std::string>& implementations() const { return impls_; }

 private:
  struct Val {
    dnnl_memory_desc_t md{};
    dnnl_memory_t mem = nullptr;
    int32_t buffer = -1;  // owned buffer (index into buffers_), -1 for none
    int32_t root = -1;    // the value whose storage this one views (itself when it owns it)
    bool dynamic = false; // storage bound per execute (partition input or directly-written output)
  };
  struct Step {
    dnnl_primitive_t prim = nullptr;
    std::vector<dnnl_exec_arg_t> args;
    // kErf (no primitive): a plain loop over fixed pointers or per-execute roots.
    void* erf_in = nullptr;
    void* erf_out = nullptr;
    int32_t erf_in_root = -1, erf_out_root = -1;
    int64_t erf_n = 0;
  };
  struct Buffer {
    void* data = nullptr;
    size_t size = 0;
    bool free = false;
  };

  // Building (onednn_plan.cpp)
  void release();
  void build();
  void plan_lifetimes();
  dnnl_memory_t new_memory(const dnnl_memory_desc_t& md, void* handle);
  // A memory with `md` over value v's storage (kept in step with it per execute).
  dnnl_memory_t view_memory(int32_t v, const dnnl_memory_desc_t& md);
  int32_t alloc_buffer(size_t size);
  void release_dead(size_t op_index);
  void set_value(int32_t v, const dnnl_memory_desc_t& md, int32_t view_of = -1);
  dnnl_memory_t as_md(int32_t v, const dnnl_memory_desc_t& want);
  dnnl_memory_t as_plain(int32_t v);
  std::pair<void*, int32_t> plain_storage(int32_t v);
  dnnl_memory_t constant_memory(int32_t v, const dnnl_memory_desc_t* user_md, const dnnl_memory_desc_t* want);
  void add_step(dnnl_primitive_desc_t pd, std::vector<dnnl_exec_arg_t> args, const char* what);
  dnnl_primitive_attr_t make_attr(const Op& op, std::vector<dnnl_exec_arg_t>& extra_args, int rank);
  void bind_outputs();

  // Ops (onednn_plan_ops.cpp)
  void build_conv(const Op& op);
  void build_matmul(const Op& op);
  void build_pool(const Op& op);
  void build_batchnorm(const Op& op);
  void build_eltwise(const Op& op);
  void build_binary(const Op& op);
  void build_softmax(const Op& op);
  void build_transpose(const Op& op);
  void build_reshape(const Op& op);
  void build_concat(const Op& op);
  void build_layernorm(const Op& op);
  void build_reduce(const Op& op);
  void build_erf(const Op& op);

  const Program& p_;
  const DnnlApi& api_;
  int threads_;
  dnnl_engine_t engine_ = nullptr;
  dnnl_stream_t stream_ = nullptr;
  std::vector<Val> vals_;
  std::vector<Step> steps_;
  std::vector<Buffer> buffers_;
  std::vector<dnnl_memory_t> mems_;  // every memory object created (destroyed at the end)
  std::vector<size_t> last_use_;     // per root value: index of the last op reading it
  size_t current_op_ = 0;
  std::vector<std::string> impls_;
  // Boundary: per output, whether the producer writes host memory directly,
  // else the memory a final reorder writes.
  std::vector<dnnl_memory_t> out_mem_;
  std::vector<bool> out_direct_;
  std::vector<int32_t> temps_;  // buffers of reorders for the op being built
  // Memories over storage bound per execute: (memory, root value).
  std::vector<std::pair<dnnl_memory_t, int32_t>> linked_;
  std::vector<void*> root_ptr_;
};

/// Plain row-major md for dims (tag a, ab, abc, ...).
dnnl_memory_desc_t plain_md(const DnnlApi& api, const std::vector<int64_t>& dims);
/// True when md is dense row-major for its dims.
bool is_plain(const DnnlApi& api, const dnnl_memory_desc_t& md);

}  // namespace kiln_onednn
