// Spatial op versions from opsets 18-20: CenterCropPad-18, Col2Im-18,
// GroupNormalization-18/21 and AffineGrid-20.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

// ------------------------------------------------------------ CenterCropPad

class CenterCropPadKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    axes_ = init.attr_ints("axes");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1))
      return invalid_argument("needs input_data and shape");
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> target, to_int64_vector(ctx.input(1)));
    const auto rank = static_cast<int64_t>(x.rank());
    std::vector<int64_t> axes = axes_;
    if (axes.empty())
      for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
    if (axes.size() != target.size())
      return invalid_argument("shape has ", target.size(), " values for ", axes.size(), " axes");
    Shape out_shape = x.shape();
    std::vector<int64_t> shift(static_cast<size_t>(rank), 0);  // input index = output index + shift
    for (size_t i = 0; i < axes.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(const int64_t a, normalize_axis(axes[i], rank));
      if (target[i] < 0) return invalid_argument("shape value ", target[i], " is negative");
      const int64_t dim = x.dim(static_cast<size_t>(a));
      out_shape[static_cast<size_t>(a)] = target[i];
      shift[static_cast<size_t>(a)] = dim >= target[i] ? (dim - target[i]) / 2 : -((target[i] - dim) / 2);
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_shape));
    if (x.dtype() == DType::kString)
      return invalid_argument("string tensors are not supported");
    const size_t elem = dtype_size(x.dtype());
    std::memset(y->raw_data(), 0, y->nbytes());
    const std::vector<int64_t> xs = contiguous_strides(x.shape());
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    const auto* src = static_cast<const uint8_t*>(x.raw_data());
    auto* dst = static_cast<uint8_t*>(y->raw_data());
    for (int64_t o = 0; o < y->numel(); ++o) {
      int64_t off = 0;
      bool inside = true;
      for (size_t d = 0; d < idx.size(); ++d) {
        const int64_t i = idx[d] + shift[d];
        inside &= i >= 0 && i < x.dim(d);
        off += i * xs[d];
      }
      if (inside) std::memcpy(dst + static_cast<size_t>(o) * elem, src + static_cast<size_t>(off) * elem, elem);
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < out_shape[d]) break;
        idx[d] = 0;
      }
    }
    return Status::ok();
  }

 private:
  std::vector<int64_t> axes_;
};

// ------------------------------------------------------------ Col2Im

class Col2ImKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    dilations_ = init.attr_ints("dilations");
    pads_ = init.attr_ints("pads");
    strides_ = init.attr_ints("strides");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
    const Tensor& x = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> image, to_int64_vector(ctx.input(1)));
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> block, to_int64_vector(ctx.input(2)));
    const size_t nd = image.size();
    if (x.rank() != 3 || block.size() != nd || nd == 0)
      return invalid_argument("input ", x.shape().to_string(), " with image_shape of ", nd,
                              " and block_shape of ", block.size(), " values");
    std::vector<int64_t> dil(nd, 1), str(nd, 1), pad(2 * nd, 0), grid(nd);
    if (!dilations_.empty()) dil = dilations_;
    if (!strides_.empty()) str = strides_;
    if (!pads_.empty()) pad = pads_;
    if (dil.size() != nd || str.size() != nd || pad.size() != 2 * nd)
      return invalid_argument("dilations, strides or pads do not fit ", nd, " spatial dims");
    int64_t kprod = 1, lprod = 1;
    for (size_t d = 0; d < nd; ++d) {
      kprod *= block[d];
      if (str[d] <= 0) return invalid_argument("strides must be positive");
      grid[d] = (image[d] + pad[d] + pad[d + nd] - dil[d] * (block[d] - 1) - 1) / str[d] + 1;
      lprod *= grid[d];
    }
    if (kprod <= 0 || x.dim(1) % kprod != 0 || x.dim(2) != lprod)
      return invalid_argument("input ", x.shape().to_string(), " does not fit blocks of ",
                              kprod, " and ", lprod, " block positions");
    const int64_t n = x.dim(0), c = x.dim(1) / kprod;
    Shape out_shape{n, c};
    int64_t iprod = 1;
    for (int64_t v : image) {
      out_shape.push_back(v);
      iprod *= v;
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_shape));
    std::vector<float> in = to_float_vector(x), out(static_cast<size_t>(y->numel()), 0.f);
    std::vector<int64_t> k(nd), l(nd);
    for (int64_t b = 0; b < n * c; ++b) {
      for (int64_t kf = 0; kf < kprod; ++kf) {
        unravel(kf, block, &k);
        for (int64_t lf = 0; lf < lprod; ++lf) {
          unravel(lf, grid, &l);
          int64_t pos = 0;
          bool inside = true;
          for (size_t d = 0; d < nd; ++d) {
            const int64_t p = l[d] * str[d] - pad[d] + k[d] * dil[d];
            inside &= p >= 0 && p < image[d];
            pos = pos * image[d] + p;
          }
          if (inside) out[static_cast<size_t>(b * iprod + pos)] += in[static_cast<size_t>((b * kprod + kf) * lprod + lf)];
        }
      }
    }
    from_float_vector(out.data(), y);
    return Status::ok();
  }

 private:
  static void unravel(int64_t flat, const std::vector<int64_t>& dims, std::vector<int64_t>* idx) {
    for (size_t d = dims.size(); d-- > 0;) {
      (*idx)[d] = flat % dims[d];
      flat /= dims[d];
    }
  }

  std::vector<int64_t> dilations_, pads_, strides_;
};

// ------------------------------------------------------------ GroupNormalization

class GroupNormKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    groups_ = init.attr_int("num_groups", 0);
    epsilon_ = init.attr_float("epsilon", 1e-5f);
    if (groups_ <= 0) return invalid_argument("num_groups must be positive");
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    for (size_t i = 0; i < 3; ++i)
      if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2 || x.dim(1) % groups_ != 0)
      return invalid_argument("X ", x.shape().to_string(), " has no channel dim that ",
                              groups_, " groups divide");
    const int64_t n = x.dim(0), c = x.dim(1), per = c / groups_;
    const int64_t spatial = c ? x.numel() / (n * c) : 0;
    const std::vector<float> scale = to_float_vector(ctx.input(1)), bias = to_float_vector(ctx.input(2));
    // Opset 18: one scale per group; opset 21: one per channel.
    const bool per_channel = static_cast<int64_t>(scale.size()) == c;
    if ((!per_channel && static_cast<int64_t>(scale.size()) != groups_) || bias.size() != scale.size())
      return invalid_argument("scale and bias have ", scale.size(), " and ", bias.size(),
                              " values; expected ", c, " (channels) or ", groups_, " (groups)");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    std::vector<float> v = to_float_vector(x);
    const int64_t len = per * spatial;
    for (int64_t g = 0; g < n * groups_; ++g) {
      float* p = v.data() + g * len;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < len; ++i) mean += p[i];
      mean /= static_cast<double>(len ? len : 1);
      for (int64_t i = 0; i < len; ++i) var += (p[i] - mean) * (p[i] - mean);
      var /= static_cast<double>(len ? len : 1);
      const double inv = 1.0 / std::sqrt(var + epsilon_);
      for (int64_t ch = 0; ch < per; ++ch) {
        const size_t k = static_cast<size_t>(per_channel ? (g % groups_) * per + ch : g % groups_);
        for (int64_t i = 0; i < spatial; ++i) {
          float& e = p[ch * spatial + i];
          e = static_cast<float>((e - mean) * inv) * scale[k] + bias[k];
        }
      }
    }
    from_float_vector(v.data(), y);
    return Status::ok();
  }

 private:
  int64_t groups_ = 0;
  float epsilon_ = 1e-5f;
};

// ------------------------------------------------------------ AffineGrid

class AffineGridKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    align_ = init.attr_int("align_corners", 0) != 0;
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0) || !ctx.has_input(1)) return invalid_argument("needs theta and size");
    const Tensor& theta = ctx.input(0);
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> size, to_int64_vector(ctx.input(1)));
    const size_t nd = size.size() == 4 ? 2 : size.size() == 5 ? 3 : 0;
    if (nd == 0 || theta.rank() != 3 || theta.dim(0) != size[0] || theta.dim(1) != static_cast<int64_t>(nd) ||
        theta.dim(2) != static_cast<int64_t>(nd + 1))
      return invalid_argument("theta ", theta.shape().to_string(), " does not fit size of ",
                              size.size(), " values");
    Shape out_shape{size[0]};
    for (size_t d = 2; d < size.size(); ++d) out_shape.push_back(size[d]);
    out_shape.push_back(static_cast<int64_t>(nd));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, theta.dtype(), out_shape));
    const std::vector<float> t = to_float_vector(theta);
    std::vector<float> out(static_cast<size_t>(y->numel()));
    // Spatial dims in order (D,) H, W; coordinates in order x (W), y (H), (z (D)).
    std::vector<int64_t> dims(size.begin() + 2, size.end());
    int64_t points = 1;
    for (int64_t d : dims) points *= d;
    std::vector<int64_t> idx(nd);
    size_t o = 0;
    for (int64_t b = 0; b < size[0]; ++b) {
      const float* th = t.data() + b * static_cast<int64_t>(nd * (nd + 1));
      for (int64_t p = 0; p < points; ++p) {
        int64_t rem = p;
        for (size_t d = nd; d-- > 0;) {
          idx[d] = rem % dims[d];
          rem /= dims[d];
        }
        float base[4];
        for (size_t c = 0; c < nd; ++c) {  // coordinate c runs along dims[nd - 1 - c]
          const size_t d = nd - 1 - c;
          base[c] = coord(idx[d], dims[d]);
        }
        base[nd] = 1.f;
        for (size_t r = 0; r < nd; ++r) {
          float s = 0;
          for (size_t c = 0; c <= nd; ++c) s += th[r * (nd + 1) + c] * base[c];
          out[o++] = s;
        }
      }
    }
    from_float_vector(out.data(), y);
    return Status::ok();
  }

 private:
  float coord(int64_t i, int64_t n) const {
    if (align_) return n > 1 ? -1.f + 2.f * static_cast<float>(i) / static_cast<float>(n - 1) : 0.f;
    return (2.f * static_cast<float>(i) + 1.f) / static_cast<float>(n) - 1.f;
  }

  bool align_ = false;
};

}  // namespace

void register_opset18_spatial_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "CenterCropPad", .since_version = 18, .until_version = 1000,
         .dtypes = kAllDTypes & ~dtype_bit(DType::kString), .type_input = 0, .factory = make_kernel<CenterCropPadKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Col2Im", .since_version = 18, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<Col2ImKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "GroupNormalization", .since_version = 18, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<GroupNormKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "AffineGrid", .since_version = 20, .until_version = 1000,
         .dtypes = kFloatDTypes, .type_input = 0, .factory = make_kernel<AffineGridKernel>, .flags = 0});
}

}  // namespace kiln::kernels
