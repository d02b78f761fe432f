// The AVX2+FMA variant of the plugin's 3x3 depthwise kernel (xnn_dwconv.h)
// for CPUs without AVX-512F: 16 channels as two halves of 8, each half's
// filter (9 vectors) in registers across the rows, four output pixels at a
// time from the input columns under them (each column loaded once per row
// and used by every output that reads it).
#pragma once

#include <cstddef>

#include "xnn_dwconv.h"

namespace kiln_xnnpack {

/// depthwise3x3_rows16 for channels [c0, c0 + 16) of s.c (the caller's
/// rows point at channel 0), as the AVX-512 kernel: `nrows` output rows,
/// row r at output + r * out_row from input rows rows[3 r .. 3 r + 2].
void depthwise3x3_rows16_avx2(const DepthwiseShape& s, const float* const* rows, size_t nrows, const float* filter,
                              const float* bias, float* output, size_t out_row, size_t c0);

}  // namespace kiln_xnnpack
