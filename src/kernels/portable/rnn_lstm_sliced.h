// LSTM with constant weights, run slice by slice: the hidden units are cut
// into slices of kLstmSliceUnits, and each slice's rows of R (its units' four
// gates) are packed at load as one GEMM operand. A step is then, per slice,
// one small GEMM that adds H_{t-1} R^T onto the slice's input projection and
// the whole cell (gates, C_t, H_t) in one pass over the slice's units while
// they are in L1. Slices are independent within a step, so a step is one
// parallel_for over slices with no pass over the gate vectors between two
// parallel regions (the general path in rnn.cpp makes three per step).
//
// The input projection X W^T for all steps is one GEMM up front whose columns
// come out in slice order (W is packed with its rows permuted the same way),
// with both biases in its epilogue.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels {

/// Hidden units per slice: 4 * 32 gate columns, a whole number of the
/// AVX-512 (32) and AVX2 (16) microkernels' column panels.
inline constexpr int64_t kLstmSliceUnits = 32;

/// Column of gate `gate` (ONNX order i, o, f, c) of hidden unit `unit` in the
/// slice order: slice q = unit / 32 holds columns [128 q, 128 q + 4 w) with
/// w = its unit count, gate-major within the slice.
int64_t lstm_slice_column(int64_t hidden, int64_t gate, int64_t unit);

/// Batches up to this size multiply H_{t-1} by R with the sliced path's own
/// kernel (rows in groups of 3, or 4 with AVX-512: R read once per group
/// and step, accumulators in registers); larger ones use the SGEMM engine.
/// lstm_small_batch() is the bound on this CPU (4 with AVX-512, else 3).
int64_t lstm_small_batch();

/// One direction's W and R (ONNX layout, [4H, I] and [4H, H], row-major
/// float32) packed for the sliced step. R is held in one of two forms, per
/// slice: for the engine (batches above lstm_small_batch()), or as R^T in
/// panels of 32 columns ([panel][H][32], the last zero-padded) for the
/// small-batch kernel. Either form runs any batch; the other one only
/// slower.
struct LstmSlicedWeights {
  int64_t hidden = 0, input = 0;
  PackedMatrix w;                            // W^T, I x 4H, columns in slice order
  std::vector<PackedMatrix> r;               // engine form: R^T, H x 4w, its gate columns
  std::vector<std::vector<float>> r_panels;  // small-batch form
};

/// `small_batch`: R in the small-batch form (the batch is known at load to
/// be at most lstm_small_batch()), else in the engine's.
LstmSlicedWeights pack_lstm_sliced(int64_t hidden, int64_t input, const float* w, const float* r, bool small_batch);

/// The cell's options (ONNX LSTM attributes); activations are the default
/// Sigmoid, Tanh, Tanh.
struct LstmCellOptions {
  const float* peepholes = nullptr;  // [3H] (i, o, f) or null
  bool input_forget = false;
  float clip = 0.f;  // > 0: clip every gate pre-activation to [-clip, clip]
};

/// One direction over a sequence. `x` is seq-major [seq][batch][input];
/// `h` and `c` are the [batch][H] states, read as the initial state and left
/// as the final one; `y`, when not null, gets H_t at y + t * y_step (rows of
/// H floats, one per batch entry; zero where the entry's sequence ended).
/// `lens` holds each batch entry's length (steps at or past it leave the
/// state as it was). `wb`, `rb` are the [4H] biases or null.
struct LstmSequence {
  int64_t seq = 0, batch = 0;
  bool reverse = false;
  const float* x = nullptr;
  const int64_t* lens = nullptr;
  const float* wb = nullptr;
  const float* rb = nullptr;
  float* h = nullptr;
  float* c = nullptr;
  float* y = nullptr;
  int64_t y_step = 0;
};

void run_lstm_sliced(const LstmSlicedWeights& weights, const LstmCellOptions& options, const LstmSequence& s,
                     ThreadPool* pool);

}  // namespace kiln::kernels
