// Plan: one builder per op kind (primitive descriptors, layouts, arguments).
#include <oneapi/dnnl/dnnl.h>

#include "dnnl_api.h"
#include "onednn_plan.h"

namespace kiln_onednn {

using kiln::sdk::fail;

namespace {

dnnl_memory_desc_t any_md(const DnnlApi& api, const std::vector<int64_t>& dims) {
  dnnl_memory_desc_t md;
  dnnl_check(api.dnnl_memory_desc_init_by_tag(&md, static_cast<int>(dims.size()), dims.data(), dnnl_f32, dnnl_format_tag_any), "memory desc");
  return md;
}

dnnl_memory_desc_t tag_md(const DnnlApi& api, const std::vector<int64_t>& dims, dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  dnnl_check(api.dnnl_memory_desc_init_by_tag(&md, static_cast<int>(dims.size()), dims.data(), dnnl_f32, tag), "memory desc");
  return md;
}

bool strided(const dnnl_memory_desc_t& md) { return md.format_kind == dnnl_blocked && md.format_desc.blocking.inner_nblks == 0; }

const dnnl_memory_desc_t& query(const DnnlApi& api, dnnl_primitive_desc_t pd, dnnl_query_t what) {
  return *api.dnnl_primitive_desc_query_md(pd, what, 0);
}

// Creates a primitive descriptor; frees `attr`.
dnnl_primitive_desc_t make_pd(const DnnlApi& api, const void* desc, dnnl_primitive_attr_t attr, dnnl_engine_t engine, const char* what) {
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_status_t st = api.dnnl_primitive_desc_create(&pd, static_cast<const_dnnl_op_desc_t>(desc), attr, engine, nullptr);
  if (attr) api.dnnl_primitive_attr_destroy(attr);
  dnnl_check(st, what);
  return pd;
}

// oneDNN 2.6's Winograd kernel (jit_wino_4x3, AVX-512) serves 3x3 stride-1 undilated ungrouped convolutions.
bool winograd_shape(const std::vector<int64_t>& w, const Op& op) {
  return op.kind == OpKind::kConv && op.ints[0] == 1 && w[2] == 3 && w[3] == 3 && op.ints[1] == 1 && op.ints[2] == 1 &&
         op.ints[3] == 1 && op.ints[4] == 1;
}

}  // namespace

bool winograd_auto(const std::vector<int64_t>& x, const std::vector<int64_t>& w) {
  // Measured on an AVX-512 EPYC (backends/onednn/README.md): on resnet18 every
  // 3x3 stride-1 layer (64..512 channels, 56x56 down to 7x7) is faster with
  // Winograd; channel-poor layers are left direct (their transforms dominate).
  (void)x;
  return w[0] >= 32 && w[1] >= 32;
}

void Plan::build_conv(const Op& op) {
  const bool de = op.kind == OpKind::kDeconv;
  const auto& xd = p_.dims[static_cast<size_t>(op.in[0])];
  const auto& wd = p_.dims[static_cast<size_t>(op.in[1])];
  const auto& yd = p_.dims[static_cast<size_t>(op.out)];
  const int64_t g = op.ints[0];
  const dnnl_dims_t strides = {op.ints[1], op.ints[2]}, dil = {op.ints[3] - 1, op.ints[4] - 1};
  const dnnl_dims_t pl = {op.ints[5], op.ints[6]}, pr = {op.ints[7], op.ints[8]};
  const int64_t oc = de ? wd[1] * g : wd[0];
  std::vector<int64_t> wl;
  dnnl_format_tag_t wtag;
  if (!de) {
    wl = g == 1 ? std::vector<int64_t>{wd[0], wd[1], wd[2], wd[3]} : std::vector<int64_t>{g, wd[0] / g, wd[1], wd[2], wd[3]};
    wtag = g == 1 ? dnnl_oihw : dnnl_goihw;
  } else {
    wl = g == 1 ? std::vector<int64_t>{wd[1], wd[0], wd[2], wd[3]} : std::vector<int64_t>{g, wd[1], wd[0] / g, wd[2], wd[3]};
    wtag = g == 1 ? dnnl_iohw : dnnl_giohw;
  }
  const dnnl_memory_desc_t src = any_md(api_, xd), wei = any_md(api_, wl), dst = any_md(api_, yd);
  const dnnl_memory_desc_t bias = plain_md(api_, {oc});
  const bool has_bias = op.in.size() > 2 && op.in[2] >= 0;
  bool wino = p_.winograd == 1 || (p_.winograd == 2 && winograd_auto(xd, wd));
  wino = wino && winograd_shape(wd, op);
  dnnl_primitive_desc_t pd = nullptr;
  std::vector<dnnl_exec_arg_t> extra;
  dnnl_primitive_attr_t attr = make_attr(op, extra, 4);
  for (int attempt = wino ? 0 : 1; attempt < 2 && !pd; ++attempt) {
    const dnnl_alg_kind_t alg = attempt == 0 ? dnnl_convolution_winograd : de ? dnnl_deconvolution_direct : dnnl_convolution_direct;
    dnnl_status_t st;
    if (de) {
      dnnl_deconvolution_desc_t d;
      st = api_.dnnl_dilated_deconvolution_forward_desc_init(&d, dnnl_forward_inference, alg, &src, &wei, has_bias ? &bias : nullptr, &dst, strides, dil, pl, pr);
      if (st == dnnl_success) st = api_.dnnl_primitive_desc_create(&pd, &d, attr, engine_, nullptr);
    } else {
      dnnl_convolution_desc_t d;
      st = api_.dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_inference, alg, &src, &wei, has_bias ? &bias : nullptr, &dst, strides, dil, pl, pr);
      if (st == dnnl_success) st = api_.dnnl_primitive_desc_create(&pd, &d, attr, engine_, nullptr);
    }
    if (st != dnnl_success) pd = nullptr;
    if (attempt == 1 && st != dnnl_success) api_.dnnl_primitive_attr_destroy(attr);
    if (attempt == 1) dnnl_check(st, de ? "deconvolution" : "convolution");
  }
  api_.dnnl_primitive_attr_destroy(attr);
  std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, as_md(op.in[0], query(api_, pd, dnnl_query_src_md))}};
  const dnnl_memory_desc_t wuser = tag_md(api_, wl, wtag);
  args.push_back({DNNL_ARG_WEIGHTS, constant_memory(op.in[1], &wuser, &query(api_, pd, dnnl_query_weights_md))});
  if (has_bias) args.push_back({DNNL_ARG_BIAS, constant_memory(op.in[2], &bias, nullptr)});
  const dnnl_memory_desc_t dmd = query(api_, pd, dnnl_query_dst_md);
  int32_t sum = -1;
  for (const PostOp& po : op.post)
    if (po.kind == PostKind::kSum) sum = po.value;
  bool in_place = false;
  if (sum >= 0) {
    const Val& o = vals_[static_cast<size_t>(sum)];
    in_place = !o.dynamic && o.buffer >= 0 && api_.dnnl_memory_desc_equal(&o.md, &dmd) &&
               o.buffer != vals_[static_cast<size_t>(op.in[0])].buffer;
    for (size_t v = 0; v < vals_.size() && in_place; ++v)
      if (vals_[v].mem && vals_[v].buffer == o.buffer && last_use_[v] > current_op_) in_place = false;
    for (int32_t out : p_.outputs) in_place = in_place && out != op.out;
  }
  if (in_place) {
    set_value(op.out, dmd, sum);
  } else {
    set_value(op.out, dmd);
    if (sum >= 0) {  // dst starts as a copy of the residual
      const Val& o = vals_[static_cast<size_t>(sum)];
      dnnl_primitive_desc_t rpd = nullptr;
      dnnl_check(api_.dnnl_reorder_primitive_desc_create(&rpd, &o.md, engine_, &dmd, engine_, nullptr), "residual copy");
      add_step(rpd, {{DNNL_ARG_FROM, o.mem}, {DNNL_ARG_TO, vals_[static_cast<size_t>(op.out)].mem}}, "reorder");
    }
  }
  args.push_back({DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem});
  args.insert(args.end(), extra.begin(), extra.end());
  add_step(pd, args, de ? "deconv" : "conv");
}

// Value v as a (possibly strided) matmul operand of `rank`, last two axes swapped when `trans`.
static std::vector<int64_t> pad_rank(std::vector<int64_t> d, size_t rank) {
  while (d.size() < rank) d.insert(d.begin(), 1);
  return d;
}

void Plan::build_matmul(const Op& op) {
  const auto& yd = p_.dims[static_cast<size_t>(op.out)];
  const size_t r = yd.size();
  dnnl_memory_desc_t mds[2];
  dnnl_memory_t mems[2] = {nullptr, nullptr};
  bool is_const[2] = {false, false};
  for (int k = 0; k < 2; ++k) {
    const int32_t v = op.in[static_cast<size_t>(k)];
    for (const Constant& c : p_.constants) is_const[k] |= c.value == v;
    const bool trans = op.ints[static_cast<size_t>(k)] != 0;
    const Val& x = vals_[static_cast<size_t>(v)];
    dnnl_memory_desc_t base = is_const[k] || !strided(x.md) ? plain_md(api_, p_.dims[static_cast<size_t>(v)]) : x.md;
    std::vector<int64_t> d(base.dims, base.dims + base.ndims);
    std::vector<int64_t> s(base.format_desc.blocking.strides, base.format_desc.blocking.strides + base.ndims);
    if (trans) std::swap(d[d.size() - 1], d[d.size() - 2]), std::swap(s[s.size() - 1], s[s.size() - 2]);
    while (d.size() < r) s.insert(s.begin(), d[0] * s[0]), d.insert(d.begin(), 1);
    dnnl_check(api_.dnnl_memory_desc_init_by_strides(&mds[k], static_cast<int>(r), d.data(), dnnl_f32, s.data()), "matmul operand");
    if (is_const[k]) continue;
    if (strided(x.md)) mems[k] = view_memory(v, mds[k]);
    else {
      as_plain(v);
      mems[k] = new_memory(mds[k], buffers_[static_cast<size_t>(temps_.back())].data);
    }
  }
  dnnl_memory_desc_t wmd = is_const[1] ? any_md(api_, std::vector<int64_t>(mds[1].dims, mds[1].dims + r)) : mds[1];
  const bool has_bias = op.in.size() > 2 && op.in[2] >= 0;
  std::vector<int64_t> bd(r, 1);
  bd[r - 1] = yd[r - 1];
  const dnnl_memory_desc_t bias = plain_md(api_, bd), dst = plain_md(api_, yd);
  dnnl_matmul_desc_t d;
  dnnl_check(api_.dnnl_matmul_desc_init(&d, &mds[0], &wmd, has_bias ? &bias : nullptr, &dst), "matmul");
  std::vector<dnnl_exec_arg_t> extra;
  dnnl_primitive_desc_t pd = make_pd(api_, &d, make_attr(op, extra, static_cast<int>(r)), engine_, "matmul");
  if (is_const[0]) mems[0] = constant_memory(op.in[0], &mds[0], nullptr);
  if (is_const[1]) mems[1] = constant_memory(op.in[1], &mds[1], &query(api_, pd, dnnl_query_weights_md));
  std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, mems[0]}, {DNNL_ARG_WEIGHTS, mems[1]}};
  if (has_bias) args.push_back({DNNL_ARG_BIAS, constant_memory(op.in[2], &bias, nullptr)});
  set_value(op.out, dst);
  args.push_back({DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem});
  args.insert(args.end(), extra.begin(), extra.end());
  add_step(pd, args, "matmul");
}

void Plan::build_pool(const Op& op) {
  const Val& x = vals_[static_cast<size_t>(op.in[0])];
  const dnnl_memory_desc_t dst = any_md(api_, p_.dims[static_cast<size_t>(op.out)]);
  const dnnl_dims_t k = {op.ints[0], op.ints[1]}, s = {op.ints[2], op.ints[3]}, dl = {op.ints[4] - 1, op.ints[5] - 1};
  const dnnl_dims_t pl = {op.ints[6], op.ints[7]}, pr = {op.ints[8], op.ints[9]};
  dnnl_pooling_v2_desc_t d;
  dnnl_check(api_.dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, static_cast<dnnl_alg_kind_t>(op.alg), &x.md, &dst, s, k, dl, pl, pr), "pooling");
  dnnl_primitive_desc_t pd = make_pd(api_, &d, nullptr, engine_, "pooling");
  dnnl_memory_t src = x.mem;
  set_value(op.out, query(api_, pd, dnnl_query_dst_md));
  add_step(pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem}}, "pool");
}

void Plan::build_batchnorm(const Op& op) {
  const Val& x = vals_[static_cast<size_t>(op.in[0])];
  dnnl_batch_normalization_desc_t d;
  dnnl_check(api_.dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_inference, &x.md, op.floats[0],
                                                             dnnl_use_global_stats | dnnl_use_scale | dnnl_use_shift), "batch_normalization");
  dnnl_primitive_desc_t pd = make_pd(api_, &d, nullptr, engine_, "batch_normalization");
  dnnl_memory_t src = x.mem;
  std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_SCALE, constant_memory(op.in[1], nullptr, nullptr)},
                                       {DNNL_ARG_SHIFT, constant_memory(op.in[2], nullptr, nullptr)},
                                       {DNNL_ARG_MEAN, constant_memory(op.in[3], nullptr, nullptr)},
                                       {DNNL_ARG_VARIANCE, constant_memory(op.in[4], nullptr, nullptr)}};
  set_value(op.out, query(api_, pd, dnnl_query_dst_md));
  args.push_back({DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem});
  add_step(pd, args, "batch_normalization");
}

void Plan::build_eltwise(const Op& op) {
  const Val& x = vals_[static_cast<size_t>(op.in[0])];
  dnnl_eltwise_desc_t d;
  dnnl_check(api_.dnnl_eltwise_forward_desc_init(&d, dnnl_forward_inference, static_cast<dnnl_alg_kind_t>(op.alg), &x.md, op.floats[0], op.floats[1]), "eltwise");
  dnnl_primitive_desc_t pd = make_pd(api_, &d, nullptr, engine_, "eltwise");
  dnnl_memory_t src = x.mem;
  set_value(op.out, query(api_, pd, dnnl_query_dst_md));
  add_step(pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem}}, "eltwise");
}

void Plan::build_binary(const Op& op) {
  const Val& a = vals_[static_cast<size_t>(op.in[0])];
  const dnnl_memory_desc_t amd = a.md;
  const dnnl_memory_t amem = a.mem;
  const auto& ad = p_.dims[static_cast<size_t>(op.in[0])];
  const int32_t b = op.in[1];
  bool bconst = false;
  for (const Constant& c : p_.constants) bconst |= c.value == b;
  dnnl_memory_desc_t bmd;
  dnnl_memory_t bmem;
  if (!bconst && p_.dims[static_cast<size_t>(b)] == ad) {
    bmd = amd;
    bmem = as_md(b, amd);
  } else {
    bmd = plain_md(api_, pad_rank(p_.dims[static_cast<size_t>(b)], ad.size()));
    if (bconst) bmem = constant_memory(b, &bmd, nullptr);
    else if (as_plain(b) == vals_[static_cast<size_t>(b)].mem) bmem = view_memory(b, bmd);
    else bmem = new_memory(bmd, buffers_[static_cast<size_t>(temps_.back())].data);
  }
  dnnl_binary_desc_t d;
  dnnl_check(api_.dnnl_binary_desc_init(&d, static_cast<dnnl_alg_kind_t>(op.alg), &amd, &bmd, &amd), "binary");
  dnnl_primitive_desc_t pd = make_pd(api_, &d, nullptr, engine_, "binary");
  set_value(op.out, amd);
  add_step(pd, {{DNNL_ARG_SRC_0, amem}, {DNNL_ARG_SRC_1, bmem}, {DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem}}, "binary");
}

void Plan::build_softmax(const Op& op) {
  const dnnl_memory_t src = as_plain(op.in[0]);
  const dnnl_memory_desc_t md = plain_md(api_, p_.dims[static_cast<size_t>(op.in[0])]);
  dnnl_softmax_desc_t d;
  dnnl_check(api_.dnnl_softmax_forward_desc_init(&d, dnnl_forward_inference, &md, static_cast<int>(op.ints[0])), "softmax");
  dnnl_primitive_desc_t pd = make_pd(api_, &d, nullptr, engine_, "softmax");
  set_value(op.out, md);
  add_step(pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem}}, "softmax");
}

void Plan::build_transpose(const Op& op) {
  const Val& x = vals_[static_cast<size_t>(op.in[0])];
  std::vector<int> perm(op.ints.begin(), op.ints.end());
  if (strided(x.md)) {  // a view: the consumers read through strides
    std::vector<int> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int>(i);
    dnnl_memory_desc_t md;
    dnnl_check(api_.dnnl_memory_desc_permute_axes(&md, &x.md, inv.data()), "permute_axes");
    set_value(op.out, md, op.in[0]);
    return;
  }
  // Blocked input: one reorder writes the transposed plain output.
  const dnnl_memory_desc_t omd = plain_md(api_, p_.dims[static_cast<size_t>(op.out)]);
  set_value(op.out, omd);
  dnnl_memory_desc_t vmd;
  dnnl_check(api_.dnnl_memory_desc_permute_axes(&vmd, &omd, perm.data()), "permute_axes");
  dnnl_memory_t view = view_memory(op.out, vmd);
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_check(api_.dnnl_reorder_primitive_desc_create(&pd, &x.md, engine_, &vmd, engine_, nullptr), "transpose");
  add_step(pd, {{DNNL_ARG_FROM, x.mem}, {DNNL_ARG_TO, view}}, "transpose");
}

void Plan::build_reshape(const Op& op) {
  const Val& x = vals_[static_cast<size_t>(op.in[0])];
  const dnnl_memory_desc_t omd = plain_md(api_, p_.dims[static_cast<size_t>(op.out)]);
  if (is_plain(api_, x.md)) {
    set_value(op.out, omd, op.in[0]);
    return;
  }
  set_value(op.out, omd);
  const dnnl_memory_desc_t vmd = plain_md(api_, p_.dims[static_cast<size_t>(op.in[0])]);
  dnnl_memory_t view = view_memory(op.out, vmd);
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_check(api_.dnnl_reorder_primitive_desc_create(&pd, &x.md, engine_, &vmd, engine_, nullptr), "reshape");
  add_step(pd, {{DNNL_ARG_FROM, x.mem}, {DNNL_ARG_TO, view}}, "reorder");
}

void Plan::build_concat(const Op& op) {
  std::vector<dnnl_memory_desc_t> mds;
  std::vector<dnnl_exec_arg_t> args;
  for (size_t i = 0; i < op.in.size(); ++i) {
    const int32_t v = op.in[i];
    bool c = false;
    for (const Constant& k : p_.constants) c |= k.value == v;
    mds.push_back(c ? plain_md(api_, p_.dims[static_cast<size_t>(v)]) : vals_[static_cast<size_t>(v)].md);
    args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), c ? constant_memory(v, nullptr, nullptr) : vals_[static_cast<size_t>(v)].mem});
  }
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_check(api_.dnnl_concat_primitive_desc_create(&pd, nullptr, static_cast<int>(mds.size()), static_cast<int>(op.ints[0]), mds.data(), nullptr, engine_), "concat");
  set_value(op.out, query(api_, pd, dnnl_query_dst_md));
  args.push_back({DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem});
  add_step(pd, args, "concat");
}

void Plan::build_layernorm(const Op& op) {
  const dnnl_memory_t src = as_plain(op.in[0]);
  const dnnl_memory_desc_t md = plain_md(api_, p_.dims[static_cast<size_t>(op.in[0])]);
  const bool scale = op.in.size() > 1 && op.in[1] >= 0, shift = op.in.size() > 2 && op.in[2] >= 0;
  dnnl_layer_normalization_desc_t d;
  dnnl_check(api_.dnnl_layer_normalization_forward_desc_init(&d, dnnl_forward_inference, &md, nullptr, op.floats[0],
                                                             (scale ? unsigned{dnnl_use_scale} : 0u) | (shift ? unsigned{dnnl_use_shift} : 0u)), "layer_normalization");
  dnnl_primitive_desc_t pd = make_pd(api_, &d, nullptr, engine_, "layer_normalization");
  std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, src}};
  if (scale) args.push_back({DNNL_ARG_SCALE, constant_memory(op.in[1], nullptr, nullptr)});
  if (shift) args.push_back({DNNL_ARG_SHIFT, constant_memory(op.in[2], nullptr, nullptr)});
  set_value(op.out, md);
  args.push_back({DNNL_ARG_DST, vals_[static_cast<size_t>(op.out)].mem});
  add_step(pd, args, "layer_normalization");
}

void Plan::build_reduce(const Op& op) {
  const dnnl_memory_t src = as_plain(op.in[0]);
  const auto& xd = p_.dims[static_cast<size_t>(op.in[0])];
  const dnnl_memory_desc_t smd = plain_md(api_, xd);
  std::vector<int64_t> kd = xd;
  for (size_t i = 1; i < op.ints.size(); ++i) kd[static_cast<size_t>(op.ints[i])] = 1;
  const dnnl_memory_desc_t kmd = plain_md(api_, kd);
  dnnl_reduction_desc_t d;
  dnnl_check(api_.dnnl_reduction_desc_init(&d, static_cast<dnnl_alg_kind_t>(op.alg), &smd, &kmd, 0.f, 0.f), "reduction");
  dnnl_primitive_desc_t pd = make_pd(api_, &d, nullptr, engine_, "reduction");
  set_value(op.out, plain_md(api_, p_.dims[static_cast<size_t>(op.out)]));
  add_step(pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, view_memory(op.out, kmd)}}, "reduction");
}

void Plan::build_erf(const Op& op) {
  Step s;
  auto [in, in_root] = plain_storage(op.in[0]);
  set_value(op.out, plain_md(api_, p_.dims[static_cast<size_t>(op.out)]));
  const Val& y = vals_[static_cast<size_t>(op.out)];
  s.erf_in = in;
  s.erf_in_root = in_root;
  s.erf_out = y.dynamic ? nullptr : buffers_[static_cast<size_t>(y.buffer)].data;
  s.erf_out_root = y.dynamic ? y.root : -1;
  s.erf_n = 1;
  for (int64_t d : p_.dims[static_cast<size_t>(op.out)]) s.erf_n *= d;
  impls_.push_back("erf:loop");
  steps_.push_back(std::move(s));
}

}  // namespace kiln_onednn
