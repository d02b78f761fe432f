#include "xnn_runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "xnn_dwconv.h"
#include "xnn_silu.h"
#include "xnn_tsan.h"
#include "xnn_winograd.h"

namespace kiln_xnnpack {

using kiln::sdk::fail;

Pool::Pool(size_t threads) : threads_(threads < 1 ? 1 : threads) {
  if (threads_ > 1) {
    pool_ = api().pthreadpool_create(threads_);
    if (!pool_) fail(KILN_STATUS_INTERNAL, "pthreadpool_create(" + std::to_string(threads_) + ") failed");
  }
}

Pool::~Pool() {
  if (pool_) api().pthreadpool_destroy(pool_);
}

namespace {

uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

std::vector<size_t> size_dims(const std::vector<int64_t>& d) { return std::vector<size_t>(d.begin(), d.end()); }

// d[3 p + c] = s<c>[p] for p in [p0, p1): an image's three planes to NHWC,
// pixel by pixel, which the compiler vectorizes (224x224, Zen 4, hot
// cache: 28 us with SSE2, 15 us with AVX2; the channel-outer loop of other
// channel counts stores one float at a time).
template <int>
void interleave3_body(const float* s0, const float* s1, const float* s2, float* d, size_t p0, size_t p1) {
  for (size_t p = p0; p < p1; ++p) {
    d[3 * p] = s0[p];
    d[3 * p + 1] = s1[p];
    d[3 * p + 2] = s2[p];
  }
}
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2"))) void interleave3_avx2(const float* s0, const float* s1, const float* s2, float* d,
                                                      size_t p0, size_t p1) {
  interleave3_body<1>(s0, s1, s2, d, p0, p1);
}
#endif
void interleave3(const float* s0, const float* s1, const float* s2, float* d, size_t p0, size_t p1) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return interleave3_avx2(s0, s1, s2, d, p0, p1);
#endif
  interleave3_body<0>(s0, s1, s2, d, p0, p1);
}

// One NCHW <-> NHWC transpose, split into (n, pixel tile) tasks.
struct TransposeTask {
  const float* src;
  float* dst;
  size_t c, hw, tiles;
  bool to_nhwc;
  static constexpr size_t kTile = 64;
  static void run(void* ctx, size_t task) {
    tsan_acquire(ctx);
    run_task(static_cast<const TransposeTask*>(ctx), task);
    tsan_release(ctx);
  }
  static void run_task(const TransposeTask* t, size_t task) {
    const size_t n = task / t->tiles;
    const size_t p0 = (task % t->tiles) * kTile;
    const size_t p1 = std::min(p0 + kTile, t->hw);
    const size_t plane = t->c * t->hw;
    const float* s = t->src + n * plane;
    float* d = t->dst + n * plane;
    if (t->to_nhwc && t->c == 3) {
      interleave3(s, s + t->hw, s + 2 * t->hw, d, p0, p1);
    } else if (t->to_nhwc) {
      for (size_t ch = 0; ch < t->c; ++ch)
        for (size_t p = p0; p < p1; ++p) d[p * t->c + ch] = s[ch * t->hw + p];
    } else {
      for (size_t ch = 0; ch < t->c; ++ch)
        for (size_t p = p0; p < p1; ++p) d[ch * t->hw + p] = s[p * t->c + ch];
    }
  }
};

}  // namespace

Runtime::Runtime(std::shared_ptr<const Program> program, std::shared_ptr<Pool> pool, bool native_depthwise,
                 WinogradMode winograd, BlockFusion fusion)
    : program_(std::move(program)), pool_(std::move(pool)) {
  const Program& p = *program_;
  p.validate();
  ptr_.assign(p.values.size(), nullptr);
  owned_.assign(p.values.size(), 0);
  host_out_.assign(p.outputs.size(), nullptr);
  into_concat_.assign(p.ops.size(), -1);
  channel_offset_.assign(p.ops.size(), 0);
  operators_.assign(p.ops.size(), nullptr);
  native_dw_.assign(p.ops.size(), 0);
  isa_ = kiln_xnnpack::kernel_isa();
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    native_dw_[i] = native_depthwise && op.kind == OpKind::kDepthwise && native_depthwise_supported() &&
                    op.floats.size() >= 2 && native_depthwise_fits(op.ints, p.values[op.in.at(0)].dims);
  }
  // winograd=always asks for Winograd on every 3x3 stride-1 convolution, a
  // stem's too: the stems give way (auto picks none with so few channels).
  if (winograd == WinogradMode::kAlways) fusion.stem = false;
  blocks_ = std::make_unique<FusedBlocks>(p, fusion, pool_->threads());
  plan_direct_concat();
  wino_ = plan_winograd(p, winograd, into_concat_);
  for (size_t i = 0; i < p.ops.size(); ++i) {  // a stem convolution runs in its block
    if (!blocks_->covers(i) || !wino_.conv[i]) continue;
    if (wino_.add[i] >= 0) wino_.fused[static_cast<size_t>(wino_.add[i])] = 0;
    wino_.add[i] = -1;
    wino_.conv[i].reset();
  }
  plan_segments();
  // Values the plugin must hold in memory of its own or the host's: the
  // boundary, and whatever crosses from one segment to another.
  std::vector<uint8_t> materialized(p.values.size(), 0);
  std::vector<int32_t> producer_seg(p.values.size(), -1);
  // A Winograd Conv's output never exists when the Conv writes its Add's.
  auto elided = [&](uint32_t v) { return producer_[v] >= 0 && wino_.add[static_cast<size_t>(producer_[v])] >= 0; };
  for (const Boundary& b : p.inputs) materialized[b.value] = 1;
  for (const Boundary& b : p.outputs) materialized[b.value] = 1;
  for (size_t s = 0; s < segments_.size(); ++s) {
    for (size_t i = segments_[s].begin; i < segments_[s].end; ++i) {
      const Op& op = p.ops[i];
      producer_seg[op.out] = static_cast<int32_t>(s);
      if (segments_[s].native && into_concat_[i] < 0 && !blocks_->hidden(op.out) && !elided(op.out))
        materialized[op.out] = 1;
      for (uint32_t v : op.in) {
        if (v == kNoValue || p.values[v].constant >= 0 || blocks_->hidden(v) || elided(v)) continue;
        if (segments_[s].native || (producer_seg[v] >= 0 && producer_seg[v] != static_cast<int32_t>(s))) materialized[v] = 1;
      }
    }
  }
  // Plugin-owned storage: every materialized value but the plain (non-
  // transposed) inputs and outputs, which are bound to host memory.
  std::vector<uint8_t> host_bound(p.values.size(), 0);
  for (const Boundary& b : p.inputs) host_bound[b.value] |= b.nchw && !blocks_->reads_nchw(b.value) ? 0 : 1;
  for (const Boundary& b : p.outputs) {
    bool is_input = false;
    for (const Boundary& i : p.inputs) is_input |= i.value == b.value;
    if (!b.nchw && !is_input) host_bound[b.value] = 1;
  }
  for (const Boundary& b : p.outputs)
    if (b.nchw) host_bound[b.value] = 0;
  for (size_t v = 0; v < p.values.size(); ++v)
    owned_[v] = materialized[v] && !host_bound[v] && p.values[v].constant < 0;
  place_owned();
  scratch_bytes_ += blocks_->scratch_bytes();
  scratch_bytes_ += wino_.scratch.size() * sizeof(float);
  for (Segment& seg : segments_)
    if (!seg.native) build_segment(seg, materialized);
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (into_concat_[i] >= 0 && !wino_.conv[i]) build_direct_conv(i);
  plan_steps();
}

// The steps KILN_XNNPACK_PROFILE times: one per XNNPACK segment, one per op
// (or fused block) the plugin runs itself, and the boundary layouts.
void Runtime::plan_steps() {
  const Program& p = *program_;
  step_of_.assign(p.ops.size(), 0);
  if (!timer_.on()) return;
  auto op_label = [&](size_t i) {
    std::string dims;
    for (int64_t d : p.values[p.ops[i].out].dims) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    return std::string(op_name(p.ops[i].kind)) + " " + dims;
  };
  step_in_ = timer_.add("inputs (layout to NHWC)");
  for (const Segment& seg : segments_) {
    if (!seg.native) {
      std::string label = "xnnpack ops " + std::to_string(seg.begin) + "-" + std::to_string(seg.end - 1) + ":";
      for (size_t i = seg.begin; i < seg.end && i < seg.begin + 4; ++i) label += " " + op_label(i) + ";";
      if (seg.end - seg.begin > 4) label += " ...";
      const size_t id = timer_.add(label);
      for (size_t i = seg.begin; i < seg.end; ++i) step_of_[i] = id;
      continue;
    }
    for (size_t i = seg.begin; i < seg.end; ++i) {
      if (blocks_->starts(i)) {
        step_of_[i] = timer_.add("op " + std::to_string(i) + " fused block " + blocks_->describe(i));
        i = blocks_->end(i) - 1;
      } else if (!wino_.fused[i]) {
        const char* how = wino_.conv[i] ? "winograd " : native_dw_[i] ? "native " : "";
        step_of_[i] = timer_.add("op " + std::to_string(i) + " " + how + op_label(i));
      }
    }
  }
  step_out_ = timer_.add("outputs (layout to NCHW / copy)");
}

// Plugin-owned values share one arena: two values whose segment ranges
// (from the segment writing them to the last reading them) overlap get
// disjoint bytes; others may reuse the same. Largest first, each at the
// lowest 64-byte-aligned offset that is free for its whole range. Reuse keeps
// the buffers a run touches few and warm in cache (mobilenet_v2: 25.6 MB of
// separate buffers before).
void Runtime::place_owned() {
  const Program& p = *program_;
  const size_t n_seg = segments_.size();
  std::vector<size_t> op_seg(p.ops.size(), 0);
  for (size_t s = 0; s < n_seg; ++s)
    for (size_t i = segments_[s].begin; i < segments_[s].end; ++i) op_seg[i] = s;
  std::vector<size_t> first(p.values.size(), 0), last(p.values.size(), 0);
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    first[op.out] = op_seg[i];
    for (uint32_t v : op.in)
      if (v != kNoValue) last[v] = std::max(last[v], op_seg[i]);
  }
  for (size_t i = 0; i < p.ops.size(); ++i) {  // a Conv writes into its Concat's value before the Concat runs
    if (into_concat_[i] < 0) continue;
    const uint32_t cat = p.ops[static_cast<size_t>(into_concat_[i])].out;
    first[cat] = std::min(first[cat], op_seg[i]);
  }
  for (const Boundary& b : p.inputs) first[b.value] = 0;
  for (const Boundary& b : p.outputs) last[b.value] = n_seg;
  for (size_t v = 0; v < p.values.size(); ++v) last[v] = std::max(last[v], first[v]);
  std::vector<uint32_t> order;
  for (uint32_t v = 0; v < p.values.size(); ++v)
    if (owned_[v]) order.push_back(v);
  auto floats_of = [&](uint32_t v) { return (static_cast<size_t>(numel(p.values[v].dims)) + 15) / 16 * 16; };
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return floats_of(a) > floats_of(b); });
  std::vector<size_t> offset(p.values.size(), 0);
  std::vector<uint32_t> placed;
  size_t total = 0;
  for (uint32_t v : order) {
    // Busy byte ranges of placed values live at the same time, by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (uint32_t u : placed)
      if (first[u] <= last[v] && first[v] <= last[u]) busy.emplace_back(offset[u], offset[u] + floats_of(u));
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto& [b, e] : busy) {
      if (at + floats_of(v) <= b) break;
      at = std::max(at, e);
    }
    offset[v] = at;
    total = std::max(total, at + floats_of(v));
    placed.push_back(v);
  }
  arena_.assign(total, 0.0f);  // 64-byte aligned
  float* base = arena_.data();
  for (uint32_t v : placed) ptr_[v] = base + offset[v];
  scratch_bytes_ = arena_.size() * sizeof(float);
}

// Convolutions whose only reader is a channel Concat (fire and inception
// modules) write into the Concat's buffer directly.
void Runtime::plan_direct_concat() {
  const Program& p = *program_;
  std::vector<size_t> readers(p.values.size(), 0);
  std::vector<int64_t>& producer = producer_;
  producer.assign(p.values.size(), -1);
  for (size_t i = 0; i < p.ops.size(); ++i) {
    for (uint32_t v : p.ops[i].in)
      if (v != kNoValue) ++readers[v];
    producer[p.ops[i].out] = static_cast<int64_t>(i);
  }
  for (const Boundary& b : p.outputs) ++readers[b.value];
  for (size_t c = 0; c < p.ops.size(); ++c) {
    const Op& cat = p.ops[c];
    if (cat.kind != OpKind::kConcat || p.values[cat.out].dims.size() != 4 || cat.ints.at(0) != 3) continue;
    int64_t offset = 0;
    for (uint32_t v : cat.in) {
      const int64_t pi = producer[v];
      // A Conv that ends a fused block is run by the block (its input has no buffer).
      if (pi >= 0 && readers[v] == 1 && p.ops[static_cast<size_t>(pi)].kind == OpKind::kConv &&
          !blocks_->covers(static_cast<size_t>(pi))) {
        into_concat_[static_cast<size_t>(pi)] = static_cast<int64_t>(c);
        channel_offset_[static_cast<size_t>(pi)] = offset;
      }
      offset += p.values[v].dims[3];
    }
  }
}

void Runtime::build_direct_conv(size_t index) {
  const Program& p = *program_;
  const Op& op = p.ops[index];
  const std::vector<int64_t>& i = op.ints;
  if (i.size() < 13) fail(KILN_STATUS_INVALID_ARGUMENT, "op Conv lacks parameters");
  const std::vector<int64_t>& xd = p.values[op.in[0]].dims;
  const std::vector<int64_t>& cd = p.values[p.ops[static_cast<size_t>(into_concat_[index])].out].dims;
  const float* bias = op.in.size() > 2 && op.in[2] != kNoValue
                          ? p.constants[static_cast<size_t>(p.values[op.in[2]].constant)].data() : nullptr;
  const float* filter = p.constants[static_cast<size_t>(p.values[op.in[1]].constant)].data();
  check(api().xnn_create_convolution2d_nhwc_f32(
            u32(i[0]), u32(i[1]), u32(i[2]), u32(i[3]), u32(i[4]), u32(i[5]), u32(i[6]), u32(i[7]), u32(i[8]),
            u32(i[9]), u32(i[10]), static_cast<size_t>(i[11]), static_cast<size_t>(i[12]), static_cast<size_t>(xd[3]),
            static_cast<size_t>(cd[3]), filter, bias, op.floats.at(0), op.floats.at(1), 0, &operators_[index]),
        "create_convolution2d_nhwc_f32");
  // Both buffers are the plugin's (4-D values at the boundary are transposed
  // into buffers of its own), so the operator is set up once.
  float* cat = ptr_[p.ops[static_cast<size_t>(into_concat_[index])].out];
  if (!cat || !ptr_[op.in[0]]) fail(KILN_STATUS_INTERNAL, "a Conv into a Concat lacks a buffer");
  float* out = cat + channel_offset_[index];
  check(api().xnn_setup_convolution2d_nhwc_f32(operators_[index], static_cast<size_t>(xd[0]), static_cast<size_t>(xd[1]),
                                               static_cast<size_t>(xd[2]), ptr_[op.in[0]], out, pool_->get()),
        "setup_convolution2d_nhwc_f32");
}

Runtime::~Runtime() {
  for (Segment& seg : segments_)
    if (seg.runtime) api().xnn_delete_runtime(seg.runtime);
  for (xnn_operator_t op : operators_)
    if (op) api().xnn_delete_operator(op);
}

void Runtime::plan_segments() {
  const std::vector<Op>& ops = program_->ops;
  for (size_t i = 0; i < ops.size();) {
    Segment seg;
    auto native = [&](size_t k) {
      return ops[k].kind == OpKind::kConcat || ops[k].kind == OpKind::kSiLU || into_concat_[k] >= 0 || native_dw_[k] || blocks_->covers(k) ||
             wino_.conv[k] || wino_.fused[k];
    };
    seg.native = native(i);
    seg.begin = i;
    do ++i;
    while (i < ops.size() && native(i) == seg.native);
    seg.end = i;
    segments_.push_back(std::move(seg));
  }
}

void Runtime::build_segment(Segment& seg, const std::vector<uint8_t>& materialized) {
  const Program& p = *program_;
  const Api& x = api();
  std::vector<uint32_t> local(p.values.size(), kNoValue);
  std::vector<uint8_t> produced_here(p.values.size(), 0);
  for (size_t i = seg.begin; i < seg.end; ++i) produced_here[p.ops[i].out] = 1;
  // External values (read or written by the host or another segment) take
  // ids [0, externals), reserved when the subgraph is created.
  auto external = [&](uint32_t v) {
    return v != kNoValue && p.values[v].constant < 0 && materialized[v] != 0;
  };
  for (size_t i = seg.begin; i < seg.end; ++i) {
    std::vector<uint32_t> vs = p.ops[i].in;
    vs.push_back(p.ops[i].out);
    for (uint32_t v : vs) {
      if (!external(v) || local[v] != kNoValue) continue;
      local[v] = static_cast<uint32_t>(seg.external.size());
      seg.external.push_back(v);
    }
  }
  xnn_subgraph_t sg = nullptr;
  check(x.xnn_create_subgraph(static_cast<uint32_t>(seg.external.size()), 0, &sg), "create_subgraph");
  struct SubgraphDeleter {
    xnn_subgraph_t sg;
    ~SubgraphDeleter() { api().xnn_delete_subgraph(sg); }
  } deleter{sg};
  std::vector<uint8_t> defined(p.values.size(), 0);
  auto define = [&](uint32_t v) {
    if (v == kNoValue || defined[v]) return;
    defined[v] = 1;
    const ValueInfo& info = p.values[v];
    const std::vector<size_t> dims = size_dims(info.dims);
    const void* data = info.constant >= 0 ? p.constants[static_cast<size_t>(info.constant)].data() : nullptr;
    uint32_t flags = 0;
    if (external(v)) flags = produced_here[v] ? XNN_VALUE_FLAG_EXTERNAL_OUTPUT : XNN_VALUE_FLAG_EXTERNAL_INPUT;
    check(x.xnn_define_tensor_value(sg, xnn_datatype_fp32, dims.size(), dims.data(), data,
                                    flags ? local[v] : XNN_INVALID_VALUE_ID, flags, &local[v]),
          "define_tensor_value");
  };
  for (size_t i = seg.begin; i < seg.end; ++i) {
    for (uint32_t v : p.ops[i].in) define(v);
    define(p.ops[i].out);
  }
  for (size_t e = 0; e < seg.external.size(); ++e) seg.bound.push_back({static_cast<uint32_t>(e), nullptr});
  for (size_t i = seg.begin; i < seg.end; ++i) define_op(sg, p.ops[i], local);
  // The pool's workers sleep after the run's last op, not between segments.
  const uint32_t flags = seg.end == p.ops.size() ? XNN_FLAG_YIELD_WORKERS : 0;
  check(x.xnn_create_runtime_v2(sg, pool_->get(), flags, &seg.runtime), "create_runtime");
}

void Runtime::define_op(xnn_subgraph_t sg, const Op& op, const std::vector<uint32_t>& local) const {
  const Api& x = api();
  const std::vector<int64_t>& i = op.ints;
  const float lo = op.floats.size() >= 2 ? op.floats[0] : -std::numeric_limits<float>::infinity();
  const float hi = op.floats.size() >= 2 ? op.floats[1] : std::numeric_limits<float>::infinity();
  auto in = [&](size_t k) { return k < op.in.size() && op.in[k] != kNoValue ? local[op.in[k]] : XNN_INVALID_VALUE_ID; };
  const uint32_t out = local[op.out];
  auto need = [&](size_t n) {
    if (i.size() < n) fail(KILN_STATUS_INVALID_ARGUMENT, std::string("op ") + op_name(op.kind) + " lacks parameters");
  };
  int s = xnn_status_success;
  switch (op.kind) {
    case OpKind::kConv:
      need(13);
      s = x.xnn_define_convolution_2d(sg, u32(i[0]), u32(i[1]), u32(i[2]), u32(i[3]), u32(i[4]), u32(i[5]), u32(i[6]),
                                      u32(i[7]), u32(i[8]), u32(i[9]), u32(i[10]), static_cast<size_t>(i[11]),
                                      static_cast<size_t>(i[12]), lo, hi, in(0), in(1), in(2), out, 0);
      break;
    case OpKind::kDepthwise:
      need(12);
      s = x.xnn_define_depthwise_convolution_2d(sg, u32(i[0]), u32(i[1]), u32(i[2]), u32(i[3]), u32(i[4]), u32(i[5]),
                                                u32(i[6]), u32(i[7]), u32(i[8]), u32(i[9]), u32(i[10]),
                                                static_cast<size_t>(i[11]), lo, hi, in(0), in(1), in(2), out, 0);
      break;
    case OpKind::kFullyConnected: s = x.xnn_define_fully_connected(sg, lo, hi, in(0), in(1), in(2), out, 0); break;
    case OpKind::kMaxPool:
      need(10);
      s = x.xnn_define_max_pooling_2d(sg, u32(i[0]), u32(i[1]), u32(i[2]), u32(i[3]), u32(i[4]), u32(i[5]), u32(i[6]),
                                      u32(i[7]), u32(i[8]), u32(i[9]), lo, hi, in(0), out, 0);
      break;
    case OpKind::kAveragePool:
      need(8);
      s = x.xnn_define_average_pooling_2d(sg, u32(i[0]), u32(i[1]), u32(i[2]), u32(i[3]), u32(i[4]), u32(i[5]),
                                          u32(i[6]), u32(i[7]), lo, hi, in(0), out, 0);
      break;
    case OpKind::kGlobalAveragePool: s = x.xnn_define_global_average_pooling_2d(sg, lo, hi, in(0), out, 0); break;
    case OpKind::kAdd: s = x.xnn_define_add2(sg, lo, hi, in(0), in(1), out, 0); break;
    case OpKind::kMul: s = x.xnn_define_multiply2(sg, lo, hi, in(0), in(1), out, 0); break;
    case OpKind::kSub: s = x.xnn_define_subtract(sg, lo, hi, in(0), in(1), out, 0); break;
    case OpKind::kDiv: s = x.xnn_define_divide(sg, lo, hi, in(0), in(1), out, 0); break;
    case OpKind::kMax: s = x.xnn_define_maximum2(sg, in(0), in(1), out, 0); break;
    case OpKind::kMin: s = x.xnn_define_minimum2(sg, in(0), in(1), out, 0); break;
    case OpKind::kClamp: s = x.xnn_define_clamp(sg, lo, hi, in(0), out, 0); break;
    case OpKind::kElu: s = x.xnn_define_elu(sg, op.floats.at(0), in(0), out, 0); break;
    case OpKind::kLeakyRelu: s = x.xnn_define_leaky_relu(sg, op.floats.at(0), in(0), out, 0); break;
    case OpKind::kHardSwish: s = x.xnn_define_hardswish(sg, in(0), out, 0); break;
    case OpKind::kSigmoid: s = x.xnn_define_sigmoid(sg, in(0), out, 0); break;
    case OpKind::kSoftmax: s = x.xnn_define_softmax(sg, in(0), out, 0); break;
    case OpKind::kAbs: s = x.xnn_define_abs(sg, in(0), out, 0); break;
    case OpKind::kNeg: s = x.xnn_define_negate(sg, in(0), out, 0); break;
    case OpKind::kSqrt: s = x.xnn_define_square_root(sg, in(0), out, 0); break;
    case OpKind::kFloor: s = x.xnn_define_floor(sg, in(0), out, 0); break;
    case OpKind::kCeil: s = x.xnn_define_ceiling(sg, in(0), out, 0); break;
    case OpKind::kPRelu: s = x.xnn_define_prelu(sg, in(0), in(1), out, 0); break;
    case OpKind::kReshape: {
      const std::vector<size_t> d = size_dims(i);
      s = x.xnn_define_static_reshape(sg, d.size(), d.data(), in(0), out, 0);
      break;
    }
    case OpKind::kPad: {
      const std::vector<size_t> d = size_dims(i);
      const size_t r = d.size() / 2;
      s = x.xnn_define_static_constant_pad(sg, d.data(), d.data() + r, op.floats.at(0), in(0), out, 0);
      break;
    }
    case OpKind::kResize:
      need(3);
      s = x.xnn_define_static_resize_bilinear_2d(sg, static_cast<size_t>(i[0]), static_cast<size_t>(i[1]), in(0), out,
                                                 i[2] == kResizeAlignCorners ? XNN_FLAG_ALIGN_CORNERS
                                                 : i[2] == kResizeAsymmetric ? XNN_FLAG_TENSORFLOW_LEGACY_MODE : 0u);
      break;
    case OpKind::kDepthToSpace: need(1); s = x.xnn_define_depth_to_space(sg, in(0), out, u32(i[0]), 0); break;
    default: fail(KILN_STATUS_INTERNAL, std::string("op ") + op_name(op.kind) + " is not an XNNPACK subgraph op");
  }
  check(s, (std::string("define ") + op_name(op.kind)).c_str());
}

void Runtime::transpose(const float* src, float* dst, const std::vector<int64_t>& nhwc, bool to_nhwc) const {
  TransposeTask t{src, dst, static_cast<size_t>(nhwc[3]), static_cast<size_t>(nhwc[1] * nhwc[2]), 0, to_nhwc};
  t.tiles = (t.hw + TransposeTask::kTile - 1) / TransposeTask::kTile;
  tsan_release(&t);
  // Inputs are transposed before the ops run: the workers stay awake for them.
  api().pthreadpool_parallelize_1d(pool_->get(), &TransposeTask::run, &t, static_cast<size_t>(nhwc[0]) * t.tiles,
                                   to_nhwc ? 0 : PTHREADPOOL_FLAG_YIELD_WORKERS);
  tsan_acquire(&t);
}

void Runtime::bind_inputs(const kiln::sdk::Inputs& inputs) {
  const Program& p = *program_;
  if (inputs.size() != p.inputs.size()) {
    fail(KILN_STATUS_INVALID_ARGUMENT, "xnnpack partition takes " + std::to_string(p.inputs.size()) + " inputs, got " +
                                           std::to_string(inputs.size()));
  }
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const Boundary& b = p.inputs[k];
    const kiln::sdk::TensorView t = inputs[k];
    const std::vector<int64_t> want = p.host_dims(b);
    if (t.dtype != KILN_DTYPE_FLOAT32) fail(KILN_STATUS_INVALID_ARGUMENT, "input " + std::to_string(k) + " is " + kiln::sdk::dtype_name(t.dtype) + ", expected float32");
    if (t.shape() != want) {
      fail(KILN_STATUS_INVALID_ARGUMENT, "input " + std::to_string(k) + " has shape " + kiln::sdk::dims_string(t.dims, t.rank) +
                                             ", compiled for " + kiln::sdk::dims_string(want.data(), want.size()));
    }
    if (!t.data || t.nbytes < static_cast<size_t>(t.numel()) * sizeof(float))
      fail(KILN_STATUS_INVALID_ARGUMENT, "input " + std::to_string(k) + " buffer is shorter than its shape");
    // A stem convolution reads its input as the host's NCHW (xnn_stem.h).
    if (b.nchw && !blocks_->reads_nchw(b.value)) transpose(t.as<const float>(), ptr_[b.value], p.values[b.value].dims, true);
    else ptr_[b.value] = t.as<float>();
  }
}

void Runtime::bind_outputs(kiln::sdk::ExecContext& ctx, std::vector<float*>& host_out) {
  const Program& p = *program_;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const Boundary& b = p.outputs[k];
    const kiln::sdk::TensorView t = ctx.allocate_output(k, KILN_DTYPE_FLOAT32, p.host_dims(b));
    host_out[k] = t.as<float>();
    if (!owned_[b.value] && !b.nchw) {
      bool is_input = false;
      for (const Boundary& i : p.inputs) is_input |= i.value == b.value;
      bool first = true;  // an output listed twice is bound once, copied once
      for (size_t j = 0; j < k; ++j) first &= p.outputs[j].value != b.value;
      if (!is_input && first) ptr_[b.value] = host_out[k];
    }
  }
}

void Runtime::run_segment(Segment& seg) {
  bool changed = false;
  for (size_t e = 0; e < seg.external.size(); ++e) {
    float* d = ptr_[seg.external[e]];
    if (seg.bound[e].data != d) changed = true;
    seg.bound[e].data = d;
  }
  if (changed) check(api().xnn_setup_runtime(seg.runtime, seg.bound.size(), seg.bound.data()), "setup_runtime");
  check(api().xnn_invoke_runtime(seg.runtime), "invoke_runtime");
}

void Runtime::run_concat(size_t index) {
  const Program& p = *program_;
  if (operators_[index]) {  // a Conv writing into its Concat
    check(api().xnn_run_operator(operators_[index], pool_->get()), "run_operator");
    return;
  }
  const Op& op = p.ops[index];
  const std::vector<int64_t>& od = p.values[op.out].dims;
  const size_t axis = static_cast<size_t>(op.ints.at(0));
  size_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= static_cast<size_t>(od[d]);
  for (size_t d = axis + 1; d < od.size(); ++d) inner *= static_cast<size_t>(od[d]);
  const size_t row = static_cast<size_t>(od[axis]) * inner;
  float* out = ptr_[op.out];
  size_t offset = 0;
  for (uint32_t v : op.in) {
    const size_t part = static_cast<size_t>(p.values[v].dims[axis]) * inner;
    const int64_t pi = producer_of(v);
    if (pi >= 0 && into_concat_[static_cast<size_t>(pi)] == static_cast<int64_t>(index)) {
      offset += part;  // written in place by its Conv
      continue;
    }
    const float* src = p.values[v].constant >= 0 ? p.constants[static_cast<size_t>(p.values[v].constant)].data() : ptr_[v];
    for (size_t o = 0; o < outer; ++o) std::memcpy(out + o * row + offset, src + o * part, part * sizeof(float));
    offset += part;
  }
}

namespace {

struct DepthwiseTask {
  DepthwiseShape shape;
  const float *in, *filter, *bias;
  float* out;
  static void run(void* ctx, size_t row) {
    tsan_acquire(ctx);
    const auto* t = static_cast<const DepthwiseTask*>(ctx);
    depthwise3x3_rows(t->shape, t->in, t->filter, t->bias, t->out, row, row + 1);
    tsan_release(ctx);
  }
};

}  // namespace

void Runtime::run_depthwise(size_t index, bool last) {
  const Program& p = *program_;
  const Op& op = p.ops[index];
  const std::vector<int64_t>& xd = p.values[op.in[0]].dims;
  const std::vector<int64_t>& yd = p.values[op.out].dims;
  DepthwiseTask t{};
  t.shape.n = static_cast<size_t>(xd[0]);
  t.shape.h = static_cast<size_t>(xd[1]);
  t.shape.w = static_cast<size_t>(xd[2]);
  t.shape.c = static_cast<size_t>(xd[3]);
  t.shape.oh = static_cast<size_t>(yd[1]);
  t.shape.ow = static_cast<size_t>(yd[2]);
  t.shape.stride = static_cast<size_t>(op.ints[6]);
  t.shape.pad_top = static_cast<size_t>(op.ints[0]);
  t.shape.pad_left = static_cast<size_t>(op.ints[3]);
  t.shape.isa = isa_;
  t.shape.lo = op.floats[0];
  t.shape.hi = op.floats[1];
  t.in = ptr_[op.in[0]];
  t.filter = p.constants[static_cast<size_t>(p.values[op.in[1]].constant)].data();
  t.bias = op.in.size() > 2 && op.in[2] != kNoValue ? p.constants[static_cast<size_t>(p.values[op.in[2]].constant)].data()
                                                     : nullptr;
  t.out = ptr_[op.out];
  if (!t.in || !t.out) fail(KILN_STATUS_INTERNAL, "a native depthwise convolution lacks a buffer");
  tsan_release(&t);
  api().pthreadpool_parallelize_1d(pool_->get(), &DepthwiseTask::run, &t, t.shape.n * t.shape.oh,
                                   last ? PTHREADPOOL_FLAG_YIELD_WORKERS : 0);
  tsan_acquire(&t);
}

namespace {

// SiLU over chunks of 16K floats (64 KB: L2-sized, many per thread).
struct SiluTask {
  static constexpr size_t kChunk = 16384;
  SiluFn fn;
  const float* in;
  float* out;
  size_t n;
  static void run(void* ctx, size_t chunk) {
    tsan_acquire(ctx);
    const auto* t = static_cast<const SiluTask*>(ctx);
    const size_t b = chunk * kChunk;
    t->fn(t->in + b, t->out + b, std::min(kChunk, t->n - b));
    tsan_release(ctx);
  }
};

}  // namespace

void Runtime::run_silu(size_t index, bool last) {
  const Op& op = program_->ops[index];
  SiluTask t{silu_.fn, ptr_[op.in[0]], ptr_[op.out], static_cast<size_t>(numel(program_->values[op.out].dims))};
  if (!t.in || !t.out) fail(KILN_STATUS_INTERNAL, "a SiLU lacks a buffer");
  tsan_release(&t);
  api().pthreadpool_parallelize_1d(pool_->get(), &SiluTask::run, &t, (t.n + SiluTask::kChunk - 1) / SiluTask::kChunk,
                                   last ? PTHREADPOOL_FLAG_YIELD_WORKERS : 0);
  tsan_acquire(&t);
}

void Runtime::run_winograd(size_t index) {
  const Program& p = *program_;
  const Op& op = p.ops[index];
  const int64_t add = wino_.add[index];
  const float* residual = nullptr;
  float* y = ptr_[op.out];
  if (into_concat_[index] >= 0) {
    y = ptr_[p.ops[static_cast<size_t>(into_concat_[index])].out];
    if (y) y += channel_offset_[index];
  } else if (add >= 0) {
    const Op& a = p.ops[static_cast<size_t>(add)];
    y = ptr_[a.out];
    residual = ptr_[a.in[0] == op.out ? a.in[1] : a.in[0]];
    if (!residual) fail(KILN_STATUS_INTERNAL, "a Winograd convolution's residual lacks a buffer");
  }
  if (!y || !ptr_[op.in[0]]) fail(KILN_STATUS_INTERNAL, "a Winograd convolution lacks a buffer");
  const size_t last = static_cast<size_t>(add >= 0 ? add : static_cast<int64_t>(index));
  wino_.conv[index]->run(ptr_[op.in[0]], residual, y, wino_.scratch_data(), pool_->get(), last + 1 == p.ops.size());
}

size_t Runtime::num_transposes() const {
  const Program& p = *program_;
  size_t n = p.num_transposes();
  for (const Boundary& b : p.inputs) n -= b.nchw && blocks_->reads_nchw(b.value) ? 1 : 0;
  return n;
}

size_t Runtime::num_silu() const {
  size_t n = 0;
  for (const Op& op : program_->ops) n += op.kind == OpKind::kSiLU;
  return n;
}

void Runtime::run(kiln::sdk::ExecContext& ctx, const kiln::sdk::Inputs& inputs) {
  const Program& p = *program_;
  timer_.start();
  bind_inputs(inputs);
  bind_outputs(ctx, host_out_);
  timer_.mark(step_in_);
  for (Segment& seg : segments_) {
    if (!seg.native) {
      run_segment(seg);
      timer_.mark(step_of_[seg.begin]);
      continue;
    }
    for (size_t i = seg.begin; i < seg.end; ++i) {
      if (blocks_->starts(i)) {
        // Consecutive blocks run as one chain (profiled: one block at a time).
        const size_t end = blocks_->chain_end(i, timer_.on() ? blocks_->end(i) : seg.end);
        blocks_->run(i, end, ptr_, pool_->get(), end == p.ops.size() ? PTHREADPOOL_FLAG_YIELD_WORKERS : 0);
        i = end - 1;
      } else if (wino_.conv[i]) run_winograd(i);
      else if (wino_.fused[i]) continue;  // run by the Winograd Conv before it
      else if (native_dw_[i]) run_depthwise(i, i + 1 == p.ops.size());
      else if (p.ops[i].kind == OpKind::kSiLU) run_silu(i, i + 1 == p.ops.size());
      else run_concat(i);
      timer_.mark(step_of_[blocks_->covers(i) ? blocks_->first(i) : i]);
    }
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const Boundary& b = p.outputs[k];
    if (b.nchw) transpose(ptr_[b.value], host_out_[k], p.values[b.value].dims, false);
    else if (ptr_[b.value] != host_out_[k])
      std::memcpy(host_out_[k], ptr_[b.value], static_cast<size_t>(numel(p.values[b.value].dims)) * sizeof(float));
  }
  timer_.mark(step_out_);
}

}  // namespace kiln_xnnpack
