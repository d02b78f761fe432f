// How the SGEMM engine (gemm.cpp) splits one product over a pool's threads:
// a grid of tm x tn tiles of C, row tiles on register-tile edges (MR rows)
// and column tiles on vector edges (the SIMD microkernels' tiles are two
// vectors wide, so a column tile may start in the middle of a packed B
// panel). The grid is picked by a small cost model of the microkernel and of
// the packing each tile repeats, so that two threads get balanced shares even
// of the products of small feature maps: 49 rows (7x7) times 960 columns
// splits into column tiles of 480 rather than 4 + 3 panels of 32, and 64
// rows times 196 columns into two tiles of 112 and 84 columns rather than
// 4 + 2 panels. Internal to the engine; kernels use gemm.h.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kiln::kernels::gemm {

/// The microkernel's geometry as the planner sees it.
struct TileGeometry {
  int64_t mr = 1;    // register-tile rows (row tiles start at multiples of it)
  int64_t nr = 1;    // register-tile columns (one packed B panel)
  int64_t lane = 1;  // columns of one vector (divides nr; column tiles start at multiples of it)
};

/// What the planner needs to know about one product and its operands.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool a_packed = false;  // A pre-packed: tiles never pack it
  bool b_packed = false;  // B pre-packed
  bool b_direct = false;  // B read in place by the microkernel: tiles never pack it
  bool b_source = false;  // B produced by a panel source (im2col: packing costs more)
};

/// A grid of tiles over C. Tile t is row tile t / tn and column tile t % tn;
/// row tile r covers rows [row_begin(r), row_begin(r + 1)), column tile c
/// columns [col_begin(c), col_begin(c + 1)); none is empty.
struct TilePlan {
  int64_t m = 0, n = 0;
  int64_t mr = 1, lane = 1;
  int64_t row_units = 1, col_units = 1;  // MR-row panels and lane-wide column units of C
  int64_t tm = 1, tn = 1;
  /// Pack the whole operand once, split over the pool, before the tiles run
  /// (each tile would otherwise pack all of it): B when only rows are split,
  /// A when only columns are.
  bool share_a = false, share_b = false;

  int64_t tiles() const { return tm * tn; }
  int64_t row_begin(int64_t r) const { return std::min(m, r * row_units / tm * mr); }
  int64_t col_begin(int64_t c) const { return std::min(n, c * col_units / tn * lane); }
};

/// The grid for `threads` threads (1 tile when one thread, or when splitting
/// would cost more than it gains: small products).
TilePlan plan_tiles(const GemmShape& s, const TileGeometry& geo, int64_t threads);

}  // namespace kiln::kernels::gemm
