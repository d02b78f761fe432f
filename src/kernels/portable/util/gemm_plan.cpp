#include "kernels/portable/util/gemm_plan.h"

namespace kiln::kernels::gemm {

namespace {

// The model, in CPU cycles (rough, but the same scale for every term).
// Microkernel: per K step, an R-row panel times H vectors of B costs about
// (R + 1) * H / 2 (R * H FMAs at two a cycle, plus the B loads): edge tiles
// and thin tiles cost more per element than full ones.
constexpr double kFmaCycles = 0.5;
// Packing, per element copied: B rows (contiguous), B from a panel source
// (im2col: gathers, padding tests), A (a gather across rows unless transposed).
constexpr double kPackB = 0.25, kPackSource = 0.6, kPackA = 0.35;
constexpr double kTileCycles = 300;      // a tile's setup (scratch, loop heads)
constexpr double kDispatchCycles = 1500; // handing a job to the pool and joining it (~0.5 us)
// A column split of C = W X (B not pre-packed: Conv's activations) leaves
// each output channel's row written by several threads, so the next node,
// split by channel (depthwise conv, element-wise), reads half of it from the
// other core's cache: measured ~1 cycle per element of C on the 14x14 expand
// convs of mobilenet_v2. With B pre-packed (X^T W^T, MatMul weights) columns
// are the channels.
constexpr double kCrossCycles = 1.0;
// Preferring more, smaller tiles when they cost little more: if one thread
// is held up (a busy machine) the others can take its share.
constexpr double kSlack = 0.08;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Model {
  const GemmShape& s;
  const TileGeometry& g;
  int64_t row_units, col_units;

  double pack_b_per_elem() const { return s.b_source ? kPackSource : kPackB; }
  bool b_needs_pack() const { return !s.b_packed && !s.b_direct; }

  // The microkernel's cost over `rows` rows (in `panels` MR panels) and `vecs` vectors of columns.
  double micro(int64_t rows, int64_t panels, int64_t vecs) const {
    return kFmaCycles * static_cast<double>(s.k) * static_cast<double>(rows + panels) * static_cast<double>(vecs);
  }

  double serial() const {
    double c = micro(s.m, row_units, col_units) + kTileCycles;
    if (!s.a_packed) c += kPackA * static_cast<double>(s.k * row_units * g.mr);
    if (b_needs_pack()) c += pack_b_per_elem() * static_cast<double>(s.k * ceil_div(s.n, g.nr) * g.nr);
    return c;
  }

  // The slowest thread's time for a tm x tn grid on `threads` threads.
  double grid(int64_t tm, int64_t tn, int64_t threads, bool share_a, bool share_b) const {
    const int64_t panels = ceil_div(row_units, tm), units = ceil_div(col_units, tn);
    const int64_t rows = std::min(s.m, panels * g.mr), cols = std::min(s.n, units * g.lane);
    double tile = micro(rows, panels, units) + kTileCycles;
    if (!s.a_packed && !share_a) tile += kPackA * static_cast<double>(s.k * panels * g.mr);
    if (b_needs_pack() && !share_b) tile += pack_b_per_elem() * static_cast<double>(s.k * ceil_div(cols, g.nr) * g.nr);
    const double t = static_cast<double>(threads);
    double shared = 0;
    if (share_a) shared += kDispatchCycles + kPackA * static_cast<double>(s.k * row_units * g.mr) / t;
    if (share_b) shared += kDispatchCycles + pack_b_per_elem() * static_cast<double>(s.k * ceil_div(s.n, g.nr) * g.nr) / t;
    const double per_thread = static_cast<double>(ceil_div(tm * tn, threads)) * tile;
    const double cross = tn > 1 && !s.b_packed ? kCrossCycles * static_cast<double>(s.m * s.n) / t : 0;
    return per_thread + shared + cross + kDispatchCycles + kSlack * tile;
  }
};

}  // namespace

TilePlan plan_tiles(const GemmShape& s, const TileGeometry& geo, int64_t threads) {
  TilePlan plan;
  plan.m = s.m;
  plan.n = s.n;
  plan.mr = geo.mr;
  plan.lane = geo.lane;
  plan.row_units = std::max<int64_t>(1, ceil_div(s.m, geo.mr));
  plan.col_units = std::max<int64_t>(1, ceil_div(s.n, geo.lane));
  if (threads <= 1 || s.m <= 0 || s.n <= 0 || s.k <= 0) return plan;
  const Model model{s, geo, plan.row_units, plan.col_units};
  double best = model.serial();
  // Up to 4 tiles per thread: more only adds packing and per-tile costs.
  const int64_t max_tiles = 4 * threads;
  for (int64_t tm = 1; tm <= std::min(plan.row_units, max_tiles); ++tm) {
    for (int64_t tn = 1; tn <= std::min(plan.col_units, max_tiles / tm); ++tn) {
      if (tm * tn < 2) continue;
      const bool share_b = model.b_needs_pack() && tn == 1;
      const bool share_a = !s.a_packed && tm == 1;
      const double cost = model.grid(tm, tn, threads, share_a, share_b);
      if (cost < best) {
        best = cost;
        plan.tm = tm;
        plan.tn = tn;
        plan.share_a = share_a;
        plan.share_b = share_b;
      }
    }
  }
  return plan;
}

}  // namespace kiln::kernels::gemm
