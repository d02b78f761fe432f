// kiln::PreActivationConv's input transform (conv_preact.h).
#include "kernels/portable/conv_preact.h"

#include <algorithm>
#include <cmath>

#include "kernels/portable/util/cv_common.h"

namespace kiln::kernels {

namespace {

KILN_ISA_BODY void affine_relu_body(const float* x, int64_t n, float a, float b, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::max(0.f, a * x[i] + b);
}
KILN_ISA_DISPATCH(affine_relu, affine_relu_body);

KILN_ISA_BODY void pack_preact_body(const float* x, int64_t plane, const float* a, const float* b, int64_t p0,
                                      int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) {
  for (int64_t pp = 0; pp < kc; ++pp) {
    const float* src = x + (p0 + pp) * plane + j0;
    const float av = a[p0 + pp], bv = b[p0 + pp];
    for (int64_t jr = 0; jr < nc; jr += nr) {
      float* dst = out + jr * kc + pp * nr;
      const int64_t cols = std::min(nr, nc - jr);
      for (int64_t j = 0; j < cols; ++j) dst[j] = std::max(0.f, av * src[jr + j] + bv);
      for (int64_t j = cols; j < nr; ++j) dst[j] = 0.f;
    }
  }
}
KILN_ISA_DISPATCH(pack_preact, pack_preact_body);

}  // namespace

Status preact_params(const KernelInit& init, int64_t channels, std::vector<float>* a, std::vector<float>* b) {
  const char* names[] = {"scale", "bias", "mean", "var"};
  const Tensor* t[4];
  for (size_t i = 0; i < 4; ++i) {
    t[i] = init.constant_input(3 + i);
    if (!t[i] || t[i]->dtype() != DType::kFloat32 || t[i]->numel() != channels)
      return invalid_argument("input ", 3 + i, " (", names[i], ") must be a float32 constant of ", channels,
                              " values (one per input channel)");
  }
  const double eps = init.attr_float("epsilon", 1e-5f);
  a->resize(static_cast<size_t>(channels));
  b->resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    // As the BatchNormalization kernel computes them (in double, rounded once).
    const double inv = 1.0 / std::sqrt(static_cast<double>(t[3]->data<float>()[c]) + eps);
    const double s = t[0]->data<float>()[c];
    (*a)[static_cast<size_t>(c)] = static_cast<float>(s * inv);
    (*b)[static_cast<size_t>(c)] =
        static_cast<float>(t[1]->data<float>()[c] - static_cast<double>(t[2]->data<float>()[c]) * s * inv);
  }
  return Status::ok();
}

void preact_relu(const float* x, int64_t images, int64_t channels, int64_t plane, const float* a, const float* b,
                 float* out, ThreadPool* pool) {
  parallel_for(pool, images * channels, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane)),
               [&](int64_t p0, int64_t p1) {
                 for (int64_t p = p0; p < p1; ++p) {
                   const int64_t c = p % channels;
                   affine_relu(x + p * plane, plane, a[c], b[c], out + p * plane);
                 }
               });
}

void PreActSource::pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const {
  pack_preact(x_, plane_, a_, b_, p0, kc, j0, nc, nr, out);
}

}  // namespace kiln::kernels
