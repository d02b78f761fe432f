// The sliced LSTM step (see rnn_lstm_sliced.h).
#include "kernels/portable/rnn_lstm_sliced.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include "kernels/portable/cpu/x86/isa.h"
#include "kernels/portable/cpu/x86/simd_math.h"

namespace kiln::kernels {

namespace {

int64_t slice_count(int64_t hidden) { return (hidden + kLstmSliceUnits - 1) / kLstmSliceUnits; }
int64_t slice_units(int64_t hidden, int64_t q) { return std::min(kLstmSliceUnits, hidden - q * kLstmSliceUnits); }

// The cell loops below vectorize for each ISA level (cpu/x86/isa.h):
// the gate functions (simd_math.h) are inlined scalar code, and the options
// here match those they are compiled with (FMA contraction, no FP traps).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KILN_LSTM_PRAGMAS 1
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast", "no-trapping-math")
#endif

using simd::sigmoid_one;
using simd::tanh_one;

[[gnu::always_inline]] inline float clip_v(float v, float lo, float hi) {
  v = v < lo ? lo : v;  // NaN stays NaN
  return v > hi ? hi : v;
}

// One batch row of one slice: `a` holds the w pre-activations of each gate
// (i, o, f, c, gate-major); c is C_{t-1} in, C_t out; h gets H_t and y (when
// not null) a copy of it.
template <bool kPeep, bool kForget>
__attribute__((always_inline)) inline void cell_body(const float* __restrict a, int64_t w, const float* __restrict p,
                                                     int64_t hidden, float lo, float hi, float* __restrict c,
                                                     float* __restrict h, float* __restrict y) {
  const float* ai = a;
  const float* ao = a + w;
  const float* af = a + 2 * w;
  const float* ac = a + 3 * w;
  for (int64_t k = 0; k < w; ++k) {
    const float cp = c[k];
    const float i = sigmoid_one(clip_v(ai[k] + (kPeep ? p[k] * cp : 0.f), lo, hi));
    const float f = kForget ? 1.f - i : sigmoid_one(clip_v(af[k] + (kPeep ? p[2 * hidden + k] * cp : 0.f), lo, hi));
    const float g = tanh_one(clip_v(ac[k], lo, hi));
    const float cn = f * cp + i * g;
    const float o = sigmoid_one(clip_v(ao[k] + (kPeep ? p[hidden + k] * cn : 0.f), lo, hi));
    const float hn = o * tanh_one(cn);
    c[k] = cn;
    h[k] = hn;
  }
  if (y) std::memcpy(y, h, static_cast<size_t>(w) * sizeof(float));  // outside the loop, which then vectorizes
}

// The cell for every batch row of one slice at step t: row b's
// pre-activations are at a + b * lda, its state at c / h_cur / h_next +
// b * hs; rows whose sequence has ended keep their state and get zeros in Y.
struct SliceRows {
  const float* a;
  int64_t lda;
  int64_t batch, hs, w, t;
  const int64_t* lens;
  const float* peep;  // already offset to the slice's first unit, or null
  bool forget;
  float lo, hi;
  float* c;  // offset to the slice's first unit, like the three below
  const float* h_cur;
  float* h_next;
  float* y;  // or null
};

KILN_ISA_BODY void lstm_cell_rows_body(const SliceRows& r) {
  for (int64_t b = 0; b < r.batch; ++b) {
    const int64_t off = b * r.hs;
    float* yb = r.y ? r.y + off : nullptr;
    if (r.t >= r.lens[b]) {
      std::memcpy(r.h_next + off, r.h_cur + off, static_cast<size_t>(r.w) * sizeof(float));
      if (yb) std::fill_n(yb, r.w, 0.f);
      continue;
    }
    const float* a = r.a + b * r.lda;
    float* c = r.c + off;
    float* h = r.h_next + off;
    if (r.peep) {
      if (r.forget) cell_body<true, true>(a, r.w, r.peep, r.hs, r.lo, r.hi, c, h, yb);
      else cell_body<true, false>(a, r.w, r.peep, r.hs, r.lo, r.hi, c, h, yb);
    } else {
      if (r.forget) cell_body<false, true>(a, r.w, r.peep, r.hs, r.lo, r.hi, c, h, yb);
      else cell_body<false, false>(a, r.w, r.peep, r.hs, r.lo, r.hi, c, h, yb);
    }
  }
}
KILN_ISA_DISPATCH(lstm_cell_rows, lstm_cell_rows_body);

constexpr int64_t kPanel = 32;  // columns per panel of the small-batch form of R
constexpr int64_t kMinChunkMacs = int64_t{1} << 17;

// out[r][j] += sum_p h[r][p] * Rt[p][j] for R rows and j < ncols, Rt in
// panels of kPanel columns. One row keeps two sets of accumulators (even and
// odd p) so the FMA latency does not bound it; more rows are independent
// chains already. 3 x 32 accumulators are 6 AVX-512 or 12 AVX2 registers;
// 4 x 32 (8 AVX-512 registers) only run where AVX-512 is (row_group).
template <int R>
[[gnu::always_inline]] inline void panels_times_rows(const float* __restrict panels, int64_t k, int64_t ncols,
                                                     const float* __restrict h, int64_t ldh, float* __restrict out,
                                                     int64_t ldo) {
  constexpr int kChains = R == 1 ? 2 : 1;
  for (int64_t c0 = 0; c0 < ncols; c0 += kPanel) {
    const float* pn = panels + c0 * k;
    float acc[kChains][R][kPanel] = {};
    int64_t p = 0;
    for (; p + kChains <= k; p += kChains)
      for (int ch = 0; ch < kChains; ++ch)
        for (int r = 0; r < R; ++r) {
          const float x = h[r * ldh + p + ch];
          for (int64_t j = 0; j < kPanel; ++j) acc[ch][r][j] += x * pn[(p + ch) * kPanel + j];
        }
    for (; p < k; ++p)
      for (int r = 0; r < R; ++r) {
        const float x = h[r * ldh + p];
        for (int64_t j = 0; j < kPanel; ++j) acc[0][r][j] += x * pn[p * kPanel + j];
      }
    const int64_t nv = ncols - c0 < kPanel ? ncols - c0 : kPanel;
    for (int r = 0; r < R; ++r) {
      float* o = out + r * ldo + c0;
      if constexpr (kChains == 2) {
        for (int64_t j = 0; j < nv; ++j) o[j] += acc[0][r][j] + acc[1][r][j];
      } else {
        for (int64_t j = 0; j < nv; ++j) o[j] += acc[0][r][j];
      }
    }
  }
}

// Rows go in groups of `group` (3, or 4 where 4 x 32 accumulators fit the
// registers: AVX-512's 32).
KILN_ISA_BODY void rows_times_panels_body(const float* panels, int64_t k, int64_t ncols, const float* h, int64_t ldh,
                                         int64_t rows, int64_t group, float* out, int64_t ldo) {
  for (int64_t r0 = 0; r0 < rows; r0 += group) {
    const float* hr = h + r0 * ldh;
    float* orow = out + r0 * ldo;
    switch (rows - r0 < group ? rows - r0 : group) {
      case 1: panels_times_rows<1>(panels, k, ncols, hr, ldh, orow, ldo); break;
      case 2: panels_times_rows<2>(panels, k, ncols, hr, ldh, orow, ldo); break;
      case 3: panels_times_rows<3>(panels, k, ncols, hr, ldh, orow, ldo); break;
      default: panels_times_rows<4>(panels, k, ncols, hr, ldh, orow, ldo); break;
    }
  }
}
KILN_ISA_DISPATCH(rows_times_panels, rows_times_panels_body);

#if defined(KILN_LSTM_PRAGMAS)
#pragma GCC pop_options
#endif

int64_t row_group() {
  return cpu::kernel_isa() >= cpu::Isa::kAvx512 ? 4 : 3;
}

}  // namespace

int64_t lstm_small_batch() { return row_group(); }

int64_t lstm_slice_column(int64_t hidden, int64_t gate, int64_t unit) {
  const int64_t q = unit / kLstmSliceUnits;
  return q * 4 * kLstmSliceUnits + gate * slice_units(hidden, q) + unit % kLstmSliceUnits;
}

LstmSlicedWeights pack_lstm_sliced(int64_t hidden, int64_t input, const float* w, const float* r, bool small_batch) {
  LstmSlicedWeights out;
  out.hidden = hidden;
  out.input = input;
  const int64_t gh = 4 * hidden;
  // Rows of W and R in slice order (row j of the permuted matrix is gate
  // column j), then packed transposed as B operands.
  std::vector<float> wp(static_cast<size_t>(gh * input));
  std::vector<float> rp(static_cast<size_t>(gh * hidden));
  for (int64_t g = 0; g < 4; ++g)
    for (int64_t u = 0; u < hidden; ++u) {
      const int64_t col = lstm_slice_column(hidden, g, u), row = g * hidden + u;
      std::memcpy(&wp[static_cast<size_t>(col * input)], w + row * input, static_cast<size_t>(input) * sizeof(float));
      std::memcpy(&rp[static_cast<size_t>(col * hidden)], r + row * hidden,
                  static_cast<size_t>(hidden) * sizeof(float));
    }
  out.w = PackedMatrix::pack_b(true, input, gh, wp.data(), input);
  for (int64_t q = 0; q < slice_count(hidden); ++q) {
    const int64_t col0 = q * 4 * kLstmSliceUnits, cols = 4 * slice_units(hidden, q);
    const float* rq = rp.data() + col0 * hidden;  // the slice's rows of R: R^T's columns
    if (!small_batch) {
      out.r.push_back(PackedMatrix::pack_b(true, hidden, cols, rq, hidden));
      continue;
    }
    const int64_t panels = (cols + kPanel - 1) / kPanel;
    std::vector<float> pn(static_cast<size_t>(panels * kPanel * hidden), 0.f);
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t p = 0; p < hidden; ++p)
        pn[static_cast<size_t>((j / kPanel) * kPanel * hidden + p * kPanel + j % kPanel)] = rq[j * hidden + p];
    out.r_panels.push_back(std::move(pn));
  }
  return out;
}

void run_lstm_sliced(const LstmSlicedWeights& weights, const LstmCellOptions& options, const LstmSequence& s,
                     ThreadPool* pool) {
  const int64_t hs = weights.hidden, gh = 4 * hs, batch = s.batch, slices = slice_count(hs);
  if (s.seq == 0 || batch == 0) return;
  // X W^T + Wb + Rb for every step, columns in slice order. Every element is
  // written by the GEMM, so the buffer is not cleared first.
  const std::unique_ptr<float[]> xw(new float[static_cast<size_t>(s.seq * batch * gh)]);
  std::vector<float> bias;
  GemmEpilogue ep;
  if (s.wb || s.rb) {
    bias.assign(static_cast<size_t>(gh), 0.f);
    for (int64_t g = 0; g < 4; ++g)
      for (int64_t u = 0; u < hs; ++u) {
        const int64_t j = g * hs + u;
        bias[static_cast<size_t>(lstm_slice_column(hs, g, u))] = (s.wb ? s.wb[j] : 0.f) + (s.rb ? s.rb[j] : 0.f);
      }
    ep.col_bias = bias.data();
  }
  sgemm_ex(s.seq * batch, gh, weights.input, 1.f, GemmOperand::raw(s.x, weights.input),
           GemmOperand::prepacked(weights.w), 0.f, xw.get(), gh, pool, ep);

  std::vector<float> h_other(static_cast<size_t>(batch * hs));
  float* h_cur = s.h;
  float* h_next = h_other.data();
  const float lo = options.clip > 0 ? -options.clip : -INFINITY, hi = options.clip > 0 ? options.clip : INFINITY;
  // Slices per chunk of a step: at least kMinChunkMacs multiply-adds, so a
  // small step (batch 1, H = 128: 64K in all) runs on one thread instead of
  // paying a pool round trip for a microsecond of work.
  const int64_t slice_macs = batch * 4 * kLstmSliceUnits * hs;
  const int64_t grain = std::max<int64_t>(1, kMinChunkMacs / std::max<int64_t>(1, slice_macs));
  for (int64_t step = 0; step < s.seq; ++step) {
    const int64_t t = s.reverse ? s.seq - 1 - step : step;
    float* xwt = xw.get() + t * batch * gh;  // becomes the gate pre-activations
    float* yt = s.y ? s.y + t * s.y_step : nullptr;
    const bool panels = !weights.r_panels.empty();
    const int64_t group = row_group();
    std::optional<PackedMatrix> h_packed;
    if (!panels && batch > lstm_small_batch()) h_packed = PackedMatrix::pack_a(false, batch, hs, h_cur, hs);
    parallel_for(pool, slices, grain, [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t u0 = q * kLstmSliceUnits, w = slice_units(hs, q), col0 = q * 4 * kLstmSliceUnits;
        if (panels) {
          rows_times_panels(weights.r_panels[static_cast<size_t>(q)].data(), hs, 4 * w, h_cur, hs, batch, group,
                            xwt + col0, gh);
        } else if (h_packed) {
          const GemmOperand rq = GemmOperand::prepacked(weights.r[static_cast<size_t>(q)]);
          sgemm_ex(batch, 4 * w, hs, 1.f, GemmOperand::prepacked(*h_packed), rq, 1.f, xwt + col0, gh, nullptr);
        } else {
          const GemmOperand rq = GemmOperand::prepacked(weights.r[static_cast<size_t>(q)]);
          for (int64_t b = 0; b < batch; ++b)
            if (t < s.lens[b])
              sgemm_ex(1, 4 * w, hs, 1.f, GemmOperand::raw(h_cur + b * hs, hs), rq, 1.f, xwt + b * gh + col0, gh,
                       nullptr);
        }
        SliceRows rows{xwt + col0, gh, batch, hs, w, t, s.lens,
                       options.peepholes ? options.peepholes + u0 : nullptr, options.input_forget, lo, hi,
                       s.c + u0, h_cur + u0, h_next + u0, yt ? yt + u0 : nullptr};
        lstm_cell_rows(rows);
      }
    });
    std::swap(h_cur, h_next);
  }
  if (h_cur != s.h) std::memcpy(s.h, h_cur, static_cast<size_t>(batch * hs) * sizeof(float));
}

}  // namespace kiln::kernels
