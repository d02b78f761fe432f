// ConvTranspose (opset 1 and 11): the gradient of Conv with respect to its
// input. For each image and group, a GEMM makes the column matrix
//   col[(m, kernel offset), input position] = W_g^T x X_g
// and col2im scatters every column into the output window it came from
// (Y[m, i * stride - pad + k * dilation] += col). The input positions are
// processed in chunks so the column scratch stays a few MiB. Constant weights
// are packed (as W_g^T) once at load. float16/bfloat16/double are staged
// through float32.
//
// Output size (ONNX): stride * (in - 1) + output_padding + (kernel - 1) *
// dilation + 1 - pad_begin - pad_end; with output_shape (or auto_pad SAME,
// which asks for in * stride) the pads are derived from it, the odd unit going
// to the end for SAME_UPPER and to the beginning otherwise.
#include <algorithm>
#include <cstring>

#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm.h"
#include "kernels/registry.h"

namespace kiln::kernels {

namespace {

struct DeconvProblem {
  int64_t n = 0, c = 0, m = 0, group = 1;
  // geometry in Conv terms seen from the output: `in` is the ConvTranspose
  // input, `out` its output.
  std::vector<int64_t> in, out, kernel, stride, dilation, pad_begin;
  int64_t in_size() const {
    int64_t s = 1;
    for (int64_t d : in) s *= d;
    return s;
  }
  int64_t out_size() const {
    int64_t s = 1;
    for (int64_t d : out) s *= d;
    return s;
  }
  int64_t kernel_size() const {
    int64_t s = 1;
    for (int64_t d : kernel) s *= d;
    return s;
  }
  int64_t cg() const { return c / group; }
  int64_t mg() const { return m / group; }
};

// Adds col rows [r0, r1) (row r = (channel r / ksize, kernel offset r %
// ksize)), columns = input positions [j0, j0 + nc), into y (channel planes of
// out_size). `col` has leading dimension `ldc`.
void col2im(const DeconvProblem& p, const float* col, int64_t ldc, int64_t r0, int64_t r1, int64_t j0, int64_t nc,
            float* y) {
  const size_t r = p.in.size(), last = r - 1;
  const int64_t ksize = p.kernel_size(), out_size = p.out_size();
  const int64_t in_last = p.in[last], out_last = p.out[last], s_last = p.stride[last];
  int64_t kd[8], id[8];
  for (int64_t row = r0; row < r1; ++row) {
    float* ym = y + (row / ksize) * out_size;
    const float* crow = col + (row - r0) * ldc;
    for (int64_t rem = row % ksize, d = static_cast<int64_t>(r); d-- > 0;) {
      kd[d] = rem % p.kernel[static_cast<size_t>(d)];
      rem /= p.kernel[static_cast<size_t>(d)];
    }
    for (int64_t rem = j0, d = static_cast<int64_t>(r); d-- > 0;) {
      id[d] = rem % p.in[static_cast<size_t>(d)];
      rem /= p.in[static_cast<size_t>(d)];
    }
    int64_t jj = 0;
    for (int64_t remaining = nc; remaining > 0;) {
      const int64_t run = std::min(in_last - id[last], remaining);
      bool inside = true;
      int64_t base = 0;
      for (size_t d = 0; d < last; ++d) {
        const int64_t o = id[d] * p.stride[d] - p.pad_begin[d] + kd[d] * p.dilation[d];
        if (o < 0 || o >= p.out[d]) inside = false;
        base = base * p.out[d] + o;
      }
      if (inside) {
        const int64_t first = id[last] * s_last - p.pad_begin[last] + kd[last] * p.dilation[last];
        int64_t lo = first < 0 ? (-first + s_last - 1) / s_last : 0;
        int64_t hi = first < out_last ? (out_last - 1 - first) / s_last + 1 : 0;
        lo = std::min(lo, run);
        hi = std::max(lo, std::min(hi, run));
        float* yrow = ym + base * out_last + first;
        const float* src = crow + jj;
        for (int64_t t = lo; t < hi; ++t) yrow[t * s_last] += src[t];
      }
      jj += run;
      remaining -= run;
      id[last] = 0;
      for (size_t d = last; d-- > 0;) {
        if (++id[d] < p.in[d]) break;
        id[d] = 0;
      }
    }
  }
}

void conv_transpose_f32(const DeconvProblem& p, const float* x, const float* w, const std::vector<PackedMatrix>* packed,
                        const float* bias, float* y, ThreadPool* pool) {
  const int64_t cg = p.cg(), mg = p.mg(), ksize = p.kernel_size();
  const int64_t in_size = p.in_size(), out_size = p.out_size();
  const int64_t rows = mg * ksize;  // col rows per group
  for (int64_t img = 0; img < p.n; ++img) {
    float* yimg = y + img * p.m * out_size;
    for (int64_t oc = 0; oc < p.m; ++oc) std::fill_n(yimg + oc * out_size, out_size, bias ? bias[oc] : 0.f);
  }
  // Columns per chunk: keep the scratch near 4 MiB.
  const int64_t chunk = std::max<int64_t>(1, std::min(in_size, (int64_t{1} << 20) / std::max<int64_t>(1, rows)));
  std::vector<float> col(static_cast<size_t>(rows * chunk));
  for (int64_t img = 0; img < p.n; ++img) {
    for (int64_t grp = 0; grp < p.group; ++grp) {
      const float* xg = x + (img * p.c + grp * cg) * in_size;
      float* yg = y + (img * p.m + grp * mg) * out_size;
      // W_g is [cg, mg * ksize]; A = W_g^T.
      const GemmOperand a = packed ? GemmOperand::prepacked((*packed)[static_cast<size_t>(grp)])
                                   : GemmOperand::raw(w + grp * cg * rows, rows, /*trans=*/true);
      for (int64_t j0 = 0; j0 < in_size; j0 += chunk) {
        const int64_t nc = std::min(chunk, in_size - j0);
        sgemm_ex(rows, nc, cg, 1.f, a, GemmOperand::raw(xg + j0, in_size), 0.f, col.data(), nc, pool);
        // Rows of one output channel write only that channel: split by channel.
        parallel_for(pool, mg, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ksize * nc)),
                     [&](int64_t m0, int64_t m1) {
                       col2im(p, col.data() + m0 * ksize * nc, nc, m0 * ksize, m1 * ksize, j0, nc, yg);
                     });
      }
    }
  }
}

class ConvTransposeKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    KILN_ASSIGN_OR_RETURN(attrs_, WindowAttrs::parse(init));
    group_ = init.attr_int("group", 1);
    if (group_ < 1) return invalid_argument("attribute group is ", group_, ", expected >= 1");
    output_padding_ = init.attr_ints("output_padding");
    output_shape_ = init.attr_ints("output_shape");
    const Tensor* w = init.constant_input(1);
    if (w && w->dtype() == DType::kFloat32 && w->rank() >= 3 && w->dim(0) % group_ == 0 && w->numel() > 0) {
      const int64_t cg = w->dim(0) / group_, rows = w->numel() / w->dim(0);
      for (int64_t grp = 0; grp < group_; ++grp)
        packed_.push_back(PackedMatrix::pack_a(true, rows, cg, w->data<float>() + grp * cg * rows, rows));
      packed_shape_ = w->shape();
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_conv_inputs(ctx));
    const Tensor& x = ctx.input(0);
    const Tensor& w = ctx.input(1);
    const Tensor* b = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    DeconvProblem p;
    p.n = x.dim(0);
    p.c = x.dim(1);
    p.group = group_;
    if (w.dim(0) != p.c) {
      return invalid_argument("input 1 (W) has shape ", w.shape().to_string(),
                              ", expected W[0] == C of input 0 (X) ", x.shape().to_string());
    }
    if (p.c % group_ != 0) {
      return invalid_argument("input 0 (X) has ", p.c, " channels, not a multiple of group ", group_);
    }
    p.m = w.dim(1) * group_;
    if (b && (b->rank() != 1 || b->dim(0) != p.m)) {
      return invalid_argument("input 2 (B) has shape ", b->shape().to_string(), ", expected [", p.m, "]");
    }
    KILN_RETURN_IF_ERROR(resolve(x, w, &p));
    Shape y_shape{p.n, p.m};
    for (int64_t d : p.out) y_shape.push_back(d);
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), y_shape));
    if (y->numel() == 0) return Status::ok();
    switch (x.dtype()) {
      case DType::kFloat32: {
        const bool use_packed = !packed_.empty() && w.shape() == packed_shape_;
        conv_transpose_f32(p, x.data<float>(), w.data<float>(), use_packed ? &packed_ : nullptr,
                           b ? b->data<float>() : nullptr, y->data<float>(), ctx.pool());
        return Status::ok();
      }
      case DType::kFloat16:
      case DType::kBFloat16:
      case DType::kFloat64: {
        const std::vector<float> xf = to_float_vector(x), wf = to_float_vector(w);
        const std::vector<float> bf = b ? to_float_vector(*b) : std::vector<float>();
        std::vector<float> yf(static_cast<size_t>(y->numel()));
        conv_transpose_f32(p, xf.data(), wf.data(), nullptr, b ? bf.data() : nullptr, yf.data(), ctx.pool());
        from_float_vector(yf.data(), y);
        return Status::ok();
      }
      default:
        return unsupported_dtype(0, x.dtype());
    }
  }

 private:
  // Fills the spatial geometry and output size of `p`.
  Status resolve(const Tensor& x, const Tensor& w, DeconvProblem* p) const {
    const size_t r = x.rank() - 2;
    auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* name) -> Status {
      if (!v.empty() && v.size() != want) {
        return invalid_argument("attribute ", name, " has ", v.size(), " values, expected ", want,
                                " for ", r, " spatial dims");
      }
      return Status::ok();
    };
    KILN_RETURN_IF_ERROR(check_len(attrs_.strides, r, "strides"));
    KILN_RETURN_IF_ERROR(check_len(attrs_.dilations, r, "dilations"));
    KILN_RETURN_IF_ERROR(check_len(attrs_.pads, 2 * r, "pads"));
    KILN_RETURN_IF_ERROR(check_len(output_padding_, r, "output_padding"));
    if (!output_shape_.empty() && output_shape_.size() != r && output_shape_.size() != r + 2) {
      return invalid_argument("attribute output_shape has ", output_shape_.size(),
                              " values, expected ", r, " (or ", r + 2, ")");
    }
    const std::span<const int64_t> kernel = w.shape().dims().subspan(2);
    if (!attrs_.kernel_shape.empty() &&
        !std::equal(kernel.begin(), kernel.end(), attrs_.kernel_shape.begin(), attrs_.kernel_shape.end())) {
      return invalid_argument("attribute kernel_shape ", Shape(attrs_.kernel_shape).to_string(),
                              " does not match input 1 (W) ", w.shape().to_string());
    }
    p->in.assign(x.shape().begin() + 2, x.shape().end());
    p->kernel.assign(kernel.begin(), kernel.end());
    p->stride = attrs_.strides.empty() ? std::vector<int64_t>(r, 1) : attrs_.strides;
    p->dilation = attrs_.dilations.empty() ? std::vector<int64_t>(r, 1) : attrs_.dilations;
    p->pad_begin.assign(r, 0);
    p->out.assign(r, 0);
    const bool same = attrs_.auto_pad == "SAME_UPPER" || attrs_.auto_pad == "SAME_LOWER";
    for (size_t d = 0; d < r; ++d) {
      const int64_t op = output_padding_.empty() ? 0 : output_padding_[d];
      if (op < 0) return invalid_argument("attribute output_padding has ", op, ", expected >= 0");
      const int64_t full = p->stride[d] * (p->in[d] - 1) + op + (p->kernel[d] - 1) * p->dilation[d] + 1;
      if (!output_shape_.empty() || same) {
        const int64_t target =
            !output_shape_.empty() ? output_shape_[output_shape_.size() - r + d] : p->in[d] * p->stride[d];
        if (target < 0) {
          return invalid_argument("attribute output_shape has ", target, " in spatial dim ", d);
        }
        // SAME_UPPER puts the odd unit of padding at the end. A negative
        // total (output_shape larger than the input covers) pads the end
        // with zeros: floor division, as the ONNX reference computes it.
        const int64_t total = full - target;
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        p->pad_begin[d] = attrs_.auto_pad == "SAME_UPPER" ? half : total - half;
        p->out[d] = target;
      } else {
        int64_t pb = 0, pe = 0;
        if (attrs_.auto_pad == "NOTSET" && !attrs_.pads.empty()) {
          pb = attrs_.pads[d];
          pe = attrs_.pads[d + r];
        }
        p->pad_begin[d] = pb;
        p->out[d] = full - pb - pe;
        if (p->out[d] < 0) {
          return invalid_argument("pads ", Shape(attrs_.pads).to_string(),
                                  " remove more than the whole output of spatial dim ", d);
        }
      }
    }
    return Status::ok();
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  std::vector<int64_t> output_padding_, output_shape_;
  std::vector<PackedMatrix> packed_;  // W_g^T per group, when W is a constant
  Shape packed_shape_;
};

}  // namespace

void register_conv_transpose_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "ConvTranspose", .since_version = 1, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<ConvTransposeKernel>, .flags = 0});
}

}  // namespace kiln::kernels
