// Slice, every opset: starts/ends/axes as attributes (opset 1-9) or inputs
// with steps (opset 10+). Bounds are clamped as the ONNX spec says: a start
// or end past either side of an axis is moved to the nearest valid position
// for the step's direction, so INT64_MAX means "to the end" and negative
// steps walk the axis backwards.
#include <algorithm>

#include "kernels/portable/util/strided_copy.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

class SliceKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    from_attrs_ = init.opset < 10;
    if (from_attrs_) {
      if (!init.node.has_attr("starts") || !init.node.has_attr("ends")) {
        return invalid_argument("attributes 'starts' and 'ends' are required");
      }
      starts_ = init.attr_ints("starts");
      ends_ = init.attr_ints("ends");
      has_axes_ = init.node.has_attr("axes");
      axes_ = init.attr_ints("axes");
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, from_attrs_ ? 1 : 3, from_attrs_ ? 1 : 5));
    const Tensor& in = ctx.input(0);
    const int64_t rank = static_cast<int64_t>(in.rank());
    std::vector<int64_t> starts, ends, axes, steps;
    bool has_axes = has_axes_, has_steps = false;
    if (from_attrs_) {
      starts = starts_;
      ends = ends_;
      axes = axes_;
    } else {
      if (!ctx.has_input(1) || !ctx.has_input(2)) {
        return invalid_argument("inputs 1 (starts) and 2 (ends) are required");
      }
      KILN_ASSIGN_OR_RETURN(starts, read_ints_input(ctx, 1, "starts"));
      KILN_ASSIGN_OR_RETURN(ends, read_ints_input(ctx, 2, "ends"));
      KILN_ASSIGN_OR_RETURN(axes, read_ints_input(ctx, 3, "axes", &has_axes));
      KILN_ASSIGN_OR_RETURN(steps, read_ints_input(ctx, 4, "steps", &has_steps));
    }
    if (ends.size() != starts.size()) {
      return invalid_argument("starts has ", starts.size(), " entries but ends has ",
                              ends.size());
    }
    if (!has_axes) {
      axes.resize(starts.size());
      for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
    }
    if (!has_steps) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size()) {
      return invalid_argument("starts, ends, axes and steps must have one length, got ",
                              starts.size(), ", ", ends.size(), ", ", axes.size(), ", ", steps.size());
    }
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> norm_axes, normalize_axes(axes, rank));

    Shape out_shape = in.shape();
    const std::vector<int64_t> in_strides = contiguous_strides(in.shape());
    std::vector<int64_t> src_strides = in_strides;
    int64_t base = 0;
    for (size_t i = 0; i < norm_axes.size(); ++i) {
      const size_t a = static_cast<size_t>(norm_axes[i]);
      const int64_t dim = in.dim(a), step = steps[i];
      if (step == 0) return invalid_argument("input 4 (steps) has a zero step for axis ", a);
      int64_t s = starts[i], e = ends[i];
      if (s < 0) s = s < -dim ? -1 : s + dim;  // avoids overflow near INT64_MIN
      if (e < 0) e = e < -dim ? -1 : e + dim;
      int64_t count;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, dim);
        e = std::clamp<int64_t>(e, 0, dim);
        count = e > s ? (e - s - 1) / step + 1 : 0;
      } else {
        s = std::clamp<int64_t>(s, -1, dim - 1);
        e = std::clamp<int64_t>(e, -1, dim - 1);
        count = s > e ? (s - e - 1) / -std::max(step, -INT64_MAX) + 1 : 0;
      }
      out_shape[a] = count;
      if (count > 0) base += s * in_strides[a];
      // A step past the axis takes one element; keep the stride product small.
      src_strides[a] = count > 1 ? in_strides[a] * step : 0;
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, in.dtype(), out_shape));
    if (out->numel() == 0) return Status::ok();
    layout::strided_copy(in.dtype(), out->raw_data(), contiguous_strides(out_shape),
                         layout::advance(in.raw_data(), base, in.dtype()), src_strides, out_shape.dims(), ctx.pool());
    return Status::ok();
  }

 private:
  bool from_attrs_ = false;
  bool has_axes_ = false;
  std::vector<int64_t> starts_, ends_, axes_;
};

}  // namespace

void register_slice_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Slice", .since_version = 1, .until_version = 1000, .dtypes = kAllDTypes,
         .type_input = 0, .factory = make_kernel<SliceKernel>, .flags = 0});
}

}  // namespace kiln::kernels
