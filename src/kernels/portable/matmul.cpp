// MatMul (numpy semantics: 1-D operands, broadcast batch dims) and Gemm
// (transA/transB, alpha, beta, C broadcast to [M, N]), every opset, and the
// optimizer's kiln MatMulBias (MatMul + [N] bias + optional Gelu) and
// TransposedMatMul (Transposes around a MatMul as strided operands). float32
// runs on the SGEMM engine (gemm.h), float16/bfloat16 are staged through
// float32, double and the integer types use gemm_generic. A constant B
// (weights), or MatMul's constant 2-D A, is packed once when the kernel is
// made.
#include "kernels/portable/util/matmul.h"

#include <algorithm>
#include <limits>

#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm_prepack.h"
#include "kernels/portable/util/small_matmul.h"
#include "kernels/registry.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln::kernels {

Result<MatMulPlan> plan_matmul(const Shape& a_in, const Shape& b_in) {
  if (a_in.rank() == 0 || b_in.rank() == 0) {
    return invalid_argument("inputs must have rank >= 1, got ", a_in.to_string(), " and ",
                            b_in.to_string());
  }
  Shape a = a_in, b = b_in;
  const bool a_vec = a.rank() == 1, b_vec = b.rank() == 1;
  if (a_vec) a = Shape{1, a_in[0]};
  if (b_vec) b = Shape{b_in[0], 1};
  MatMulPlan p;
  p.m = a[a.rank() - 2];
  p.k = a[a.rank() - 1];
  p.n = b[b.rank() - 1];
  if (b[b.rank() - 2] != p.k) {
    return invalid_argument("input 0 (A) ", a_in.to_string(), " and input 1 (B) ", b_in.to_string(),
                            " do not match: A has K = ", p.k, ", B has K = ", b[b.rank() - 2]);
  }
  Shape a_batch, b_batch;
  for (size_t i = 0; i + 2 < a.rank(); ++i) a_batch.push_back(a[i]);
  for (size_t i = 0; i + 2 < b.rank(); ++i) b_batch.push_back(b[i]);
  auto batch = broadcast_shapes(a_batch, b_batch);
  if (!batch.ok()) {
    return invalid_argument("the batch dims of input 0 (A) ", a_in.to_string(), " and input 1 (B) ",
                            b_in.to_string(), " do not broadcast");
  }
  const Shape& out_batch = *batch;
  p.batches = out_batch.numel();
  p.out_shape = out_batch;
  if (!a_vec) p.out_shape.push_back(p.m);
  if (!b_vec) p.out_shape.push_back(p.n);

  const std::vector<int64_t> sa = broadcast_strides(a_batch, out_batch);
  const std::vector<int64_t> sb = broadcast_strides(b_batch, out_batch);
  p.a_offset.resize(static_cast<size_t>(p.batches));
  p.b_offset.resize(static_cast<size_t>(p.batches));
  std::vector<int64_t> idx(out_batch.rank(), 0);
  for (int64_t t = 0; t < p.batches; ++t) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    p.a_offset[static_cast<size_t>(t)] = oa * p.m * p.k;
    p.b_offset[static_cast<size_t>(t)] = ob * p.k * p.n;
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < out_batch[d]) break;
      idx[d] = 0;
    }
  }
  p.fold_a_batches = b_batch.numel() == 1 && a_batch.numel() == p.batches;
  return p;
}

void matmul_f32(const MatMulPlan& plan, const float* a, const float* b, const PackedMatrix* packed_b, float* out,
                ThreadPool* pool, const GemmEpilogue& epilogue, const PackedMatrix* packed_a) {
  const int64_t m = plan.m, n = plan.n, k = plan.k;
  if (plan.batches == 0 || m == 0 || n == 0) return;
  const GemmOperand bop = packed_b ? GemmOperand::prepacked(*packed_b) : GemmOperand::raw(b, n);
  if (plan.fold_a_batches && !packed_a) {
    // One tall GEMM: the weights of a Linear layer applied to every token.
    sgemm_ex(plan.batches * m, n, k, 1.f, GemmOperand::raw(a, k), bop, 0.f, out, n, pool, epilogue);
    return;
  }
  const double flops = 2.0 * static_cast<double>(m * n) * static_cast<double>(k);
  auto one = [&](int64_t t, ThreadPool* p) {
    const size_t ti = static_cast<size_t>(t);
    const GemmOperand bt = packed_b ? bop : GemmOperand::raw(b + plan.b_offset[ti], n);
    const GemmOperand at = packed_a ? GemmOperand::prepacked(*packed_a) : GemmOperand::raw(a + plan.a_offset[ti], k);
    sgemm_ex(m, n, k, 1.f, at, bt, 0.f, out + t * m * n, n, p, epilogue);
  };
  if (flops >= 4e6 || plan.batches == 1) {
    for (int64_t t = 0; t < plan.batches; ++t) one(t, pool);
  } else {
    // Many small products (attention heads): one per task, without the
    // engine's packing where nothing is packed and nothing follows.
    const bool plain = small_matmul_pays() && !packed_a && !packed_b && !epilogue.row_bias && !epilogue.col_bias && !epilogue.apply &&
                       epilogue.clamp_min == -std::numeric_limits<float>::infinity() &&
                       epilogue.clamp_max == std::numeric_limits<float>::infinity();
    parallel_for(pool, plan.batches, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const size_t ti = static_cast<size_t>(t);
        if (plain && k <= kSmallMatMulMaxK)
          small_matmul_f32(m, n, k, 1.f, {a + plan.a_offset[ti], k, 1}, {b + plan.b_offset[ti], n, 1}, out + t * m * n, n);
        else
          one(t, nullptr);
      }
    });
  }
}

namespace {

constexpr DTypeSet kMatMulTypes =
    dtype_set(DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt32, DType::kInt64,
              DType::kUInt32, DType::kUInt64);

// Input i (named `name`) has the dtype of input 0 (A).
Status check_dtype_like_a(const KernelContext& ctx, size_t i, const char* name) {
  if (ctx.input(i).dtype() != ctx.input(0).dtype()) {
    return invalid_argument(input_label(i, name), " has dtype ", dtype_name(ctx.input(i).dtype()), ", expected ",
                            dtype_name(ctx.input(0).dtype()), " like input 0 (A)");
  }
  return Status::ok();
}

// ---------------------------------------------------------------- MatMul

class MatMulKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const Tensor* b = init.constant_input(1);
    if (b && b->dtype() == DType::kFloat32 && b->rank() == 2 && b->numel() > 0)
      packed_b_ = pack_b_for(init, "B", false, b->dim(0), b->dim(1), b->data<float>(), b->dim(1));
    // A constant 2-D A (W x for every batch of x) is packed once too.
    const Tensor* a = init.constant_input(0);
    if (a && a->dtype() == DType::kFloat32 && a->rank() == 2 && a->numel() > 0)
      packed_a_ = pack_a_for(init, "A", false, a->dim(0), a->dim(1), a->data<float>(), a->dim(1));
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    KILN_RETURN_IF_ERROR(check_dtype_like_a(ctx, 1, "B"));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    KILN_ASSIGN_OR_RETURN(MatMulPlan plan, plan_matmul(a.shape(), b.shape()));
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), plan.out_shape));
    if (y->numel() == 0) return Status::ok();
    if (plan.k == 0) {  // sum over nothing
      std::fill_n(static_cast<unsigned char*>(y->raw_data()), y->nbytes(), 0);
      return Status::ok();
    }
    switch (a.dtype()) {
      case DType::kFloat32: {
        const bool use_packed = !packed_b_.empty() && b.rank() == 2 && packed_b_.rows() == b.dim(0) &&
                                packed_b_.cols() == b.dim(1);
        const bool use_packed_a = !packed_a_.empty() && a.rank() == 2 && packed_a_.rows() == a.dim(0) &&
                                  packed_a_.cols() == a.dim(1);
        matmul_f32(plan, a.data<float>(), b.data<float>(), use_packed ? &packed_b_ : nullptr, y->data<float>(),
                   ctx.pool(), {}, use_packed_a ? &packed_a_ : nullptr);
        return Status::ok();
      }
      case DType::kFloat16:
      case DType::kBFloat16: {
        std::vector<float> af = to_float_vector(a), bf = to_float_vector(b), yf(static_cast<size_t>(y->numel()));
        matmul_f32(plan, af.data(), bf.data(), nullptr, yf.data(), ctx.pool());
        from_float_vector(yf.data(), y);
        return Status::ok();
      }
      default: break;
    }
    Status st;
    visit_dtype(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        const T* ad = a.data<T>();
        const T* bd = b.data<T>();
        T* yd = y->data<T>();
        parallel_for(ctx.pool(), plan.batches, 1, [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t) {
            const size_t ti = static_cast<size_t>(t);
            gemm_generic<T>(false, false, plan.m, plan.n, plan.k, ad + plan.a_offset[ti], plan.k,
                            bd + plan.b_offset[ti], plan.n, yd + t * plan.m * plan.n, plan.n, false);
          }
        });
      } else {
        st = unsupported_dtype(0, a.dtype());
      }
    });
    return st;
  }

 private:
  PackedMatrix packed_a_, packed_b_;
};

// ---------------------------------------------------------------- Gemm

class GemmKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    trans_a_ = init.attr_int("transA", 0) != 0;
    trans_b_ = init.attr_int("transB", 0) != 0;
    alpha_ = init.attr_float("alpha", 1.f);
    beta_ = init.attr_float("beta", 1.f);
    c_required_ = init.opset < 11;
    const Tensor* b = init.constant_input(1);
    if (b && b->dtype() == DType::kFloat32 && b->rank() == 2 && b->numel() > 0) {
      const int64_t k = trans_b_ ? b->dim(1) : b->dim(0), n = trans_b_ ? b->dim(0) : b->dim(1);
      packed_b_ = pack_b_for(init, "B", trans_b_, k, n, b->data<float>(), b->dim(1));
    }
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 3));
    KILN_RETURN_IF_ERROR(check_dtype_like_a(ctx, 1, "B"));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.rank() != 2) return invalid_argument("input 0 (A) has shape ", a.shape().to_string(), ", expected rank 2");
    if (b.rank() != 2) return invalid_argument("input 1 (B) has shape ", b.shape().to_string(), ", expected rank 2");
    const int64_t m = trans_a_ ? a.dim(1) : a.dim(0), k = trans_a_ ? a.dim(0) : a.dim(1);
    const int64_t kb = trans_b_ ? b.dim(1) : b.dim(0), n = trans_b_ ? b.dim(0) : b.dim(1);
    if (k != kb) {
      return invalid_argument("input 0 (A) ", a.shape().to_string(), (trans_a_ ? " (transposed)" : ""),
                              " and input 1 (B) ", b.shape().to_string(), (trans_b_ ? " (transposed)" : ""),
                              " do not match: K = ", k, " vs ", kb);
    }
    const bool has_c = ctx.has_input(2);
    if (!has_c && c_required_) return invalid_argument("input 2 (C) is required before opset 11");
    const Shape out_shape{m, n};
    const Tensor* c = has_c ? &ctx.input(2) : nullptr;
    if (c) {
      KILN_RETURN_IF_ERROR(check_dtype_like_a(ctx, 2, "C"));
      auto bs = broadcast_shapes(c->shape(), out_shape);
      if (c->rank() > 2 || !bs.ok() || *bs != out_shape) {
        return invalid_argument("input 2 (C) has shape ", c->shape().to_string(),
                                ", expected one that broadcasts to ", out_shape.to_string());
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), out_shape));
    if (y->numel() == 0) return Status::ok();
    switch (a.dtype()) {
      case DType::kFloat32:
        return gemm_f32(ctx, a.data<float>(), b.data<float>(), c, c ? c->data<float>() : nullptr, m, n, k,
                        y->data<float>(), /*b_may_be_packed=*/true);
      case DType::kFloat16:
      case DType::kBFloat16: {
        std::vector<float> af = to_float_vector(a), bf = to_float_vector(b), cf;
        if (c) cf = to_float_vector(*c);
        std::vector<float> yf(static_cast<size_t>(y->numel()));
        KILN_RETURN_IF_ERROR(gemm_f32(ctx, af.data(), bf.data(), c, c ? cf.data() : nullptr, m, n, k, yf.data(),
                                      /*b_may_be_packed=*/false));
        from_float_vector(yf.data(), y);
        return Status::ok();
      }
      default: break;
    }
    Status st;
    visit_dtype(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        T* yd = y->data<T>();
        gemm_generic<T>(trans_a_, trans_b_, m, n, k, a.data<T>(), a.dim(1), b.data<T>(), b.dim(1), yd, n, false);
        const bool unit = alpha_ == 1.f && beta_ == 1.f;
        std::vector<int64_t> cs = c ? broadcast_strides(c->shape(), out_shape) : std::vector<int64_t>{0, 0};
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            T& v = yd[i * n + j];
            const T cv = c ? c->data<T>()[i * cs[0] + j * cs[1]] : T(0);
            if (unit) {
              v = static_cast<T>(v + cv);
            } else {
              v = static_cast<T>(static_cast<double>(alpha_) * static_cast<double>(v) +
                                 static_cast<double>(beta_) * static_cast<double>(cv));
            }
          }
        }
      } else {
        st = unsupported_dtype(0, a.dtype());
      }
    });
    return st;
  }

 private:
  // Y = alpha * op(A) op(B) + beta * C with C folded into the GEMM: a row
  // vector C becomes the column bias, a column vector the row bias, a full
  // matrix is copied into Y and scaled by beta in the GEMM.
  Status gemm_f32(KernelContext& ctx, const float* a, const float* b, const Tensor* c, const float* cd, int64_t m,
                  int64_t n, int64_t k, float* y, bool b_may_be_packed) const {
    const Tensor& bt = ctx.input(1);
    const int64_t lda = ctx.input(0).dim(1), ldb = bt.dim(1);
    GemmOperand bop = GemmOperand::raw(b, ldb, trans_b_);
    if (b_may_be_packed && !packed_b_.empty() && packed_b_.rows() == k && packed_b_.cols() == n)
      bop = GemmOperand::prepacked(packed_b_);
    GemmEpilogue ep;
    std::vector<float> bias;
    float beta = 0.f;
    if (c && beta_ != 0.f) {
      const Shape out_shape{m, n};
      const std::vector<int64_t> cs = broadcast_strides(c->shape(), out_shape);
      if (cs[0] == 0) {  // one row, broadcast down
        bias.resize(static_cast<size_t>(n));
        for (int64_t j = 0; j < n; ++j) bias[static_cast<size_t>(j)] = beta_ * cd[j * cs[1]];
        ep.col_bias = bias.data();
      } else if (cs[1] == 0) {  // one column, broadcast across
        bias.resize(static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i) bias[static_cast<size_t>(i)] = beta_ * cd[i * cs[0]];
        ep.row_bias = bias.data();
      } else {
        std::copy_n(cd, m * n, y);
        beta = beta_;
      }
    }
    sgemm_ex(m, n, k, alpha_, GemmOperand::raw(a, lda, trans_a_), bop, beta, y, n, ctx.pool(), ep);
    return Status::ok();
  }

  bool trans_a_ = false, trans_b_ = false, c_required_ = false;
  float alpha_ = 1.f, beta_ = 1.f;
  PackedMatrix packed_b_;
};

// ---------------------------------------------------------------- MatMulBias

// kiln MatMulBias (optimizer/sequence_fusions.h): MatMul(A, B) + bias, then
// an optional Gelu, in the GEMM's epilogue: the bias goes in with the last
// K block and the activation runs on each block of the product while it is
// in cache, where the unfused graph makes two or three more passes over it.
class MatMulBiasKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    const std::string act = init.attr_string("activation", "");
    if (act == "Gelu") apply_ = &gelu_rows<false>;
    else if (act == "GeluTanh") apply_ = &gelu_rows<true>;
    else if (!act.empty()) return invalid_argument("activation is '", act, "'; expected '', 'Gelu' or 'GeluTanh'");
    const Tensor* b = init.constant_input(1);
    if (b && b->dtype() == DType::kFloat32 && b->rank() == 2 && b->numel() > 0)
      packed_b_ = pack_b_for(init, "B", false, b->dim(0), b->dim(1), b->data<float>(), b->dim(1));
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 3, 3));
    for (size_t i = 0; i < 3; ++i)
      if (ctx.input(i).dtype() != DType::kFloat32) return unsupported_dtype(i, ctx.input(i).dtype());
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const Tensor& bias = ctx.input(2);
    KILN_ASSIGN_OR_RETURN(MatMulPlan plan, plan_matmul(a.shape(), b.shape()));
    if (bias.rank() != 1 || bias.dim(0) != plan.n)
      return invalid_argument("input 2 (bias) has shape ", bias.shape().to_string(), ", expected [", plan.n, "]");
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, plan.out_shape));
    if (y->numel() == 0) return Status::ok();
    float* yd = y->data<float>();
    if (plan.k == 0) {  // the product is zero: bias (and the activation) only
      for (int64_t r = 0; r < y->numel() / plan.n; ++r) {
        std::copy_n(bias.data<float>(), plan.n, yd + r * plan.n);
        if (apply_) apply_(nullptr, yd + r * plan.n, plan.n, 1, plan.n);
      }
      return Status::ok();
    }
    GemmEpilogue ep;
    ep.col_bias = bias.data<float>();
    ep.apply = apply_;
    const bool use_packed = !packed_b_.empty() && b.rank() == 2 && packed_b_.rows() == b.dim(0) &&
                            packed_b_.cols() == b.dim(1);
    matmul_f32(plan, a.data<float>(), b.data<float>(), use_packed ? &packed_b_ : nullptr, yd, ctx.pool(), ep);
    return Status::ok();
  }

 private:
  template <bool kTanh>
  static void gelu_rows(const void*, float* c, int64_t ldc, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
      float* row = c + r * ldc;
      if constexpr (kTanh) simd::gelu_tanh_f32(row, row, cols);
      else simd::gelu_f32(row, row, cols);
    }
  }

  void (*apply_)(const void*, float*, int64_t, int64_t, int64_t) = nullptr;
  PackedMatrix packed_b_;
};

// ---------------------------------------------------------------- TransposedMatMul

// kiln TransposedMatMul (optimizer/sequence_fusions.h):
// alpha * Transpose(MatMul(Transpose(A, perm_a), Transpose(B, perm_b)),
// perm_y), each perm optional (alpha 1 by default), with no Transpose run: each batch's operands are strided
// views of A and B (one of a matrix's two strides is 1, so the GEMM reads it
// plain or transposed) and the product is written where the Transpose would
// put it. Attention's per-head products read Q, K and V in the layout their
// projections wrote them and write the context so.
struct StridedShape {
  Shape shape;
  std::vector<int64_t> strides;
};

// `s` contiguous, then permuted (perm empty: as is). `perm` is checked.
Result<StridedShape> permuted(const Shape& s, const std::vector<int64_t>& perm, const char* what) {
  std::vector<int64_t> st(s.rank());
  int64_t acc = 1;
  for (size_t i = s.rank(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  if (perm.empty()) return StridedShape{s, st};
  if (perm.size() != s.rank())
    return invalid_argument(what, " has shape ", s.to_string(), "; its perm has ", perm.size(), " axes");
  StridedShape v;
  std::vector<uint8_t> seen(s.rank(), 0);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(s.rank()) || seen[static_cast<size_t>(p)]++)
      return invalid_argument(what, ": perm axis ", p, " is out of range or repeated");
    v.shape.push_back(s[static_cast<size_t>(p)]);
    v.strides.push_back(st[static_cast<size_t>(p)]);
  }
  return v;
}

// A rows x cols matrix with element (r, c) at p[r * rs + c * cs] as a GEMM
// operand, when one stride is 1 (or its dim is); false otherwise.
bool strided_operand(const float* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, GemmOperand* out) {
  if (cols == 1 || cs == 1) {
    *out = GemmOperand::raw(p, rows == 1 ? std::max<int64_t>(cols, 1) : rs, false);
    return true;
  }
  if (rows == 1 || rs == 1) {
    *out = GemmOperand::raw(p, cs, true);
    return true;
  }
  return false;
}

class TransposedMatMulKernel final : public Kernel {
 public:
  Status init(const KernelInit& init) {
    perm_a_ = init.attr_ints("perm_a");
    perm_b_ = init.attr_ints("perm_b");
    perm_y_ = init.attr_ints("perm_y");
    alpha_ = init.attr_float("alpha", 1.f);
    return Status::ok();
  }

  Status compute(KernelContext& ctx) const override {
    KILN_RETURN_IF_ERROR(check_inputs(ctx, 2, 2));
    for (size_t i = 0; i < 2; ++i)
      if (ctx.input(i).dtype() != DType::kFloat32) return unsupported_dtype(i, ctx.input(i).dtype());
    KILN_ASSIGN_OR_RETURN(StridedShape a, permuted(ctx.input(0).shape(), perm_a_, "input 0 (A)"));
    KILN_ASSIGN_OR_RETURN(StridedShape b, permuted(ctx.input(1).shape(), perm_b_, "input 1 (B)"));
    KILN_ASSIGN_OR_RETURN(MatMulPlan plan, plan_matmul(a.shape, b.shape));
    // Strides of the product's axes [batch..., m, n] in A, B and Y (0 where
    // an axis is broadcast or absent).
    const size_t rank = plan.out_shape.rank(), nb = rank - (a.shape.rank() == 1 ? 0 : 1) - (b.shape.rank() == 1 ? 0 : 1);
    Shape y_shape = plan.out_shape;
    std::vector<int64_t> m_in_y(rank);
    if (!perm_y_.empty()) {
      KILN_ASSIGN_OR_RETURN(StridedShape ys, permuted(plan.out_shape, perm_y_, "the product"));
      y_shape = ys.shape;
      // Y's contiguous strides, moved back to the product's axes.
      std::vector<int64_t> yst(rank);
      int64_t acc = 1;
      for (size_t q = rank; q-- > 0;) {
        yst[q] = acc;
        acc *= y_shape[q];
      }
      for (size_t q = 0; q < rank; ++q) m_in_y[static_cast<size_t>(perm_y_[q])] = yst[q];
    } else {
      int64_t acc = 1;
      for (size_t q = rank; q-- > 0;) {
        m_in_y[q] = acc;
        acc *= plan.out_shape[q];
      }
    }
    KILN_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kFloat32, y_shape));
    if (y->numel() == 0) return Status::ok();
    float* yd = y->data<float>();
    if (plan.k == 0) {
      std::fill_n(yd, y->numel(), 0.f);
      return Status::ok();
    }
    const int64_t m = plan.m, n = plan.n, k = plan.k;
    // Row/column strides of each matrix.
    const size_t ar = a.shape.rank(), br = b.shape.rank();
    const int64_t a_rs = ar == 1 ? 0 : a.strides[ar - 2], a_cs = a.strides[ar - 1];
    const int64_t b_rs = br == 1 ? b.strides[0] : b.strides[br - 2], b_cs = br == 1 ? 0 : b.strides[br - 1];
    const int64_t y_rs = a.shape.rank() == 1 ? 0 : m_in_y[nb];
    const int64_t y_cs = b.shape.rank() == 1 ? 1 : m_in_y[rank - 1];
    if (n > 1 && y_cs != 1) return invalid_argument("perm_y moves the product's last axis (", perm_y_.size(), " axes)");
    GemmOperand probe;
    if (!strided_operand(nullptr, m, k, a_rs, a_cs, &probe) || !strided_operand(nullptr, k, n, b_rs, b_cs, &probe))
      return invalid_argument("perm_a / perm_b leave neither stride of a matrix at 1");
    // Batch offsets: the product's batch index, broadcast into A and B.
    auto batch_offset = [&](int64_t t, const StridedShape& s, size_t mat_dims) {
      int64_t off = 0;
      const size_t sb = s.shape.rank() - mat_dims;  // batch dims of this operand (right-aligned)
      for (size_t d = nb; d-- > 0;) {
        const int64_t i = t % plan.out_shape[d];
        t /= plan.out_shape[d];
        const size_t back = nb - 1 - d;
        if (back < sb && s.shape[sb - 1 - back] != 1) off += i * s.strides[sb - 1 - back];
      }
      return off;
    };
    auto y_offset = [&](int64_t t) {
      int64_t off = 0;
      for (size_t d = nb; d-- > 0;) {
        off += (t % plan.out_shape[d]) * m_in_y[d];
        t /= plan.out_shape[d];
      }
      return off;
    };
    const float* ad = ctx.input(0).data<float>();
    const float* bd = ctx.input(1).data<float>();
    const size_t amat = ar == 1 ? 1 : 2, bmat = br == 1 ? 1 : 2;
    auto one = [&](int64_t t, ThreadPool* p) {
      GemmOperand ao, bo;
      (void)strided_operand(ad + batch_offset(t, a, amat), m, k, a_rs, a_cs, &ao);
      (void)strided_operand(bd + batch_offset(t, b, bmat), k, n, b_rs, b_cs, &bo);
      sgemm_ex(m, n, k, alpha_, ao, bo, 0.f, yd + y_offset(t), std::max<int64_t>(y_rs, n), p);
    };
    const double flops = 2.0 * static_cast<double>(m * n) * static_cast<double>(k);
    if (flops >= 4e6 || plan.batches == 1) {
      for (int64_t t = 0; t < plan.batches; ++t) one(t, ctx.pool());
    } else if (k <= kSmallMatMulMaxK && small_matmul_pays()) {
      // Many small products (attention heads): one per task, read in place.
      parallel_for(ctx.pool(), plan.batches, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          small_matmul_f32(m, n, k, alpha_, {ad + batch_offset(t, a, amat), a_rs, a_cs},
                           {bd + batch_offset(t, b, bmat), b_rs, b_cs}, yd + y_offset(t), std::max<int64_t>(y_rs, n));
      });
    } else {
      parallel_for(ctx.pool(), plan.batches, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) one(t, nullptr);
      });
    }
    return Status::ok();
  }

 private:
  std::vector<int64_t> perm_a_, perm_b_, perm_y_;
  float alpha_ = 1.f;
};

}  // namespace

void register_matmul_ops(KernelRegistry& r) {
  r.add({.domain = "", .op_type = "MatMul", .since_version = 1, .until_version = 1000, .dtypes = kMatMulTypes,
         .type_input = 0, .factory = make_kernel<MatMulKernel>, .flags = 0});
  r.add({.domain = "", .op_type = "Gemm", .since_version = 1, .until_version = 1000, .dtypes = kMatMulTypes,
         .type_input = 0, .factory = make_kernel<GemmKernel>, .flags = 0});
  r.add({.domain = "kiln", .op_type = "MatMulBias", .since_version = 1, .until_version = 1000,
         .dtypes = dtype_set(DType::kFloat32), .type_input = 0, .factory = make_kernel<MatMulBiasKernel>, .flags = 0});
  r.add({.domain = "kiln", .op_type = "TransposedMatMul", .since_version = 1, .until_version = 1000,
         .dtypes = dtype_set(DType::kFloat32), .type_input = 0, .factory = make_kernel<TransposedMatMulKernel>,
         .flags = 0});
}

}  // namespace kiln::kernels
