// Depthwise convolution on wide maps, vectorized along the output row: the
// interface between the driver (conv_depthwise_rows.cpp) and the register
// kernels compiled once per ISA (cpu/x86/phase_rows_{avx512,avx2}.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/portable/conv_depthwise.h"

namespace kiln::kernels {

/// Most lanes a kernel uses; the widest kernel row; the phase rows a band
/// may read past its last output row's taps (the kernels compute whole
/// blocks of rows).
constexpr int64_t kDwRowsMaxLanes = 16;
constexpr int64_t kDwRowsMaxKw = 16;
constexpr int64_t kDwRowsSlackRows = 3;

/// The zeroed phase-row scratch of one parallel chunk of the row kernels
/// (depthwise and pooling): a thread-local buffer reused across chunks,
/// released when the chunk ends if it grew past 1M floats, so that very wide
/// maps do not keep it for the life of the process.
class PhaseScratch {
 public:
  explicit PhaseScratch(int64_t floats) { buffer().assign(static_cast<size_t>(floats), 0.f); }
  ~PhaseScratch() {
    if (buffer().capacity() > (size_t{1} << 20)) std::vector<float>().swap(buffer());
  }
  PhaseScratch(const PhaseScratch&) = delete;
  PhaseScratch& operator=(const PhaseScratch&) = delete;
  float* data() { return buffer().data(); }

 private:
  static std::vector<float>& buffer() {
    thread_local std::vector<float> v;
    return v;
  }
};

/// parallel_for's grain over `tasks` of `per_task` multiply-adds (or window
/// reads) each: chunks of at least ~32k, yet at least one per thread.
inline int64_t phase_rows_grain(int64_t tasks, int64_t threads, int64_t per_task) {
  return std::max<int64_t>(1, std::min((tasks + threads - 1) / threads, (int64_t{1} << 15) / per_task));
}

/// One band of output rows of one output channel, read from phase rows.
///
/// Phase plane (qh, qw) (qh < s_h, qw < s_w) holds the zero-padded input at
/// padded[(band_row0 + j) * s_h + qh][c * s_w + qw] in its row j, column c:
/// row j of that plane starts at phases + (qh * s_w + qw) * plane + j * wq.
/// Output row r of the band (y + r * out_w), column ow, tap (kh, kw) reads
/// plane (kh % s_h, kw % s_w) at row r + kh / s_h, column ow + kw / s_w, so
/// every tap is a unit-stride read. The planes hold rows up to
/// rows + (k_h - 1) / s_h + kDwRowsSlackRows and wq >= out_w + (k_w - 1) / s_w
/// columns, wq a multiple of kDwRowsMaxLanes, and kDwRowsMaxLanes floats
/// after the last plane, all initialized: the lanes past out_w and the rows
/// past `rows` read on into them, and their results are discarded.
struct DwRowsBand {
  const float* phases = nullptr;
  int64_t wq = 0, plane = 0;  // phase row stride and phase plane stride, in floats
  int64_t s_w = 1, k_w = 1;   // k_h and s_h are the kernel's own (compile-time)
  int64_t col[kDwRowsMaxKw] = {};  // per kw: (kw % s_w) * plane + kw / s_w
  int64_t rows = 0, out_w = 0;
  const float* w = nullptr;  // this channel's k_h * k_w taps, row-major
  float bias = 0.f;
  float lo = 0.f, hi = 0.f;  // clamp, when `clamp`; NaN stays NaN
  bool clamp = false;
  float* y = nullptr;  // the band's first output row; rows are out_w apart
};

/// The phase rows of one band, copied from one input channel. Phase plane
/// (qh, qw), row j, column c gets padded[row0 + j * s_h + qh][c * s_w + qw]
/// for j < rows: the input at row row0 + j s_h + qh - p_h, column
/// c s_w + qw - p_w, or `pad` outside it (every column up to wq is
/// written). The pools share it (pool_rows.h), with -inf for MaxPool.
struct DwRowsFill {
  const float* x = nullptr;  // the channel, [in_h][in_w]
  int64_t in_h = 0, in_w = 0, p_h = 0, p_w = 0, s_h = 1, s_w = 1;
  float pad = 0.f;
  int64_t row0 = 0, rows = 0;
  float* phases = nullptr;
  int64_t wq = 0, plane = 0;
};

using DwRowsFn = void (*)(const DwRowsBand& band);
using DwFillFn = void (*)(const DwRowsFill& fill);

/// One ISA's kernels for one (k_h, s_h).
struct DwRowsKernels {
  DwRowsFn band = nullptr;
  DwFillFn fill = nullptr;
};

/// The kernels for k_h and s_h on this CPU; null members when none fits
/// (k_h not 3, 5 or 7; s_h not 1 or 2; no AVX2+FMA).
DwRowsKernels depthwise_rows_kernels(int64_t k_h, int64_t s_h);

#if defined(__x86_64__) || defined(__i386__)
/// The per-ISA tables (cpu/x86): null members where (k_h, s_h) has none.
DwRowsKernels depthwise_rows_kernels_avx512(int64_t k_h, int64_t s_h);
DwRowsKernels depthwise_rows_kernels_avx2(int64_t k_h, int64_t s_h);
#endif

/// For tests and benchmarks: run only the AVX-512 (1) or the AVX2 (2)
/// kernels (the depthwise ones and the pools), none of them (3: the
/// baseline paths), or pick by the CPU (0). False, changing nothing, where
/// the CPU lacks that ISA.
bool depthwise_rows_force_isa(int isa);

/// The ISA the phase-row kernels run with now: 1 AVX-512, 2 AVX2 + FMA, 0
/// none (no kernels on this CPU).
int phase_rows_isa();

/// Whether depthwise_rows_f32 takes p on this CPU: dilation 1, k_h in
/// {3, 5, 7}, s_h in {1, 2}, and rows wide enough to fill vectors.
bool depthwise_rows_applies(const DepthwiseConv& p);

/// depthwise_conv_f32 for the shapes depthwise_rows_applies accepts; split
/// over (image, input channel, band of output rows).
void depthwise_rows_f32(const DepthwiseConv& p, const float* x, const float* w, const float* bias, float* y,
                        ThreadPool* pool, const DepthwiseEpilogue& ep);

}  // namespace kiln::kernels
