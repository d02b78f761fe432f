#include "xnn_block.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include <sched.h>

#include "kiln/c/backend_sdk.hpp"
#include "xnn_dwconv.h"
#include "xnn_stem.h"
#include "xnn_tsan.h"

namespace kiln_xnnpack {

namespace {

// Scratch a band may use (ring of expanded rows + depthwise output): half a
// core's L2 (Zen 4: 1 MB, Intel since Ice Lake: 1.25-2 MB), so the weights
// and the block's input rows stay in it too. Taller bands read the weights
// fewer times (mobilenet_v2, Zen 4: 512 KB ran its blocks ~1% faster than
// 320 KB or 1 MB).
constexpr size_t kBandBytes = 512 * 1024;

// A stem convolution's padded input rows (all channels) at a time: within
// L1 next to the weights (mobilenet_v2: 5 output rows from 11 input rows).
constexpr size_t kStemBytes = 32 * 1024;
// Output rows a stem alone computes per pass over its padded input rows.
constexpr size_t kStemRows = 4;

// Threads sharing a block deal its work in about kItemsPerRun items per
// thread: bands of at least kItemPixels output pixels (one GEMM call each:
// fewer re-read the weights too often), expand chunks of about
// kExpandPixels. Bands are used when the input rows expanded twice are at
// most 1 / kHaloShare of the input rows.
constexpr size_t kItemsPerRun = 4;
constexpr size_t kItemPixels = 48;
constexpr size_t kRowPixels = 14;  // phases: depthwise + project items
constexpr size_t kExpandPixels = 32;
constexpr size_t kHaloShare = 8;
// Blocks of at most kChannelPixels output pixels that auto does not band
// are split by channels (kChannelItems items of panels per thread).
constexpr size_t kChannelPixels = 14 * 14;
constexpr size_t kChannelItems = 2;

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// Rows per item in [lo, hi] (lo <= hi) that `threads` threads finish
// soonest: the fewest rows on the busiest thread (items of equal size,
// dealt evenly), the larger on a tie. 14 rows, 2 threads: 1 (7 + 7), not
// 2 (4 items + 3).
size_t balanced_rows(size_t rows, size_t threads, size_t lo, size_t hi) {
  size_t best = hi, best_span = SIZE_MAX;
  for (size_t r = hi; r >= lo && r > 0; --r) {
    const size_t span = ceil_div(ceil_div(rows, r), threads) * r;
    if (span < best_span) best = r, best_span = span;
  }
  return best;
}

size_t round16(size_t c) { return (c + 15) / 16 * 16; }

const std::vector<float>& constant_of(const Program& p, uint32_t v) {
  return p.constants[static_cast<size_t>(p.values[v].constant)];
}

bool is_constant(const Program& p, uint32_t v) { return v != kNoValue && p.values[v].constant >= 0; }

// A 1x1 convolution with stride 1, no padding and one group, with a clamp.
bool pointwise(const Program& p, const Op& op) {
  if (op.kind != OpKind::kConv || op.ints.size() < 13 || op.floats.size() < 2 || op.in.size() < 2) return false;
  const std::vector<int64_t>& i = op.ints;
  for (size_t k = 0; k < 4; ++k)
    if (i[k] != 0) return false;
  return i[4] == 1 && i[5] == 1 && i[6] == 1 && i[7] == 1 && i[8] == 1 && i[9] == 1 && i[10] == 1 &&
         is_constant(p, op.in[1]) && (op.in.size() < 3 || op.in[2] == kNoValue || is_constant(p, op.in[2])) &&
         p.values[op.in[0]].dims.size() == 4;
}

// A 3x3 depthwise convolution (multiplier 1, dilation 1, stride 1 or 2 in
// both directions, pads < 3) with a clamp.
bool depthwise(const Program& p, const Op& op) {
  if (op.kind != OpKind::kDepthwise || op.ints.size() < 12 || op.floats.size() < 2 || op.in.size() < 2) return false;
  const std::vector<int64_t>& i = op.ints;
  for (size_t k = 0; k < 4; ++k)
    if (i[k] < 0 || i[k] > 2) return false;
  return i[4] == 3 && i[5] == 3 && i[6] == i[7] && (i[6] == 1 || i[6] == 2) && i[8] == 1 && i[9] == 1 && i[10] == 1 &&
         is_constant(p, op.in[1]) && (op.in.size() < 3 || op.in[2] == kNoValue || is_constant(p, op.in[2])) &&
         p.values[op.in[0]].dims.size() == 4;
}

// Whether the filter (and bias, if any) of a convolution have the dims given.
bool weights_are(const Program& p, const Op& op, std::vector<int64_t> filter, int64_t bias) {
  return p.values[op.in[1]].dims == filter &&
         (op.in.size() < 3 || op.in[2] == kNoValue || p.values[op.in[2]].dims == std::vector<int64_t>{bias});
}

const float* bias_of(const Program& p, const Op& op) {
  return op.in.size() > 2 && op.in[2] != kNoValue ? constant_of(p, op.in[2]).data() : nullptr;
}

}  // namespace

// Which expanded rows a thread's ring holds: output row g (of all images)
// is the next row it would compute, input rows [0, next) of that image have
// been expanded (the last `ring` of them are in the ring).
struct RingCursor {
  size_t g = SIZE_MAX, next = 0;
};

struct FusedBlocks::Block {
  size_t first = 0, end = 0;  // ops [first, end)
  uint32_t input = kNoValue, output = kNoValue;
  bool expand = false, residual = false;
  size_t n = 0, h = 0, w = 0, cin = 0, ce = 0, oh = 0, ow = 0, cout = 0;
  size_t band = 1, ring = 0;  // output rows per band step; expanded rows in the ring
  bool pool = false;          // a 1x1 convolution + GlobalAveragePool (the head of a classifier), not a block
  float pool_lo = 0, pool_hi = 0;
  size_t pool_panels = 1;     // pool: panels of 32 output channels an item computes
  HeadFc fc;                  // pool: the FullyConnected fused after it (outputs() 0: none)
  size_t fc_at = 0;           // pool with FC: where its threads' partial outputs start in fc_parts_
  bool banded = false;        // 2+ threads: bands end to end (else the two phases, or channels)
  bool channels = false;      // 2+ threads: split by expanded channels, then the project by rows
  size_t panels_per_item = 1;  // channels: panels of 32 expanded channels an item expands and convolves
  size_t item = 1;            // output rows a thread takes at a time (bands, or the depthwise + project phase; channels: output pixels of the project)
  size_t expand_px = 1;       // phases: input pixels a thread expands at a time
  PackedGemm expand_gemm, project_gemm;
  PackedGemm::Epilogue expand_epi{}, project_epi{};
  DepthwiseShape dw{};
  std::vector<float> dw_filter, dw_bias;  // [9][ce16], [ce16], zero-padded
  // A stem convolution (xnn_stem.h) reading the partition's NCHW input:
  // it fills the ring instead of an expand (`input` is then the image and
  // cin its channels), or runs alone (stem_only: its output in memory).
  bool stem = false, stem_only = false;
  StemConv stem_conv;

  size_t ce16() const { return round16(ce); }
  // The ring of rows is filled by the expand or the stem.
  bool ringed() const { return expand || stem; }
  // Ring of expanded rows, then the depthwise output of a band, then the
  // stem's padded input rows (pool: the convolution's output for a panel of
  // 32 channels, then their averages).
  size_t scratch_floats() const {
    if (pool) return (n * h * w + n) * 32;
    if (stem_only) return stem_conv.scratch_floats();
    return (ring * w + band * ow) * ce16() + (stem ? round16(stem_conv.scratch_floats()) : 0);
  }
  bool has_fc() const { return fc.outputs() > 0; }
  // pool with FC: floats from one thread's partial output to the next (a
  // gap of a cache line between them).
  size_t fc_stride() const { return n * fc.ld() + 16; }
  /// Output rows [g0, g1) of the stem alone, plain NHWC.
  void run_stem_rows(const float* x, float* y, float* scratch, size_t g0, size_t g1) const;
  /// pool: channels [32 p0, 32 p1) of the pooled output, or with an FC
  /// their products with its weights added to `part` (this thread's
  /// partial output).
  void run_pool(const float* x, float* y, float* scratch, float* part, size_t p0, size_t p1) const;
  /// Output rows [g0, g1) of all images (row g is image g / oh, row g % oh).
  /// `expanded`: the whole expanded input (n x h x w x ce16), else null
  /// (the band expands its own rows).
  /// `row_ptrs`: room for 3 pointers per band row. `ring`: where the
  /// ring of `scratch` stands (null: start it afresh); rows that continue
  /// from the last call keep its expanded rows instead of recomputing them.
  void run_rows(const float* x, float* y, float* scratch, const float** row_ptrs, size_t g0, size_t g1,
                const float* expanded, RingCursor* ring) const;
  /// channels: panels [p0, p1) of the expanded channels (32 each) of all
  /// pixels into `expanded` (n x h x w x ce16), then their depthwise output
  /// of all rows into `dw_out` (n x oh x ow x ce16), `band` rows at a time
  /// (`row_ptrs`: room for 3 pointers per row).
  void run_channels(const float* x, float* expanded, float* dw_out, const float** row_ptrs, size_t p0,
                    size_t p1) const;
  /// channels: output pixels [p0, p1) of all images from the depthwise output.
  void run_project(const float* x, float* y, const float* dw_out, size_t p0, size_t p1) const;
};

// One stage of a chain of blocks run by 2+ threads: a banded block, or one
// of the two phases of a block.
struct FusedBlocks::Stage {
  enum Kind : uint8_t { kBands, kExpand, kRows, kPool, kFcSum, kChannels, kProject } kind = kBands;
  const Block* block = nullptr;
  const float* x = nullptr;
  float* y = nullptr;
  size_t rows = 0;   // output rows (kExpand, kProject: pixels; kPool, kChannels: panels; kFcSum: outputs) of all images
  size_t chunk = 1;  // rows (pixels, panels) an item holds
  size_t items = 0;
};

// What the threads of a chain share about one stage: the next item of a
// phase, how many items are done, and (bands) each thread's run of items.
struct FusedBlocks::StageSync {
  alignas(64) std::atomic<size_t> next{0};
  alignas(64) std::atomic<size_t> done{0};
};

namespace {

// The block whose first op is ops[i], if there is one: [expand ->]
// depthwise -> project [-> Add of the block's input], consecutive ops, each
// intermediate value read only by the next op. `after_stem`: the block's
// input comes from a stem convolution (into the ring: any channel count, no
// residual, no expand).
std::unique_ptr<FusedBlocks::Block> match(const Program& p, size_t first, const std::vector<size_t>& readers,
                                          bool after_stem = false) {
  auto b = std::make_unique<FusedBlocks::Block>();
  const size_t i0 = first;
  b->first = i0;
  size_t k = i0;
  b->expand = k + 2 < p.ops.size() && pointwise(p, p.ops[k]) && readers[p.ops[k].out] == 1 &&
              p.ops[k + 1].in.at(0) == p.ops[k].out;
  if (b->expand) ++k;
  if (k + 1 >= p.ops.size() || !depthwise(p, p.ops[k]) || readers[p.ops[k].out] != 1) return nullptr;
  const Op& d = p.ops[k];
  const Op& pr = p.ops[k + 1];
  if (!pointwise(p, pr) || pr.in[0] != d.out) return nullptr;
  b->input = b->expand ? p.ops[i0].in[0] : d.in[0];
  if (is_constant(p, b->input)) return nullptr;
  const std::vector<int64_t>& xd = p.values[b->input].dims;
  const std::vector<int64_t>& dd = p.values[d.out].dims;
  const std::vector<int64_t>& yd = p.values[pr.out].dims;
  if (xd[0] != yd[0] || numel(xd) <= 0 || numel(yd) <= 0) return nullptr;
  b->n = static_cast<size_t>(xd[0]);
  b->h = static_cast<size_t>(xd[1]), b->w = static_cast<size_t>(xd[2]), b->cin = static_cast<size_t>(xd[3]);
  b->ce = static_cast<size_t>(dd[3]), b->oh = static_cast<size_t>(dd[1]), b->ow = static_cast<size_t>(dd[2]);
  b->cout = static_cast<size_t>(yd[3]);
  if (after_stem && b->expand) return nullptr;
  if (!b->expand && !after_stem && b->cin % 16 != 0) return nullptr;  // the depthwise reads the input's rows in place
  // Every dim the kernels index by, checked (an imported blob passes only Program::validate).
  const int64_t n = xd[0], h = xd[1], w = xd[2], cin = xd[3], ce = dd[3], oh = dd[1], ow = dd[2], cout = yd[3];
  const std::vector<int64_t>& i = d.ints;
  if (p.values[d.in[0]].dims != std::vector<int64_t>{n, h, w, ce} || i[11] != ce ||
      oh != (h + i[0] + i[2] - 3) / i[6] + 1 || ow != (w + i[1] + i[3] - 3) / i[7] + 1 ||
      yd != std::vector<int64_t>{n, oh, ow, cout} || !weights_are(p, d, {1, 3, 3, ce}, ce) ||
      !weights_are(p, pr, {cout, 1, 1, ce}, cout) || (b->expand && !weights_are(p, p.ops[i0], {ce, 1, 1, cin}, ce)))
    return nullptr;
  b->output = pr.out;
  b->end = k + 2;
  if (b->end < p.ops.size() && readers[pr.out] == 1 && !after_stem) {
    const Op& a = p.ops[b->end];
    const bool reads =
        a.in.size() == 2 && ((a.in[0] == pr.out && a.in[1] == b->input) || (a.in[1] == pr.out && a.in[0] == b->input));
    if (a.kind == OpKind::kAdd && reads && xd == yd && p.values[a.out].dims == yd && a.floats.size() >= 2) {
      b->residual = true;
      b->output = a.out;
      b->project_epi.lo2 = a.floats[0];
      b->project_epi.hi2 = a.floats[1];
      ++b->end;
    }
  }
  return b;
}

// A stem convolution (xnn_stem.h) at ops[i] reading a partition input
// whose host tensor is NCHW and that nothing else reads: with the block it
// feeds when one follows and `blocks` (depthwise -> project, the block's
// input read only by it), else alone.
std::unique_ptr<FusedBlocks::Block> match_stem(const Program& p, size_t i, const std::vector<size_t>& readers,
                                               bool fuse_stem, bool blocks) {
  if (!fuse_stem) return nullptr;
  const Op& c = p.ops[i];
  if (c.kind != OpKind::kConv || c.in.size() < 2 || c.floats.size() < 2 || !is_constant(p, c.in[1]) ||
      (c.in.size() > 2 && c.in[2] != kNoValue && !is_constant(p, c.in[2])) || is_constant(p, c.in[0]) ||
      readers[c.in[0]] != 1)
    return nullptr;
  bool nchw_input = false;
  for (const Boundary& b : p.inputs) nchw_input |= b.value == c.in[0] && b.nchw;
  for (const Boundary& b : p.outputs) nchw_input &= b.value != c.in[0];
  const std::vector<int64_t>& xd = p.values[c.in[0]].dims;
  const std::vector<int64_t>& yd = p.values[c.out].dims;
  if (!nchw_input || !stem_fits(c.ints, xd, yd)) return nullptr;
  const std::vector<int64_t>& i13 = c.ints;
  if (!weights_are(p, c, {yd[3], i13[4], i13[5], xd[3]}, yd[3])) return nullptr;
  std::unique_ptr<FusedBlocks::Block> b;
  if (blocks && readers[c.out] == 1 && i + 1 < p.ops.size()) b = match(p, i + 1, readers, true);
  if (b && b->input == c.out) {
    b->stem = true;
  } else {
    b = std::make_unique<FusedBlocks::Block>();
    b->stem_only = true;
    b->end = i + 1;
    b->output = c.out;
    // A HardSwish or SiLU alone reading the stem's output runs on its rows as they are written.
    if (readers[c.out] == 1 && i + 1 < p.ops.size()) {
      const Op& a = p.ops[i + 1];
      if ((a.kind == OpKind::kHardSwish || a.kind == OpKind::kSiLU) && a.in.size() == 1 && a.in[0] == c.out &&
          p.values[a.out].dims == yd) {
        b->end = i + 2;
        b->output = a.out;
      }
    }
    b->n = static_cast<size_t>(yd[0]), b->h = b->oh = static_cast<size_t>(yd[1]);
    b->w = b->ow = static_cast<size_t>(yd[2]), b->ce = b->cout = static_cast<size_t>(yd[3]);
  }
  b->first = i;
  b->input = c.in[0];
  b->cin = static_cast<size_t>(xd[3]);
  return b;
}

// Packs a stem's filter; `max_rows`: output rows it computes at a time.
void prepare_stem(const Program& p, FusedBlocks::Block& b, size_t max_rows) {
  const Op& c = p.ops[b.first];
  const std::vector<int64_t>& xd = p.values[c.in[0]].dims;
  const std::vector<int64_t>& yd = p.values[c.out].dims;
  StemShape s;
  s.cin = static_cast<size_t>(xd[3]), s.h = static_cast<size_t>(xd[1]), s.w = static_cast<size_t>(xd[2]);
  s.cout = static_cast<size_t>(yd[3]), s.oh = static_cast<size_t>(yd[1]), s.ow = static_cast<size_t>(yd[2]);
  s.kh = static_cast<size_t>(c.ints[4]), s.kw = static_cast<size_t>(c.ints[5]);
  s.sh = static_cast<size_t>(c.ints[6]), s.sw = static_cast<size_t>(c.ints[7]);
  s.pad_top = static_cast<size_t>(c.ints[0]), s.pad_left = static_cast<size_t>(c.ints[3]);
  s.lo = c.floats[0], s.hi = c.floats[1];
  if (b.stem_only && b.end == b.first + 2)
    s.act = p.ops[b.first + 1].kind == OpKind::kHardSwish ? StemAct::kHardSwish : StemAct::kSiLU;
  b.stem_conv = StemConv(s, constant_of(p, c.in[1]).data(), bias_of(p, c), max_rows);
}

// A 1x1 convolution whose output only a GlobalAveragePool reads (the head
// of mobilenet_v2 and most classifiers: 320 -> 1280 channels on 7x7, then
// the average): run as one op, a few channels at a time, so the
// convolution's output stays in a small scratch and the threads share out
// the channels (XNNPACK ran it as two ops, each a pool call).
std::unique_ptr<FusedBlocks::Block> match_pool(const Program& p, size_t i, const std::vector<size_t>& readers) {
  if (i + 1 >= p.ops.size() || !pointwise(p, p.ops[i]) || readers[p.ops[i].out] != 1) return nullptr;
  const Op& c = p.ops[i];
  const Op& g = p.ops[i + 1];
  if (g.kind != OpKind::kGlobalAveragePool || g.in.size() != 1 || g.in[0] != c.out || is_constant(p, c.in[0]))
    return nullptr;
  const std::vector<int64_t>& xd = p.values[c.in[0]].dims;
  const std::vector<int64_t>& cd = p.values[c.out].dims;
  if (numel(xd) <= 0 || cd.size() != 4 || cd[0] != xd[0] || cd[1] != xd[1] || cd[2] != xd[2] ||
      p.values[g.out].dims != std::vector<int64_t>{xd[0], 1, 1, cd[3]} ||
      !weights_are(p, c, {cd[3], 1, 1, xd[3]}, cd[3]))
    return nullptr;
  auto b = std::make_unique<FusedBlocks::Block>();
  b->pool = true;
  b->first = i;
  b->end = i + 2;
  b->input = c.in[0];
  b->output = g.out;
  b->n = static_cast<size_t>(xd[0]), b->h = static_cast<size_t>(xd[1]), b->w = static_cast<size_t>(xd[2]);
  b->cin = static_cast<size_t>(xd[3]), b->cout = static_cast<size_t>(cd[3]);
  b->oh = 1, b->ow = 1;
  b->project_gemm = PackedGemm(constant_of(p, c.in[1]).data(), bias_of(p, c), b->cout, b->cin, b->cin);
  b->project_epi.lo = c.floats[0];
  b->project_epi.hi = c.floats[1];
  b->pool_lo = g.floats.size() >= 2 ? g.floats[0] : -std::numeric_limits<float>::infinity();
  b->pool_hi = g.floats.size() >= 2 ? g.floats[1] : std::numeric_limits<float>::infinity();
  return b;
}

// The FullyConnected that alone reads a head's pooled channels, through a
// Reshape (Flatten) or straight (a classifier's last layer: mobilenet_v2's
// Flatten + Gemm 1280 -> 1000): the head runs it too (xnn_head.h) and ends
// after it. Any Reshape keeps the pooled channels in memory order, which
// is all the FullyConnected reads (rows of K floats).
void match_fc(const Program& p, FusedBlocks::Block& b, const std::vector<size_t>& readers) {
  size_t i = b.end;
  uint32_t v = b.output;  // [n, 1, 1, C]
  if (i >= p.ops.size() || readers[v] != 1) return;
  if (p.ops[i].kind == OpKind::kReshape) {
    const Op& r = p.ops[i];
    if (r.in.size() != 1 || r.in[0] != v || readers[r.out] != 1 || i + 1 >= p.ops.size()) return;
    v = r.out;
    ++i;
  }
  const Op& f = p.ops[i];
  if (f.kind != OpKind::kFullyConnected || f.in.size() < 2 || f.in[0] != v || f.floats.size() < 2 ||
      !is_constant(p, f.in[1]))
    return;
  const auto n = static_cast<int64_t>(b.n), c = static_cast<int64_t>(b.cout);
  const std::vector<int64_t>& wd = p.values[f.in[1]].dims;
  const std::vector<int64_t>& yd = p.values[f.out].dims;
  if (numel(p.values[v].dims) != n * c || wd.size() != 2 || wd[1] != c || yd.empty() || yd.back() != wd[0] ||
      numel(yd) != n * wd[0] || !weights_are(p, f, wd, wd[0]))
    return;
  if (f.in.size() > 2 && f.in[2] != kNoValue && !is_constant(p, f.in[2])) return;
  b.fc = HeadFc(constant_of(p, f.in[1]).data(), bias_of(p, f), static_cast<size_t>(wd[0]), b.cout, f.floats[0],
                f.floats[1]);
  b.end = i + 1;
  b.output = f.out;
}

// Packs the weights of a matched block and sizes its bands.
void prepare(const Program& p, FusedBlocks::Block& b, size_t band_rows) {
  const size_t ce16 = b.ce16();
  if (b.expand) {
    const Op& e = p.ops[b.first];
    std::vector<float> w(ce16 * b.cin, 0.0f), bias(ce16, 0.0f);
    const std::vector<float>& f = constant_of(p, e.in[1]);  // [ce, 1, 1, cin]
    std::copy(f.begin(), f.end(), w.begin());
    if (const float* eb = bias_of(p, e)) std::copy(eb, eb + b.ce, bias.begin());
    b.expand_gemm = PackedGemm(w.data(), bias.data(), ce16, b.cin, b.cin);
    b.expand_epi.lo = e.floats[0];
    b.expand_epi.hi = e.floats[1];
  }
  const Op& d = p.ops[b.first + (b.ringed() ? 1 : 0)];
  const Op& pr = p.ops[b.first + (b.ringed() ? 2 : 1)];
  b.dw_filter.assign(9 * ce16, 0.0f);
  b.dw_bias.assign(ce16, 0.0f);
  const std::vector<float>& df = constant_of(p, d.in[1]);  // [1, 3, 3, ce]
  for (size_t t = 0; t < 9; ++t)
    std::copy(df.begin() + t * b.ce, df.begin() + (t + 1) * b.ce, b.dw_filter.begin() + t * ce16);
  if (const float* db = bias_of(p, d)) std::copy(db, db + b.ce, b.dw_bias.begin());
  b.dw.w = b.w;
  b.dw.c = ce16;
  b.dw.ow = b.ow;
  b.dw.stride = static_cast<size_t>(d.ints[6]);
  b.dw.pad_top = static_cast<size_t>(d.ints[0]);
  b.dw.pad_left = static_cast<size_t>(d.ints[3]);
  b.dw.isa = kernel_isa();
  b.dw.lo = d.floats[0];
  b.dw.hi = d.floats[1];
  b.project_gemm = PackedGemm(constant_of(p, pr.in[1]).data(), bias_of(p, pr), b.cout, b.ce, ce16);
  b.project_epi.lo = pr.floats[0];
  b.project_epi.hi = pr.floats[1];
  // A stem's padded input rows: as many as fit kStemBytes.
  size_t stem_bytes = 0;
  if (b.stem) {
    prepare_stem(p, b, 1);
    const size_t row_bytes = b.stem_conv.scratch_floats() * sizeof(float) / b.stem_conv.shape().kh;  // all channels
    const StemShape& s = b.stem_conv.shape();
    const size_t rows_in = std::max(s.kh, kStemBytes / row_bytes);
    prepare_stem(p, b, (rows_in - s.kh) / s.sh + 1);
    stem_bytes = b.stem_conv.scratch_floats() * sizeof(float);
  }
  // Band rows: as many as keep the scratch within kBandBytes (at least 1).
  b.band = band_rows > 0 ? std::min(band_rows, b.oh) : 1;
  for (;;) {
    b.ring = b.ringed() ? (b.band - 1) * b.dw.stride + 3 : 0;
    if (band_rows > 0 || b.band >= b.oh) break;
    const size_t next = (b.ringed() ? b.band * b.dw.stride + 3 : 0) * b.w + (b.band + 1) * b.ow;
    if (next * ce16 * sizeof(float) + stem_bytes > kBandBytes) break;
    ++b.band;
  }
}

// How `threads` threads share a block: bands, unless the halo rows the
// runs' edges expand twice are a large share of the expand (small maps:
// each edge of a run expands 3 - stride input rows twice), and items of
// output rows small enough that each run has a few (a preempted thread
// holds back one) and large enough for the GEMMs (a few dozen pixels).
void plan_split(FusedBlocks::Block& b, BlockSplit split, size_t threads) {
  if (threads < 2) return;
  const size_t halo = (threads - 1) * (3 - b.dw.stride);
  const bool small_map = b.expand && b.n * b.oh * b.ow <= kChannelPixels;
  const bool small_halo = !b.expand || halo * kHaloShare <= b.n * b.h;
  b.banded = split == BlockSplit::kBands || (split != BlockSplit::kPhases && !b.expand) ||
             (split == BlockSplit::kAuto && small_halo && !small_map);
  b.channels = !b.banded && (split == BlockSplit::kChannels || (split == BlockSplit::kAuto && small_map));
  const size_t rows = b.n * b.oh;
  const size_t share = ceil_div(rows, threads), target = std::max<size_t>(1, ceil_div(rows, threads * kItemsPerRun));
  if (b.channels) {
    // Every thread a few items of panels (M: all the pixels), then one item
    // of output pixels each (M: a share of the pixels, equal to a pixel).
    const size_t panels = b.expand_gemm.panels();
    b.panels_per_item = balanced_rows(panels, threads, 1, std::max<size_t>(1, ceil_div(panels, threads * kChannelItems)));
    b.item = ceil_div(b.n * b.oh * b.ow, threads);
  } else if (b.banded) {
    const size_t lo = std::min(share, ceil_div(kItemPixels, b.ow));
    b.item = balanced_rows(rows, threads, lo, std::max(lo, target));
  } else {
    // Twice the least rows allowed: 7x7 maps, 2 threads take 4 + 3 rows in
    // two items (GEMMs of 28 pixels), not 2 + 2 | 2 + 1 in four.
    const size_t lo = std::min({share, b.band, ceil_div(kRowPixels, b.ow)});
    b.item = balanced_rows(rows, threads, lo, std::max(std::min(2 * lo, b.band), std::min(target, b.band)));
    const size_t px = b.n * b.h * b.w, items = threads * std::max<size_t>(1, ceil_div(px, threads * kExpandPixels));
    b.expand_px = ceil_div(px, items);
  }
}

}  // namespace

FusedBlocks::FusedBlocks(const Program& p, const BlockFusion& f, size_t threads)
    : threads_(std::max<size_t>(1, threads)) {
  block_of_.assign(p.ops.size(), -1);
  hidden_.assign(p.values.size(), 0);
  stem_input_.assign(p.values.size(), 0);
  if ((!f.enabled && !f.stem) || !gemm_supported() || !native_depthwise_supported()) return;
  size_t expanded_size = 0, dw_size = 0, fc_floats = 0;
  std::vector<size_t> readers(p.values.size(), 0);
  for (const Op& op : p.ops)
    for (uint32_t v : op.in)
      if (v != kNoValue) ++readers[v];
  for (const Boundary& b : p.outputs) ++readers[b.value];
  for (size_t i = 0; i < p.ops.size();) {
    std::unique_ptr<Block> b = f.enabled ? match(p, i, readers) : nullptr;
    if (b || (b = match_stem(p, i, readers, f.stem, f.enabled))) {
      if (b->stem_only) {
        prepare_stem(p, *b, kStemRows);
        ++stems_alone_;
      } else {
        prepare(p, *b, f.band_rows);
      }
      plan_split(*b, f.split, threads_);
      if (b->stem || b->stem_only) {
        ++stems_;
        stem_input_[b->input] = 1;
      }
    } else if (f.enabled && (b = match_pool(p, i, readers))) {
      // Items of a few panels (~kItemsPerRun per thread; one thread: all of them).
      const size_t panels = b->project_gemm.panels();
      b->pool_panels = threads_ > 1 ? ceil_div(panels, threads_ * kItemsPerRun) : panels;
      ++pools_;
      if (f.head_fc) match_fc(p, *b, readers);
      if (b->has_fc()) {
        b->fc_at = fc_floats;
        fc_floats += threads_ * b->fc_stride();
        ++heads_fc_;
      }
    } else {
      ++i;
      continue;
    }
    if (threads_ > 1 && b->expand && !b->banded)
      expanded_size = std::max(expanded_size, b->n * b->h * b->w * b->ce16());
    if (threads_ > 1 && b->channels) dw_size = std::max(dw_size, b->n * b->oh * b->ow * b->ce16());
    for (size_t k = b->first; k < b->end; ++k) {
      block_of_[k] = static_cast<int32_t>(blocks_.size());
      if (k + 1 < b->end) hidden_[p.ops[k].out] = 1;
    }
    per_task_ = std::max(per_task_, round16(b->scratch_floats()));
    max_band_ = std::max(max_band_, b->band);
    i = b->end;
    blocks_.push_back(std::move(b));
  }
  scratch_.assign(per_task_ * threads_, 0.0f);
  row_ptrs_.assign(max_band_ * 3 * threads_, nullptr);
  expanded_.assign(expanded_size, 0.0f);
  dw_all_.assign(dw_size, 0.0f);
  fc_parts_.assign(fc_floats, 0.0f);
  if (threads_ > 1) {  // each block is at most two stages of a chain
    stages_.reserve(2 * blocks_.size());
    sync_ = std::make_unique<StageSync[]>(2 * blocks_.size());
    runs_ = std::make_unique<ItemRun[]>(2 * blocks_.size() * threads_);
  }
}

FusedBlocks::~FusedBlocks() = default;

size_t FusedBlocks::count() const { return blocks_.size() - pools_ - stems_alone_; }

// Panel by panel: the convolution's output for 32 channels (the GEMM
// prefetching the FC's rows for them, when there is an FC), averaged per
// image, then with an FC multiplied into this thread's partial output.
void FusedBlocks::Block::run_pool(const float* x, float* y, float* scratch, float* part, size_t p0, size_t p1) const {
  static_assert(HeadFc::kPanelRows == 32, "a panel of the GEMM (32 channels) is a panel of the FC's rows");
  const size_t px = h * w, m = n * px;
  const float scale = 1.0f / static_cast<float>(px);
  float* conv = scratch;              // [m][32]
  float* pooled = scratch + m * 32;   // [n][32] (with an FC)
  for (size_t pn = p0; pn < p1; ++pn) {
    const size_t c0 = pn * 32, nc = std::min(cout, c0 + 32) - c0;
    project_gemm.run_panels(m, x, cin, conv, 32, project_epi, pn, pn + 1,
                            has_fc() ? fc.rows(c0, c0 + nc) : PackedGemm::Prefetch{});
    float* out = has_fc() ? pooled : y + c0;
    const size_t ldo = has_fc() ? 32 : cout;
    for (size_t img = 0; img < n; ++img) {
      float* o = out + img * ldo;
      const float* rows = conv + img * px * 32;
      for (size_t c = 0; c < nc; ++c) o[c] = 0.0f;
      for (size_t r = 0; r < px; ++r)
        for (size_t c = 0; c < nc; ++c) o[c] += rows[r * 32 + c];
      for (size_t c = 0; c < nc; ++c) o[c] = std::min(std::max(o[c] * scale, pool_lo), pool_hi);
    }
    if (has_fc()) fc.accumulate(n, pooled, 32, c0, c0 + nc, part);
  }
}

bool FusedBlocks::starts(size_t op) const {
  return covers(op) && blocks_[static_cast<size_t>(block_of_[op])]->first == op;
}

size_t FusedBlocks::end(size_t op) const { return blocks_[static_cast<size_t>(block_of_[op])]->end; }

size_t FusedBlocks::first(size_t op) const { return blocks_[static_cast<size_t>(block_of_[op])]->first; }

std::string FusedBlocks::describe(size_t op) const {
  const Block& b = *blocks_[static_cast<size_t>(block_of_[op])];
  auto s = [](size_t v) { return std::to_string(v); };
  if (b.pool) {
    return "1x1 conv + global average pool " + s(b.h) + "x" + s(b.w) + "x" + s(b.cin) + " -> " + s(b.cout) +
           (b.has_fc() ? " + fully connected -> " + s(b.fc.outputs()) : "");
  }
  std::string stem;
  if (b.stem || b.stem_only) {
    const StemShape& t = b.stem_conv.shape();
    stem = "stem conv " + s(t.kh) + "x" + s(t.kw) + " s" + s(t.sh) + " from NCHW " + s(t.h) + "x" + s(t.w) + "x" +
           s(t.cin) + " (" + isa_name(b.stem_conv.isa()) + ") -> ";
    const char* act = t.act == StemAct::kHardSwish ? " + HardSwish" : t.act == StemAct::kSiLU ? " + SiLU" : "";
    if (b.stem_only) return stem + s(b.oh) + "x" + s(b.ow) + "x" + s(b.cout) + act;
  }
  return stem + s(b.h) + "x" + s(b.w) + "x" + s(b.stem ? b.ce : b.cin) + (b.expand ? " -> " + s(b.ce) : "") + " -> " + s(b.oh) + "x" + s(b.ow) +
         "x" + s(b.cout) + " s" + s(b.dw.stride) + (b.residual ? " +res" : "") + " band " + s(b.band) +
         (threads_ < 2 ? "" : b.banded ? ", bands" : b.channels ? ", channels" : ", phases");
}

void FusedBlocks::Block::run_rows(const float* x, float* y, float* scratch, const float** row_ptrs, size_t g0,
                                  size_t g1, const float* expanded, RingCursor* ring_at) const {
  const size_t ce16 = this->ce16(), s = dw.stride, pt = dw.pad_top;
  // The ring holds expanded rows by blocks of 16 channels ([ce16 / 16][ring][w][16]):
  // the depthwise reads a block's rows contiguously, not one 64-byte line per pixel.
  const bool ring_mode = ringed() && !expanded;
  if (stem_only) return run_stem_rows(x, y, scratch, g0, g1);
  float* ring_rows = scratch;
  float* dw_out = scratch + ring * w * ce16;
  PackedGemm::Epilogue pe = project_epi;
  for (size_t g = g0; g < g1;) {
    const size_t n = g / oh, oy0 = g % oh, oy_end = std::min(oh, oy0 + (g1 - g));
    const float* xn = x + n * (stem ? stem_conv.image_floats() : h * w * cin);
    float* yn = y + n * oh * ow * cout;
    // Input rows [0, next) have been expanded into the ring (row r in slot r % ring).
    size_t next = oy0 * s > pt ? oy0 * s - pt : 0;
    if (ring_at && ring_at->g == g && oy0 > 0) next = std::max(next, ring_at->next);
    for (size_t oy = oy0; oy < oy_end; oy += band) {
      const size_t oe = std::min(oy + band, oy_end);
      if (ring_mode) {
        const size_t need = std::min(h, (oe - 1) * s + 3 > pt ? (oe - 1) * s + 3 - pt : 0);
        while (next < need) {
          const size_t slot = next % ring, rows = std::min(need - next, ring - slot);
          if (stem) {
            stem_conv.run(xn, next, next + rows, ring_rows + slot * w * 16, w * 16, 16, ring * w * 16,
                          dw_out + band * ow * ce16);
          } else {
            expand_gemm.run(rows * w, xn + next * w * cin, cin, ring_rows + slot * w * 16, 16, expand_epi,
                            ring * w * 16);
          }
          next += rows;
        }
      }
      // The input rows each output row reads (null: padding), in block 0.
      for (size_t r = oy; r < oe; ++r) {
        for (size_t ky = 0; ky < 3; ++ky) {
          const size_t iy = r * s + ky;  // + pad_top
          const bool inside = iy >= pt && iy - pt < h;
          const float* row = nullptr;
          if (inside && expanded)
            row = expanded + (n * h + iy - pt) * w * ce16;
          else if (inside && ringed())
            row = ring_rows + ((iy - pt) % ring) * w * 16;
          else if (inside)
            row = xn + (iy - pt) * w * cin;
          row_ptrs[(r - oy) * 3 + ky] = row;
        }
      }
      // Channel blocks outermost: a block's filter stays in registers and
      // its slices of the input rows in L1 from one output row to the next.
      DepthwiseShape d = dw;
      d.in_px = ring_mode ? 16 : expanded ? ce16 : cin;
      d.out_px = ce16;
      const size_t block_step = ring_mode ? ring * w * 16 : 16;
      for (size_t cb = 0; cb < ce16 / 16; ++cb) {
        depthwise3x3_rows16(d, row_ptrs, oe - oy, dw_filter.data() + cb * 16, dw_bias.data() + cb * 16,
                            dw_out + cb * 16, ow * ce16);
        for (size_t k = 0; k < 3 * (oe - oy); ++k)
          if (row_ptrs[k]) row_ptrs[k] += block_step;
      }
      pe.residual = residual ? xn + oy * ow * cin : nullptr;
      pe.ldr = cin;
      project_gemm.run((oe - oy) * ow, dw_out, ce16, yn + oy * ow * cout, cout, pe);
    }
    g += oy_end - oy0;
    if (ring_at && ring_mode) *ring_at = RingCursor{g, next};
  }
}

void FusedBlocks::Block::run_channels(const float* x, float* expanded, float* dw_out, const float** row_ptrs,
                                      size_t p0, size_t p1) const {
  const size_t ce16 = this->ce16(), s = dw.stride, pt = dw.pad_top, rows = n * oh;
  const size_t c0 = p0 * 32, cb0 = p0 * 2, cb1 = std::min(ce16 / 16, p1 * 2);
  expand_gemm.run_panels(n * h * w, x, cin, expanded + c0, ce16, expand_epi, p0, p1);
  DepthwiseShape d = dw;
  d.in_px = ce16;
  d.out_px = ce16;
  for (size_t g0 = 0; g0 < rows; g0 += band) {
    const size_t g1 = std::min(rows, g0 + band);
    for (size_t g = g0; g < g1; ++g) {
      const size_t img = g / oh, oy = g % oh;
      for (size_t ky = 0; ky < 3; ++ky) {
        const size_t iy = oy * s + ky;  // + pad_top
        row_ptrs[(g - g0) * 3 + ky] =
            iy >= pt && iy - pt < h ? expanded + (img * h + iy - pt) * w * ce16 + c0 : nullptr;
      }
    }
    for (size_t cb = cb0; cb < cb1; ++cb) {
      depthwise3x3_rows16(d, row_ptrs, g1 - g0, dw_filter.data() + cb * 16, dw_bias.data() + cb * 16,
                          dw_out + g0 * ow * ce16 + cb * 16, ow * ce16);
      for (size_t k = 0; k < 3 * (g1 - g0); ++k)
        if (row_ptrs[k]) row_ptrs[k] += 16;
    }
  }
}

void FusedBlocks::Block::run_project(const float* x, float* y, const float* dw_out, size_t p0, size_t p1) const {
  const size_t ce16 = this->ce16();
  PackedGemm::Epilogue pe = project_epi;
  pe.residual = residual ? x + p0 * cin : nullptr;  // residual: the input has the output's dims
  pe.ldr = cin;
  project_gemm.run(p1 - p0, dw_out + p0 * ce16, ce16, y + p0 * cout, cout, pe);
}

void FusedBlocks::Block::run_stem_rows(const float* x, float* y, float* scratch, size_t g0, size_t g1) const {
  for (size_t g = g0; g < g1;) {
    const size_t img = g / oh, r0 = g % oh, r1 = std::min(oh, r0 + (g1 - g));
    stem_conv.run(x + img * stem_conv.image_floats(), r0, r1, y + (img * oh + r0) * ow * cout, ow * cout, cout, 16,
                  scratch);
    g += r1 - r0;
  }
}

namespace {

constexpr uint64_t kLow = 0xFFFFFFFFu;

// Takes an item from the front or the back of a run ([front, back) packed
// as front | back << 32).
bool take(std::atomic<uint64_t>& run, bool front, size_t& item) {
  uint64_t v = run.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t f = v & kLow, b = v >> 32;
    if (f >= b) return false;
    const uint64_t want = front ? v + 1 : v - (uint64_t{1} << 32);
    if (run.compare_exchange_weak(v, want, std::memory_order_relaxed)) {
      item = static_cast<size_t>(front ? f : b - 1);
      return true;
    }
  }
}

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

// A chain of consecutive blocks in one pthreadpool call: one task per
// thread (t picks its scratch), each going through the stages in order.
// Items of a stage are taken as they come (phases: from a shared counter;
// bands: see run_bands), and a stage starts once every item of the one
// before is done. A thread the OS has not scheduled yet holds nothing back
// (the others take its items), one preempted holds back the item it is in,
// and the threads meet pthreadpool's barrier once for the chain, not once
// or twice per block (on 2 cores shared with other work, each meeting
// waits for a worker the OS may have put aside for milliseconds).
struct FusedBlocks::Chain {
  FusedBlocks* self;
  const Stage* stages;
  size_t count;

  static void run(void* ctx, size_t t) {
    tsan_acquire(ctx);
    const auto* c = static_cast<const Chain*>(ctx);
    FusedBlocks& f = *c->self;
    float* scratch = f.scratch_.data() + t * f.per_task_;
    const float** row_ptrs = f.row_ptrs_.data() + t * f.max_band_ * 3;
    for (size_t s = 0; s < c->count; ++s) {
      if (s > 0) {
        const size_t items = c->stages[s - 1].items;
        for (unsigned spins = 0; f.sync_[s - 1].done.load(std::memory_order_acquire) < items; ++spins) {
          if (spins < 4096) pause();
          else sched_yield();
        }
      }
      const Stage& st = c->stages[s];
      StageSync& sync = f.sync_[s];
      const Block& b = *st.block;
      if (st.kind == Stage::kBands) {
        run_bands(st, sync, f.runs_.get() + s * f.threads_, f.threads_, t, scratch, row_ptrs);
        continue;
      }
      for (;;) {
        const size_t item = sync.next.fetch_add(1, std::memory_order_relaxed);
        if (item >= st.items) break;
        const size_t r0 = item * st.chunk, r1 = std::min(st.rows, r0 + st.chunk);
        if (st.kind == Stage::kPool) {  // r0, r1: panels
          b.run_pool(st.x, st.y, scratch, b.has_fc() ? f.fc_parts_.data() + b.fc_at + t * b.fc_stride() : nullptr, r0,
                     r1);
        } else if (st.kind == Stage::kFcSum) {  // r0, r1: outputs
          b.fc.finish(b.n, f.fc_parts_.data() + b.fc_at, f.threads_, b.fc_stride(), st.y, r0, r1);
        } else if (st.kind == Stage::kChannels) {  // r0, r1: panels
          b.run_channels(st.x, f.expanded_.data(), f.dw_all_.data(), row_ptrs, r0, r1);
        } else if (st.kind == Stage::kProject) {
          b.run_project(st.x, st.y, f.dw_all_.data(), r0, r1);
        } else if (st.kind == Stage::kExpand) {  // r0, r1: pixels
          b.expand_gemm.run(r1 - r0, st.x + r0 * b.cin, b.cin, f.expanded_.data() + r0 * b.ce16(), b.ce16(),
                            b.expand_epi);
        } else {
          b.run_rows(st.x, st.y, scratch, row_ptrs, r0, r1, b.expand ? f.expanded_.data() : nullptr, nullptr);
        }
        sync.done.fetch_add(1, std::memory_order_release);
      }
    }
    tsan_release(ctx);
  }

  // Bands: the block's items are dealt out in contiguous runs, one per
  // thread; a thread takes its run's items from the front, in order, so its
  // ring of expanded rows carries over from one item to the next and only
  // the rows at the edges of its run are expanded twice. A thread whose run
  // is done takes items from the back of the run with the most left
  // (expanding their halo rows afresh).
  static void run_bands(const Stage& st, StageSync& sync, ItemRun* runs, size_t threads, size_t t, float* scratch,
                        const float** row_ptrs) {
    const Block& b = *st.block;
    auto rows_of = [&](size_t item, RingCursor* ring) {
      const size_t g0 = item * st.chunk, g1 = std::min(st.rows, g0 + st.chunk);
      b.run_rows(st.x, st.y, scratch, row_ptrs, g0, g1, nullptr, ring);
      sync.done.fetch_add(1, std::memory_order_release);
    };
    RingCursor ring;
    size_t item = 0;
    while (take(runs[t].items, true, item)) rows_of(item, &ring);
    for (;;) {
      size_t victim = threads, most = 0;
      for (size_t r = 0; r < threads; ++r) {
        const uint64_t v = runs[r].items.load(std::memory_order_relaxed);
        const uint64_t left = (v >> 32) > (v & kLow) ? (v >> 32) - (v & kLow) : 0;
        if (left > most) most = left, victim = r;
      }
      if (victim == threads) break;
      if (take(runs[victim].items, false, item)) rows_of(item, nullptr);
    }
  }
};

BlockSplit parse_block_split(const std::string& s) {
  if (s == "auto") return BlockSplit::kAuto;
  if (s == "bands") return BlockSplit::kBands;
  if (s == "phases") return BlockSplit::kPhases;
  if (s == "channels") return BlockSplit::kChannels;
  kiln::sdk::fail(KILN_STATUS_INVALID_ARGUMENT,
                  "option 'block_split' must be auto, bands, phases or channels, got '" + s + "'");
}

size_t FusedBlocks::chain_end(size_t op, size_t stop) const {
  size_t e = op;
  while (e < stop && starts(e) && end(e) <= stop) e = end(e);
  return e;
}

// One thread: each block in bands, each band expanding its rows into the
// ring. More: the blocks of [op, stop) as one chain (Chain).
void FusedBlocks::run(size_t op, size_t stop, const std::vector<float*>& ptr, pthreadpool_t pool, uint32_t flags) {
  stages_.clear();
  for (size_t i = op; i < stop; i = end(i)) {
    const Block& b = *blocks_[static_cast<size_t>(block_of_[i])];
    const float* x = ptr[b.input];
    float* y = ptr[b.output];
    if (!x || !y) kiln::sdk::fail(KILN_STATUS_INTERNAL, "a fused block lacks a buffer");
    const size_t out_rows = b.n * b.oh;
    if (b.pool) {
      // With an FC: each thread's partial output starts at 0; the last
      // stage sums them (threads share out the outputs, by 16).
      float* parts = b.has_fc() ? fc_parts_.data() + b.fc_at : nullptr;
      if (parts) std::fill(parts, parts + threads_ * b.fc_stride(), 0.0f);
      const size_t panels = b.project_gemm.panels();
      if (threads_ == 1) {
        for (size_t p0 = 0; p0 < panels; p0 += b.pool_panels)
          b.run_pool(x, y, scratch_.data(), parts, p0, std::min(panels, p0 + b.pool_panels));
        if (parts) b.fc.finish(b.n, parts, 1, b.fc_stride(), y, 0, b.fc.outputs());
      } else {
        stages_.push_back({Stage::kPool, &b, x, y, panels, b.pool_panels, ceil_div(panels, b.pool_panels)});
        if (parts) {
          const size_t outs = b.fc.outputs(), chunk = round16(ceil_div(outs, threads_));
          stages_.push_back({Stage::kFcSum, &b, x, y, outs, chunk, ceil_div(outs, chunk)});
        }
      }
      continue;
    }
    if (threads_ == 1) {
      RingCursor ring;
      b.run_rows(x, y, scratch_.data(), row_ptrs_.data(), 0, out_rows, nullptr, &ring);
      continue;
    }
    if (b.banded) {
      stages_.push_back({Stage::kBands, &b, x, y, out_rows, b.item, ceil_div(out_rows, b.item)});
      continue;
    }
    if (b.channels) {
      const size_t panels = b.expand_gemm.panels();
      stages_.push_back({Stage::kChannels, &b, x, y, panels, b.panels_per_item, ceil_div(panels, b.panels_per_item)});
      const size_t px = b.n * b.oh * b.ow;
      stages_.push_back({Stage::kProject, &b, x, y, px, b.item, ceil_div(px, b.item)});
      continue;
    }
    if (b.expand) {
      const size_t px = b.n * b.h * b.w;
      stages_.push_back({Stage::kExpand, &b, x, y, px, b.expand_px, ceil_div(px, b.expand_px)});
    }
    stages_.push_back({Stage::kRows, &b, x, y, out_rows, b.item, ceil_div(out_rows, b.item)});
  }
  if (stages_.empty()) return;
  for (size_t s = 0; s < stages_.size(); ++s) {
    sync_[s].next.store(0, std::memory_order_relaxed);
    sync_[s].done.store(0, std::memory_order_relaxed);
    for (size_t t = 0; t < threads_; ++t) {
      const uint64_t items = stages_[s].items, f = items * t / threads_, e = items * (t + 1) / threads_;
      runs_[s * threads_ + t].items.store(f | (e << 32), std::memory_order_relaxed);
    }
  }
  Chain chain{this, stages_.data(), stages_.size()};
  tsan_release(&chain);
  api().pthreadpool_parallelize_1d(pool, &Chain::run, &chain, threads_, flags);
  tsan_acquire(&chain);
}

}  // namespace kiln_xnnpack
