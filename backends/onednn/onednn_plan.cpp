#include "onednn_plan.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "dnnl_api.h"

namespace kiln_onednn {

using kiln::sdk::fail;

dnnl_memory_desc_t plain_md(const DnnlApi& api, const std::vector<int64_t>& dims) {
  static const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  dnnl_memory_desc_t md;
  std::vector<int64_t> d = dims.empty() ? std::vector<int64_t>{1} : dims;
  if (d.size() > 6) fail(KILN_STATUS_UNIMPLEMENTED, "oneDNN backend: rank " + std::to_string(d.size()) + " > 6");
  dnnl_check(api.dnnl_memory_desc_init_by_tag(&md, static_cast<int>(d.size()), d.data(), dnnl_f32, tags[d.size()]), "memory desc");
  return md;
}

bool is_plain(const DnnlApi& api, const dnnl_memory_desc_t& md) {
  if (md.format_kind != dnnl_blocked) return false;
  std::vector<int64_t> dims(md.dims, md.dims + md.ndims);
  dnnl_memory_desc_t p = plain_md(api, dims);
  return api.dnnl_memory_desc_equal(&md, &p) != 0;
}

Plan::Plan(const Program& program, int threads) : p_(program), api_(*dnnl_api()), threads_(threads) {
  try {
    if (api_.omp_set_num_threads) api_.omp_set_num_threads(threads_);
    dnnl_check(api_.dnnl_engine_create(&engine_, dnnl_cpu, 0), "engine_create");
    dnnl_check(api_.dnnl_stream_create(&stream_, engine_, dnnl_stream_default_flags), "stream_create");
    build();
  } catch (...) {
    release();
    throw;
  }
}

Plan::~Plan() { release(); }

void Plan::release() {
  for (Step& s : steps_)
    if (s.prim) api_.dnnl_primitive_destroy(s.prim);
  steps_.clear();
  for (dnnl_memory_t m : mems_) api_.dnnl_memory_destroy(m);
  mems_.clear();
  for (Buffer& b : buffers_) std::free(b.data);
  buffers_.clear();
  if (stream_) api_.dnnl_stream_destroy(stream_);
  if (engine_) api_.dnnl_engine_destroy(engine_);
  stream_ = nullptr;
  engine_ = nullptr;
}

dnnl_memory_t Plan::new_memory(const dnnl_memory_desc_t& md, void* handle) {
  dnnl_memory_t m = nullptr;
  dnnl_check(api_.dnnl_memory_create(&m, &md, engine_, handle), "memory_create");
  mems_.push_back(m);
  return m;
}

int32_t Plan::alloc_buffer(size_t size) {
  int32_t best = -1;
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].free && buffers_[i].size >= size && (best < 0 || buffers_[i].size < buffers_[static_cast<size_t>(best)].size))
      best = static_cast<int32_t>(i);
  if (best >= 0) {
    buffers_[static_cast<size_t>(best)].free = false;
    return best;
  }
  Buffer b;
  b.size = (size + 63) / 64 * 64;
  b.data = std::aligned_alloc(64, b.size ? b.size : 64);
  if (!b.data) throw std::bad_alloc();
  buffers_.push_back(b);
  return static_cast<int32_t>(buffers_.size() - 1);
}

dnnl_memory_t Plan::view_memory(int32_t v, const dnnl_memory_desc_t& md) {
  const Val& src = vals_[static_cast<size_t>(v)];
  if (api_.dnnl_memory_desc_equal(&md, &src.md)) return src.mem;
  void* h = src.buffer >= 0 ? buffers_[static_cast<size_t>(src.buffer)].data : nullptr;
  dnnl_memory_t m = new_memory(md, h ? h : DNNL_MEMORY_NONE);
  if (src.dynamic) linked_.emplace_back(m, src.root);
  return m;
}

// Value v gets `md`: a view of `view_of`'s storage, or an owned buffer, or
// (partition outputs in plain layout) the host's output memory per execute.
void Plan::set_value(int32_t v, const dnnl_memory_desc_t& md, int32_t view_of) {
  Val& x = vals_[static_cast<size_t>(v)];
  x.md = md;
  if (view_of >= 0) {
    const Val& s = vals_[static_cast<size_t>(view_of)];
    x.root = s.root;
    x.buffer = s.buffer;
    x.dynamic = s.dynamic;
    x.mem = view_memory(view_of, md);
    return;
  }
  x.root = v;
  bool is_output = false;
  for (int32_t o : p_.outputs) is_output |= o == v;
  if (is_output && is_plain(api_, md)) {
    x.dynamic = true;
    x.mem = new_memory(md, DNNL_MEMORY_NONE);
    linked_.emplace_back(x.mem, v);
    return;
  }
  x.buffer = alloc_buffer(api_.dnnl_memory_desc_get_size(&md));
  x.mem = new_memory(md, buffers_[static_cast<size_t>(x.buffer)].data);
}

dnnl_memory_t Plan::as_md(int32_t v, const dnnl_memory_desc_t& want) {
  const Val& x = vals_[static_cast<size_t>(v)];
  if (api_.dnnl_memory_desc_equal(&x.md, &want)) return x.mem;
  int32_t b = alloc_buffer(api_.dnnl_memory_desc_get_size(&want));
  temps_.push_back(b);
  dnnl_memory_t m = new_memory(want, buffers_[static_cast<size_t>(b)].data);
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_check(api_.dnnl_reorder_primitive_desc_create(&pd, &x.md, engine_, &want, engine_, nullptr), "reorder");
  add_step(pd, {{DNNL_ARG_FROM, x.mem}, {DNNL_ARG_TO, m}}, "reorder");
  return m;
}

dnnl_memory_t Plan::as_plain(int32_t v) { return as_md(v, plain_md(api_, p_.dims[static_cast<size_t>(v)])); }

// Where value v's plain data lives: a fixed pointer, or (dynamic) its root's per-execute pointer.
std::pair<void*, int32_t> Plan::plain_storage(int32_t v) {
  dnnl_memory_t m = as_plain(v);
  const Val& x = vals_[static_cast<size_t>(v)];
  if (m != x.mem) return {buffers_[static_cast<size_t>(temps_.back())].data, -1};
  if (x.dynamic) return {nullptr, x.root};
  return {buffers_[static_cast<size_t>(x.buffer)].data, -1};
}

dnnl_memory_t Plan::constant_memory(int32_t v, const dnnl_memory_desc_t* user_md, const dnnl_memory_desc_t* want) {
  const Constant* c = nullptr;
  for (const Constant& k : p_.constants)
    if (k.value == v) c = &k;
  if (!c) fail(KILN_STATUS_INVALID_ARGUMENT, "oneDNN backend: value " + std::to_string(v) + " must be a constant");
  dnnl_memory_desc_t umd = user_md ? *user_md : plain_md(api_, c->dims);
  if (api_.dnnl_memory_desc_get_size(&umd) != c->data.size() * sizeof(float))
    fail(KILN_STATUS_INVALID_ARGUMENT, "oneDNN backend: constant size does not match its use");
  dnnl_memory_t user = new_memory(umd, const_cast<float*>(c->data.data()));
  if (!want || api_.dnnl_memory_desc_equal(&umd, want)) return user;
  dnnl_memory_t m = new_memory(*want, DNNL_MEMORY_ALLOCATE);
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_check(api_.dnnl_reorder_primitive_desc_create(&pd, &umd, engine_, want, engine_, nullptr), "reorder of a constant");
  dnnl_primitive_t prim = nullptr;
  dnnl_status_t st = api_.dnnl_primitive_create(&prim, pd);
  api_.dnnl_primitive_desc_destroy(pd);
  dnnl_check(st, "reorder of a constant");
  dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, m}};
  st = api_.dnnl_primitive_execute(prim, stream_, 2, args);
  if (st == dnnl_success) st = api_.dnnl_stream_wait(stream_);
  api_.dnnl_primitive_destroy(prim);
  dnnl_check(st, "reorder of a constant");
  return m;
}

void Plan::add_step(dnnl_primitive_desc_t pd, std::vector<dnnl_exec_arg_t> args, const char* what) {
  const char* impl = nullptr;
  api_.dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
  impls_.push_back(std::string(what) + ":" + (impl ? impl : "?"));
  Step s;
  dnnl_status_t st = api_.dnnl_primitive_create(&s.prim, pd);
  api_.dnnl_primitive_desc_destroy(pd);
  dnnl_check(st, what);
  s.args = std::move(args);
  steps_.push_back(std::move(s));
}

dnnl_primitive_attr_t Plan::make_attr(const Op& op, std::vector<dnnl_exec_arg_t>& extra, int rank) {
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_check(api_.dnnl_primitive_attr_create(&attr), "attr_create");
  if (op.post.empty()) return attr;
  dnnl_post_ops_t po = nullptr;
  dnnl_check(api_.dnnl_post_ops_create(&po), "post_ops_create");
  for (size_t i = 0; i < op.post.size(); ++i) {
    const PostOp& p = op.post[i];
    if (p.kind == PostKind::kEltwise) {
      api_.dnnl_post_ops_append_eltwise(po, 1.f, static_cast<dnnl_alg_kind_t>(p.alg), p.alpha, p.beta);
    } else if (p.kind == PostKind::kSum) {
      api_.dnnl_post_ops_append_sum(po, 1.f);
    } else {
      std::vector<int64_t> d = p_.dims[static_cast<size_t>(p.value)];
      while (static_cast<int>(d.size()) < rank) d.insert(d.begin(), 1);
      dnnl_memory_desc_t md = plain_md(api_, d);
      api_.dnnl_post_ops_append_binary(po, static_cast<dnnl_alg_kind_t>(p.alg), &md);
      dnnl_memory_t m;
      bool is_const = false;
      for (const Constant& c : p_.constants) is_const |= c.value == p.value;
      if (is_const) m = constant_memory(p.value, &md, nullptr);
      else if (as_plain(p.value) == vals_[static_cast<size_t>(p.value)].mem) m = view_memory(p.value, md);
      else m = new_memory(md, buffers_[static_cast<size_t>(temps_.back())].data);  // a reordered temp
      extra.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, m});
    }
  }
  dnnl_status_t st = api_.dnnl_primitive_attr_set_post_ops(attr, po);
  api_.dnnl_post_ops_destroy(po);
  dnnl_check(st, "set_post_ops");
  return attr;
}

void Plan::plan_lifetimes() {
  last_use_.assign(p_.num_values, 0);
  for (size_t i = 0; i < p_.ops.size(); ++i) {
    for (int32_t v : p_.ops[i].in)
      if (v >= 0) last_use_[static_cast<size_t>(v)] = i;
    for (const PostOp& po : p_.ops[i].post)
      if (po.value >= 0) last_use_[static_cast<size_t>(po.value)] = i;
  }
  for (int32_t v : p_.outputs) last_use_[static_cast<size_t>(v)] = std::numeric_limits<size_t>::max();
}

void Plan::release_dead(size_t i) {
  for (int32_t b : temps_) buffers_[static_cast<size_t>(b)].free = true;
  temps_.clear();
  std::vector<uint8_t> live(buffers_.size(), 0);
  for (size_t v = 0; v < vals_.size(); ++v)
    if (vals_[v].buffer >= 0 && vals_[v].mem && last_use_[v] > i) live[static_cast<size_t>(vals_[v].buffer)] = 1;
  for (size_t b = 0; b < buffers_.size(); ++b)
    if (!live[b]) buffers_[b].free = true;
}

void Plan::build() {
  vals_.assign(p_.num_values, Val{});
  root_ptr_.assign(p_.num_values, nullptr);
  plan_lifetimes();
  for (int32_t v : p_.inputs) {
    Val& x = vals_[static_cast<size_t>(v)];
    x.md = plain_md(api_, p_.dims[static_cast<size_t>(v)]);
    x.root = v;
    x.dynamic = true;
    x.mem = new_memory(x.md, DNNL_MEMORY_NONE);
    linked_.emplace_back(x.mem, v);
  }
  for (current_op_ = 0; current_op_ < p_.ops.size(); ++current_op_) {
    const Op& op = p_.ops[current_op_];
    try {
      switch (op.kind) {
        case OpKind::kConv: case OpKind::kDeconv: build_conv(op); break;
        case OpKind::kMatMul: build_matmul(op); break;
        case OpKind::kPool: build_pool(op); break;
        case OpKind::kBatchNorm: build_batchnorm(op); break;
        case OpKind::kEltwise: build_eltwise(op); break;
        case OpKind::kBinary: build_binary(op); break;
        case OpKind::kSoftmax: build_softmax(op); break;
        case OpKind::kTranspose: build_transpose(op); break;
        case OpKind::kReshape: build_reshape(op); break;
        case OpKind::kConcat: build_concat(op); break;
        case OpKind::kLayerNorm: build_layernorm(op); break;
        case OpKind::kReduce: build_reduce(op); break;
        case OpKind::kErf: build_erf(op); break;
      }
    } catch (const kiln::sdk::Error& e) {
      fail(e.code(), std::string(op_name(op.kind)) + " (op " + std::to_string(current_op_) + " of the partition): " + e.what());
    }
    release_dead(current_op_);
  }
  bind_outputs();
}

void Plan::bind_outputs() {
  for (int32_t v : p_.outputs) {
    const Val& x = vals_[static_cast<size_t>(v)];
    const bool direct = x.dynamic && x.root == v;
    out_direct_.push_back(direct);
    if (direct) {
      out_mem_.push_back(x.mem);
      continue;
    }
    dnnl_memory_desc_t md = plain_md(api_, p_.dims[static_cast<size_t>(v)]);
    dnnl_memory_t m = new_memory(md, DNNL_MEMORY_NONE);
    dnnl_primitive_desc_t pd = nullptr;
    dnnl_check(api_.dnnl_reorder_primitive_desc_create(&pd, &x.md, engine_, &md, engine_, nullptr), "output reorder");
    add_step(pd, {{DNNL_ARG_FROM, x.mem}, {DNNL_ARG_TO, m}}, "reorder");
    out_mem_.push_back(m);
  }
}

void Plan::execute(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& inputs) {
  // The SDK checked count, dtype, shape and bytes against the partition (or,
  // imported, the program's input shapes) before execute.
  for (size_t i = 0; i < inputs.size(); ++i) {
    kiln::sdk::TensorView t = inputs[i];
    root_ptr_[static_cast<size_t>(p_.inputs[i])] = t.data;
  }
  for (size_t i = 0; i < p_.outputs.size(); ++i) {
    const int32_t v = p_.outputs[i];
    kiln::sdk::TensorView y = ctx.allocate_output(i, KILN_DTYPE_FLOAT32, p_.dims[static_cast<size_t>(v)]);
    if (out_direct_[i]) root_ptr_[static_cast<size_t>(v)] = y.data;
    else dnnl_check(api_.dnnl_memory_set_data_handle(out_mem_[i], y.data), "set_data_handle");
  }
  for (auto& [mem, root] : linked_) dnnl_check(api_.dnnl_memory_set_data_handle(mem, root_ptr_[static_cast<size_t>(root)]), "set_data_handle");
  if (api_.omp_set_num_threads) api_.omp_set_num_threads(threads_);
  for (Step& s : steps_) {
    if (s.prim) {
      dnnl_check(api_.dnnl_primitive_execute(s.prim, stream_, static_cast<int>(s.args.size()), s.args.data()), "execute");
      continue;
    }
    dnnl_check(api_.dnnl_stream_wait(stream_), "stream_wait");
    const float* in = static_cast<const float*>(s.erf_in_root >= 0 ? root_ptr_[static_cast<size_t>(s.erf_in_root)] : s.erf_in);
    float* out = static_cast<float*>(s.erf_out_root >= 0 ? root_ptr_[static_cast<size_t>(s.erf_out_root)] : s.erf_out);
    ctx.parallel_for(s.erf_n, 16384, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) out[k] = std::erf(in[k]);
    });
  }
  dnnl_check(api_.dnnl_stream_wait(stream_), "stream_wait");
}

}  // namespace kiln_onednn
