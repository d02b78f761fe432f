// Detection ops: NonMaxSuppression (opset 10 and 11).
//
// Per batch and class: keep the boxes whose score is above score_threshold
// (when given), visit them by descending score (ties: lower box index
// first), and select a box unless its IoU with an already selected box is
// above iou_threshold; stop after max_output_boxes_per_class. Output rows
// are [batch, class, box], ordered by batch, then class, then selection.
// Corner boxes may be given with either corner first (ONNX-11 "flipped").
#include <algorithm>
#include <cmath>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

struct Box {
  float y1, x1, y2, x2;  // normalized: y1 <= y2, x1 <= x2
  float area() const { return (y2 - y1) * (x2 - x1); }
};

Box read_box(const float* b, bool center_point) {
  if (center_point) {  // [x_center, y_center, width, height]
    const float hw = b[2] / 2, hh = b[3] / 2;
    return {b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

// True when the IoU of a and b is above `threshold`.
bool overlaps(const Box& a, const Box& b, float threshold) {
  const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return false;
  const float inter = ih * iw;
  const float area_a = a.area(), area_b = b.area();
  const float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

class NonMaxSuppression final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const int64_t c = init.attr_int("center_point_box", 0);
    if (c != 0 && c != 1) return invalid_argument("attribute center_point_box must be 0 or 1, got ", c);
    center_point_ = c == 1;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1))
      return invalid_argument("inputs 0 (boxes) and 1 (scores) are required");
    const Tensor& boxes = ctx.input(0);
    const Tensor& scores = ctx.input(1);
    if (boxes.dtype() != DType::kFloat32 || scores.dtype() != DType::kFloat32)
      return invalid_argument("inputs 0 (boxes) and 1 (scores) must be float32");
    if (boxes.rank() != 3 || boxes.dim(2) != 4) {
      return invalid_argument("input 0 (boxes) must be [num_batches, num_boxes, 4], got ",
                              boxes.shape().to_string());
    }
    const int64_t batches = boxes.dim(0), num_boxes = boxes.dim(1);
    if (scores.rank() != 3 || scores.dim(0) != batches || scores.dim(2) != num_boxes) {
      return invalid_argument("input 1 (scores) must be [", batches, ", num_classes, ", num_boxes,
                              "], got ", scores.shape().to_string());
    }
    const int64_t classes = scores.dim(1);
    int64_t max_out = 0;
    float iou_threshold = 0.f, score_threshold = 0.f;
    bool has_score_threshold = false;
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      KILN_ASSIGN_OR_RETURN(auto v, to_int64_vector(ctx.input(2)));
      if (v.size() != 1) return invalid_argument("input 2 (max_output_boxes_per_class) must be a scalar");
      max_out = v[0];
    }
    if (ctx.has_input(3) && ctx.input(3).numel() > 0) {
      KILN_ASSIGN_OR_RETURN(auto v, to_double_vector(ctx.input(3)));
      if (v.size() != 1) return invalid_argument("input 3 (iou_threshold) must be a scalar");
      iou_threshold = static_cast<float>(v[0]);
      if (iou_threshold < 0 || iou_threshold > 1)
        return invalid_argument("input 3 (iou_threshold) must be in [0, 1], got ", iou_threshold);
    }
    if (ctx.has_input(4) && ctx.input(4).numel() > 0) {
      KILN_ASSIGN_OR_RETURN(auto v, to_double_vector(ctx.input(4)));
      if (v.size() != 1) return invalid_argument("input 4 (score_threshold) must be a scalar");
      score_threshold = static_cast<float>(v[0]);
      has_score_threshold = true;
    }

    std::vector<int64_t> selected;  // triples
    if (max_out > 0) {
      std::vector<Box> bx(static_cast<size_t>(num_boxes));
      std::vector<int64_t> order;
      std::vector<int64_t> kept;
      for (int64_t b = 0; b < batches; ++b) {
        for (int64_t i = 0; i < num_boxes; ++i)
          bx[static_cast<size_t>(i)] = read_box(boxes.data<float>() + (b * num_boxes + i) * 4, center_point_);
        for (int64_t c = 0; c < classes; ++c) {
          const float* s = scores.data<float>() + (b * classes + c) * num_boxes;
          order.clear();
          for (int64_t i = 0; i < num_boxes; ++i) {
            if (std::isnan(s[i])) continue;  // unordered: never selected
            if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
          }
          std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
          kept.clear();
          for (int64_t i : order) {
            if (static_cast<int64_t>(kept.size()) >= max_out) break;
            bool suppressed = false;
            for (int64_t k : kept) {
              if (overlaps(bx[static_cast<size_t>(i)], bx[static_cast<size_t>(k)], iou_threshold)) {
                suppressed = true;
                break;
              }
            }
            if (suppressed) continue;
            kept.push_back(i);
            selected.insert(selected.end(), {b, c, i});
          }
        }
      }
    }
    const auto n = static_cast<int64_t>(selected.size() / 3);
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DType::kInt64, Shape{n, 3}));
    std::copy(selected.begin(), selected.end(), out->data<int64_t>());
    return Status::ok();
  }

 private:
  bool center_point_ = false;
};

}  // namespace

void register_detection_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "NonMaxSuppression", .since_version = 10, .until_version = 1000,
         .dtypes = dtype_set(DType::kFloat32), .type_input = 0, .factory = make_kernel<NonMaxSuppression>, .flags = 0});
}

}  // namespace kiln::kernels
