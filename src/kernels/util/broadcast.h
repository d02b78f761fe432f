// Numpy broadcasting and strides: the shape arithmetic shared by kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/result.h"
#include "kiln/shape.h"

namespace kiln::kernels {

/// Numpy broadcasting of two shapes; the error names both shapes.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);
/// Numpy broadcasting of several shapes.
Result<Shape> broadcast_shapes(std::span<const Shape* const> shapes);
/// Broadcasting of inputs ia and ib (shapes a and b); the error names both inputs.
Result<Shape> broadcast_inputs(const Shape& a, size_t ia, const Shape& b, size_t ib);

/// Row-major strides of `shape` in elements.
std::vector<int64_t> contiguous_strides(const Shape& shape);

/// Strides to read `in` (rank <= out.rank()) broadcast to `out`: right-aligned,
/// 0 on broadcast dims. Result has out.rank() entries.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

/// Calls f(offset_a, offset_b, offset_out, count) over `out` in row-major
/// order, where each call covers `count` contiguous output elements whose
/// input offsets advance by step_a/step_b (0 or 1) per element. The inner
/// run is the longest suffix of dims where broadcasting is uniform.
struct BroadcastPlan {
  Shape out;
  std::vector<int64_t> outer_dims;  // dims iterated one by one
  std::vector<int64_t> outer_a, outer_b;  // strides of a and b on outer dims
  int64_t inner = 1;                      // contiguous run length
  int64_t step_a = 1, step_b = 1;         // 0 (scalar along run) or 1
  int64_t num_runs() const { return inner ? out.numel() / inner : 0; }
  /// Offsets of a and b at the start of run r.
  void run_offsets(int64_t r, int64_t* off_a, int64_t* off_b) const;
};
Result<BroadcastPlan> make_broadcast_plan(const Shape& a, const Shape& b);

}  // namespace kiln::kernels
