// GridSample (opset 16: bilinear/nearest/bicubic on 4-D input; opset 20
// names linear/cubic and N-D input): samples X [N, C, D1..Dk] at the
// normalized coordinates of grid [N, O1..Ok, k], whose last axis lists x
// (the last spatial axis) first.
//
// Semantics are PyTorch's grid_sampler (the source of the ONNX test data):
// linear and nearest apply the padding mode to the source coordinate and
// read zero outside the input; cubic takes the 4 neighbours of the
// unpadded coordinate and applies the padding mode to each neighbour's
// index. Nearest rounds half to even (nearbyint). Sampling is separable:
// per spatial axis a few (index, weight) taps, summed over their product.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

enum class SampleMode { kLinear, kNearest, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

double unnormalize(double c, int64_t size, bool align_corners) {
  const auto s = static_cast<double>(size);
  return align_corners ? (c + 1) / 2 * (s - 1) : ((c + 1) * s - 1) / 2;
}

double clip_coordinate(double c, int64_t size) { return std::min(static_cast<double>(size - 1), std::max(c, 0.0)); }

// Reflects c into [twice_low / 2, twice_high / 2] (PyTorch reflect_coordinates).
double reflect_coordinate(double c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const double lo = static_cast<double>(twice_low) / 2;
  const double span = static_cast<double>(twice_high - twice_low) / 2;
  c = std::fabs(c - lo);
  const double extra = std::fmod(c, span);
  const auto flips = static_cast<int64_t>(std::floor(c / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

double pad_coordinate(double c, int64_t size, Padding padding, bool align_corners) {
  if (padding == Padding::kBorder) return clip_coordinate(c, size);
  if (padding == Padding::kReflection) {
    c = align_corners ? reflect_coordinate(c, 0, 2 * (size - 1)) : reflect_coordinate(c, -1, 2 * size - 1);
    return clip_coordinate(c, size);
  }
  return c;
}

double cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
double cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

// Up to 4 taps along one axis; index -1 marks a tap that reads zero.
struct Taps {
  int64_t index[4];
  double weight[4];
  int count = 0;
  void add(int64_t i, double w, int64_t size) {
    index[count] = i >= 0 && i < size ? i : -1;
    weight[count] = w;
    ++count;
  }
};

class GridSample final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const std::string mode = init.attr_string("mode", init.opset >= 20 ? "linear" : "bilinear");
    if (mode == "bilinear" || mode == "linear") mode_ = SampleMode::kLinear;
    else if (mode == "nearest") mode_ = SampleMode::kNearest;
    else if (mode == "bicubic" || mode == "cubic") mode_ = SampleMode::kCubic;
    else return invalid_argument("attribute mode '", mode, "' is not supported");
    const std::string pad = init.attr_string("padding_mode", "zeros");
    if (pad == "zeros") padding_ = Padding::kZeros;
    else if (pad == "border") padding_ = Padding::kBorder;
    else if (pad == "reflection") padding_ = Padding::kReflection;
    else return invalid_argument("attribute padding_mode '", pad, "' is not zeros, border or reflection");
    align_corners_ = init.attr_int("align_corners", 0) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Tensor& grid = ctx.input(1);
    if (!dtype_is_float(x.dtype()) || !dtype_is_float(grid.dtype())) {
      return invalid_argument("inputs 0 (X) and 1 (grid) must be float, got ", dtype_name(x.dtype()),
                              " and ", dtype_name(grid.dtype()));
    }
    if (x.rank() < 3) {
      return invalid_argument("input 0 (X) must be [N, C, D1, ...], got ", x.shape().to_string());
    }
    const size_t k = x.rank() - 2;
    if (grid.rank() != k + 2 || grid.dim(0) != x.dim(0) || grid.dim(k + 1) != static_cast<int64_t>(k)) {
      return invalid_argument("input 1 (grid) must be [", x.dim(0), ", out dims (", k, ")..., ", k,
                              "] for X ", x.shape().to_string(), ", got ", grid.shape().to_string());
    }
    const int64_t n = x.dim(0), c = x.dim(1);
    Shape out_shape{n, c};
    int64_t out_spatial = 1, in_spatial = 1;
    for (size_t d = 0; d < k; ++d) {
      out_shape.push_back(grid.dim(d + 1));
      out_spatial *= grid.dim(d + 1);
      in_spatial *= x.dim(d + 2);
    }
    KILN_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
    if (out->numel() == 0) return Status::ok();
    if (in_spatial == 0) return invalid_argument("input 0 (X) has an empty spatial dimension");
    KILN_ASSIGN_OR_RETURN(std::vector<double> g, to_double_vector(grid));
    KILN_ASSIGN_OR_RETURN(std::vector<double> in, to_double_vector(x));
    std::vector<double> res(static_cast<size_t>(out->numel()));
    std::vector<int64_t> in_strides(k);
    for (size_t d = k; d-- > 0;) in_strides[d] = d + 1 == k ? 1 : in_strides[d + 1] * x.dim(d + 3);

    auto body = [&](int64_t p0, int64_t p1) {
      std::vector<Taps> taps(k);
      std::vector<int> pos(k);
      for (int64_t p = p0; p < p1; ++p) {  // p = b * out_spatial + o
        const int64_t b = p / out_spatial;
        const double* gp = g.data() + p * static_cast<int64_t>(k);
        for (size_t d = 0; d < k; ++d) {
          // grid lists x (the last axis) first.
          make_taps(gp[k - 1 - d], x.dim(d + 2), &taps[d]);
        }
        for (int64_t ch = 0; ch < c; ++ch) {
          const double* src = in.data() + (b * c + ch) * in_spatial;
          double acc = 0;
          std::fill(pos.begin(), pos.end(), 0);
          while (true) {
            double w = 1;
            int64_t off = 0;
            bool zero = false;
            for (size_t d = 0; d < k; ++d) {
              const Taps& t = taps[d];
              const int64_t idx = t.index[pos[d]];
              if (idx < 0) {
                zero = true;
                break;
              }
              w *= t.weight[pos[d]];
              off += idx * in_strides[d];
            }
            if (!zero) acc += w * src[off];
            size_t d = k;
            while (d-- > 0) {
              if (++pos[d] < taps[d].count) break;
              pos[d] = 0;
            }
            if (d == static_cast<size_t>(-1)) break;
          }
          res[static_cast<size_t>((b * c + ch) * out_spatial + p % out_spatial)] = acc;
        }
      }
    };
    parallel_for(ctx.pool(), n * out_spatial, 256, body);

    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, double>) {
        std::copy(res.begin(), res.end(), out->data<double>());
      } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        T* o = out->data<T>();
        for (size_t i = 0; i < res.size(); ++i) o[i] = static_cast<T>(static_cast<float>(res[i]));
      }
    });
    return Status::ok();
  }

 private:
  void make_taps(double coord, int64_t size, Taps* t) const {
    t->count = 0;
    if (std::isnan(coord)) {
      t->add(-1, 0, size);
      return;
    }
    double c = unnormalize(coord, size, align_corners_);
    switch (mode_) {
      case SampleMode::kNearest: {
        c = pad_coordinate(c, size, padding_, align_corners_);
        t->add(static_cast<int64_t>(std::nearbyint(c)), 1.0, size);
        return;
      }
      case SampleMode::kLinear: {
        c = pad_coordinate(c, size, padding_, align_corners_);
        const double f = std::floor(c);
        const double r = c - f;
        const auto i = static_cast<int64_t>(f);
        t->add(i, 1 - r, size);
        t->add(i + 1, r, size);
        return;
      }
      case SampleMode::kCubic: {
        const double f = std::floor(c);
        const double r = c - f;
        const auto i = static_cast<int64_t>(f);
        constexpr double kA = -0.75;
        const double w[4] = {cubic2(r + 1, kA), cubic1(r, kA), cubic1(1 - r, kA), cubic2(2 - r, kA)};
        for (int j = 0; j < 4; ++j) {
          int64_t idx = i - 1 + j;
          if (padding_ != Padding::kZeros) {
            idx = static_cast<int64_t>(pad_coordinate(static_cast<double>(idx), size, padding_, align_corners_));
          }
          t->add(idx, w[j], size);
        }
        return;
      }
    }
  }

  SampleMode mode_ = SampleMode::kLinear;
  Padding padding_ = Padding::kZeros;
  bool align_corners_ = false;
};

}  // namespace

void register_grid_sample_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "GridSample", .since_version = 16, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<GridSample>, .flags = 0});
}

}  // namespace kiln::kernels
