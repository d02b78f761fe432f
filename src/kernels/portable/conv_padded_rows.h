// Conv as one GEMM over the zero-bordered input read as rows.
//
// With stride 1, output (oy, ox) of tap (kh, kw) reads the padded input at
// (oy + kh * dh, ox + kw * dw). Number the outputs over the padded width Wp
// instead of the output width, q = oy * Wp + ox, and that input is at
// q + kh * dh * Wp + kw * dw: for every tap, row (c, kh, kw) of the im2col
// matrix is one contiguous run of the padded channel. So B packs with plain
// copies of whole runs, where im2col_panels splits every output row into
// pad | input | pad pieces (its cost per piece dominates on small maps: a
// RegNet group conv, 8 channels per group on a 7x7 map, spent 78% of its
// time there). The price: the Wp - OW columns past each output row are
// computed and dropped (C goes to a scratch, then its rows are copied into
// Y), and the input is first copied into a zero-bordered scratch.
//
// Stride 2 splits the padded input into its four phase planes (even/odd
// rows x even/odd columns) while bordering it; each tap then reads one
// plane as rows, as above, with about one extra column per output row
// (YOLO/ResNet/MobileNet downsampling convs, where im2col's strided pieces
// cost most).
//
// Used (auto) for stride-1 and stride-2 1-D/2-D convs with output rows of at most 112
// where that overwork is small (padded_rows_gain; stride 2 also needs K = channels per
// group * taps >= 32); it gains most where im2col's per-piece cost is large
// against the GEMM: grouped convs with few channels per group, small maps.
// KILN_CONV_ROWS=off|always|auto sets the mode (comparisons, tests).
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels {

enum class PaddedRowsMode { kAuto, kOff, kAlways };
/// Process-wide; the environment variable KILN_CONV_ROWS sets the start.
/// Not thread-safe: call before running.
void set_padded_rows_mode(PaddedRowsMode mode);

/// Whether the padded-rows path can run `g` (stride 1 or 2, rank 1 or 2) and, by
/// the mode, should (its extra columns are few; with stride 2 also enough
/// input channels per group `cg` or short rows).
bool padded_rows_gain(const WindowGeometry& g, int64_t cg);

/// One image and group: Y_g (mg x out) = A (mg x cg*taps) * im2col(X_g), then
/// the epilogue `ep` (biases, clamp, apply), with FusedConv's sum input
/// `zg` (the group's planes of Z; may be null) added before the clamp. `xg`
/// is the group's cg input planes, `yg` its mg output planes. `g` must
/// satisfy padded_rows_gain's shape conditions. Splits the work over `pool`
/// (may be null).
void conv_padded_rows(const WindowGeometry& g, int64_t cg, int64_t mg, const float* xg, const GemmOperand& a,
                      const GemmEpilogue& ep, const float* zg, float* yg, ThreadPool* pool);

}  // namespace kiln::kernels
