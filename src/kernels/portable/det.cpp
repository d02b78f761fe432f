// Det (opset 11): determinants of the trailing square matrices of a
// [..., M, M] tensor, by LU decomposition with partial pivoting in double.
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/portable/util/cv_common.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

namespace {

// Determinant of the m x m row-major matrix `a` (destroyed).
double lu_determinant(double* a, int64_t m) {
  double det = 1.0;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r)
      if (std::abs(a[r * m + col]) > std::abs(a[pivot * m + col])) pivot = r;
    if (a[pivot * m + col] == 0.0) return 0.0;
    if (pivot != col) {
      for (int64_t j = 0; j < m; ++j) std::swap(a[col * m + j], a[pivot * m + j]);
      det = -det;
    }
    const double d = a[col * m + col];
    det *= d;
    for (int64_t r = col + 1; r < m; ++r) {
      const double f = a[r * m + col] / d;
      if (f == 0.0) continue;
      for (int64_t j = col + 1; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
    }
  }
  return det;
}

class DetKernel final : public Kernel {
 public:
  Status compute(KernelContext& ctx) const override {
    if (!ctx.has_input(0)) return invalid_argument("input 0 (X) is missing");
    const Tensor& x = ctx.input(0);
    if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2)) {
      return invalid_argument("input 0 (X) has shape ", x.shape().to_string(),
                              ", expected [..., M, M]");
    }
    if (!dtype_is_float(x.dtype()))
      return invalid_argument("input 0 (X) has dtype ", dtype_name(x.dtype()), ", expected a float type");
    const int64_t m = x.dim(x.rank() - 1);
    Shape out_shape;
    for (size_t i = 0; i + 2 < x.rank(); ++i) out_shape.push_back(x.dim(i));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_shape));
    KILN_ASSIGN_OR_RETURN(std::vector<double> xv, to_double_vector(x));
    const int64_t count = out_shape.numel();
    std::vector<float> out(static_cast<size_t>(count));
    std::vector<double> out_d(static_cast<size_t>(count));
    parallel_for(ctx.pool(), count, 1, [&](int64_t b, int64_t e) {
      std::vector<double> a(static_cast<size_t>(m * m));
      for (int64_t t = b; t < e; ++t) {
        std::copy_n(xv.begin() + t * m * m, m * m, a.begin());
        out_d[static_cast<size_t>(t)] = lu_determinant(a.data(), m);
      }
    });
    if (x.dtype() == DType::kFloat64) {
      std::copy(out_d.begin(), out_d.end(), y->data<double>());
    } else {
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(out_d[i]);
      from_float_vector(out.data(), y);
    }
    return Status::ok();
  }
};

}  // namespace

void register_det_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "Det", .since_version = 11, .until_version = 1000, .dtypes = kFloatDTypes,
         .type_input = 0, .factory = make_kernel<DetKernel>, .flags = 0});
}

}  // namespace kiln::kernels
