// MatMul and Gemm kernels against a naive double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/testing/tensor_builders.h"
#include "kernels/util/broadcast.h"
#include "kernels/util/kernel_args.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

// numpy.matmul in double.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, Shape* out_shape) {
  Shape as = a.shape(), bs = b.shape();
  const bool av = as.rank() == 1, bv = bs.rank() == 1;
  if (av) as = Shape{1, as[0]};
  if (bv) bs = Shape{bs[0], 1};
  const int64_t m = as[as.rank() - 2], k = as[as.rank() - 1], n = bs[bs.rank() - 1];
  Shape ab, bb;
  for (size_t i = 0; i + 2 < as.rank(); ++i) ab.push_back(as[i]);
  for (size_t i = 0; i + 2 < bs.rank(); ++i) bb.push_back(bs[i]);
  Shape ob = *kernels::broadcast_shapes(ab, bb);
  auto sa = kernels::broadcast_strides(ab, ob), sb = kernels::broadcast_strides(bb, ob);
  *out_shape = ob;
  if (!av) out_shape->push_back(m);
  if (!bv) out_shape->push_back(n);
  std::vector<double> out(static_cast<size_t>(ob.numel() * m * n));
  for (int64_t t = 0; t < ob.numel(); ++t) {
    int64_t rem = t, oa = 0, obb = 0;
    for (size_t d = ob.rank(); d-- > 0;) {
      oa += (rem % ob[d]) * sa[d];
      obb += (rem % ob[d]) * sb[d];
      rem /= ob[d];
    }
    const float* ap = a.data<float>() + oa * m * k;
    const float* bp = b.data<float>() + obb * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += static_cast<double>(ap[i * k + p]) * bp[p * n + j];
        out[static_cast<size_t>((t * m + i) * n + j)] = s;
      }
  }
  return out;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got.data<float>()[i], want[i], tol) << "at " << i;
}

TEST(MatMulTest, MatchesNaiveWithBroadcastAndVectors) {
  std::mt19937 rng(5);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},          {{7}, {7, 3}},           {{2, 7}, {7}},         {{9}, {9}},
      {{2, 3, 5, 4}, {4, 6}},    {{5, 4}, {3, 4, 2}},     {{2, 1, 3, 4}, {5, 4, 2}}, {{4, 1, 8}, {1, 8, 3}},
      {{3, 2, 33, 70}, {3, 2, 70, 19}}, {{130, 300}, {300, 40}}, {{1, 20}, {20, 1}},  {{6, 3, 5}, {5}},
      // A 2-D A against batches of B (packed once when A is a constant), with
      // edge row panels, K past one cache block and one column.
      {{37, 300}, {3, 300, 45}},      {{13, 9}, {2, 2, 9, 1}},
  };
  for (const auto& [as, bs] : cases) {
    for (bool constant : {false, true}) {
      for (int threads : {1, 2, 3}) {
        Tensor a = random_tensor(as, rng), b = random_tensor(bs, rng);
        testing::OpCall call;
        call.op_type = "MatMul";
        call.inputs = {a, b};
        call.inputs_are_constant = constant;
        call.threads = threads;
        auto out = run_op(call);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        Shape want_shape;
        std::vector<double> want = naive_matmul(a, b, &want_shape);
        const Tensor& y = (*out)[0].tensor();
        ASSERT_EQ(y.shape(), want_shape) << as.to_string() << " x " << bs.to_string();
        expect_near_all(y, want, 1e-4);
      }
    }
  }
}

TEST(MatMulTest, IntegerAndDoubleAndHalf) {
  auto y = run_op1("MatMul", {Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}),
                              Tensor::from_vector<int32_t>({1, 0, 0, 1, 2, 2}, {3, 2})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(std::vector<int32_t>(y->data<int32_t>(), y->data<int32_t>() + 4), (std::vector<int32_t>{7, 8, 16, 17}));

  auto yd = run_op1("MatMul", {Tensor::from_vector<double>({1.5, 2.0}, {1, 2}), Tensor::from_vector<double>({2.0, 4.0}, {2})});
  ASSERT_TRUE(yd.ok());
  EXPECT_EQ(yd->shape(), (Shape{1}));
  EXPECT_DOUBLE_EQ(yd->data<double>()[0], 11.0);

  auto yh = run_op1("MatMul", {Tensor::from_vector<Float16>({Float16(1.f), Float16(2.f)}, {1, 2}),
                               Tensor::from_vector<Float16>({Float16(0.5f), Float16(0.25f)}, {2, 1})});
  ASSERT_TRUE(yh.ok());
  EXPECT_EQ(yh->dtype(), DType::kFloat16);
  EXPECT_FLOAT_EQ(static_cast<float>(yh->data<Float16>()[0]), 1.f);
}

TEST(MatMulTest, EmptyKGivesZeros) {
  auto y = run_op1("MatMul", {Tensor::allocate(DType::kFloat32, {2, 0}), Tensor::allocate(DType::kFloat32, {0, 3})});
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y->data<float>()[i], 0.f);
}

TEST(MatMulTest, RejectsMismatchedShapes) {
  auto y = run_op1("MatMul", {Tensor::allocate(DType::kFloat32, {2, 3}), Tensor::allocate(DType::kFloat32, {4, 3})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("K = 3"), std::string::npos) << y.status().message();
  EXPECT_NE(y.status().message().find("MatMul"), std::string::npos);
  auto yb = run_op1("MatMul",
                    {Tensor::allocate(DType::kFloat32, {2, 2, 3}), Tensor::allocate(DType::kFloat32, {3, 3, 4})});
  EXPECT_FALSE(yb.ok());
  auto ys = run_op1("MatMul", {Tensor::scalar(1.f), Tensor::allocate(DType::kFloat32, {1})});
  EXPECT_FALSE(ys.ok());
  auto yt = run_op1("MatMul", {Tensor::allocate(DType::kFloat32, {2, 3}), Tensor::allocate(DType::kFloat64, {3, 4})});
  EXPECT_FALSE(yt.ok());
}

// Gemm reference: alpha * op(A) op(B) + beta * broadcast(C).
std::vector<double> naive_gemm(const Tensor& a, const Tensor& b, const Tensor* c, bool ta, bool tb, float alpha,
                               float beta) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1), n = tb ? b.dim(0) : b.dim(1);
  std::vector<int64_t> cs = c ? kernels::broadcast_strides(c->shape(), Shape{m, n}) : std::vector<int64_t>{0, 0};
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a.data<float>()[p * m + i] : a.data<float>()[i * k + p];
        const double bv = tb ? b.data<float>()[j * k + p] : b.data<float>()[p * n + j];
        s += av * bv;
      }
      double v = alpha * s;
      if (c) v += beta * static_cast<double>(c->data<float>()[i * cs[0] + j * cs[1]]);
      out[static_cast<size_t>(i * n + j)] = v;
    }
  return out;
}

TEST(GemmOpTest, AllAttributesAndBiasForms) {
  std::mt19937 rng(9);
  const int64_t m = 13, n = 37, k = 21;
  for (int variant = 0; variant < 16; ++variant) {
    const bool ta = variant & 1, tb = variant & 2, constant = variant & 8;
    const float alpha = (variant & 4) ? 0.5f : 1.f, beta = (variant & 4) ? 2.f : 1.f;
    Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng);
    Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng);
    for (const Shape& cshape : {Shape{}, Shape{1}, Shape{n}, Shape{1, n}, Shape{m, 1}, Shape{m, n}}) {
      Tensor c = random_tensor(cshape, rng);
      testing::OpCall call;
      call.op_type = "Gemm";
      call.inputs = {a, b, c};
      call.attrs = {attr("transA", int64_t{ta}), attr("transB", int64_t{tb}), attr("alpha", alpha), attr("beta", beta)};
      call.inputs_are_constant = constant;
      call.threads = variant % 3 == 0 ? 2 : 1;
      auto out = run_op(call);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const Tensor& y = (*out)[0].tensor();
      ASSERT_EQ(y.shape(), (Shape{m, n}));
      expect_near_all(y, naive_gemm(a, b, &c, ta, tb, alpha, beta), 1e-4);
    }
  }
}

TEST(GemmOpTest, OptionalCFromOpset11) {
  std::mt19937 rng(2);
  Tensor a = random_tensor({4, 3}, rng), b = random_tensor({3, 5}, rng);
  auto y = run_op1("Gemm", {a, b}, {}, 13);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_near_all(*y, naive_gemm(a, b, nullptr, false, false, 1.f, 1.f), 1e-5);
  auto old = run_op1("Gemm", {a, b}, {}, 9);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("input 2 (C)"), std::string::npos);
}

TEST(GemmOpTest, IntegerGemm) {
  auto y = run_op1("Gemm", {Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2}),
                            Tensor::from_vector<int64_t>({5, 6, 7, 8}, {2, 2}), Tensor::from_vector<int64_t>({1, 2}, {2})},
                   {attr("transB", int64_t{1})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // A * B^T = [[17, 23], [39, 53]] + [1, 2]
  EXPECT_EQ(std::vector<int64_t>(y->data<int64_t>(), y->data<int64_t>() + 4), (std::vector<int64_t>{18, 25, 40, 55}));
}

TEST(GemmOpTest, RejectsBadShapes) {
  Tensor a = Tensor::allocate(DType::kFloat32, {2, 3});
  auto y = run_op1("Gemm", {a, Tensor::allocate(DType::kFloat32, {4, 5})});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("K = 3 vs 4"), std::string::npos) << y.status().message();
  auto yc = run_op1("Gemm", {a, Tensor::allocate(DType::kFloat32, {3, 5}), Tensor::allocate(DType::kFloat32, {3, 5})});
  ASSERT_FALSE(yc.ok());
  EXPECT_NE(yc.status().message().find("input 2 (C)"), std::string::npos);
  auto y3 = run_op1("Gemm", {Tensor::allocate(DType::kFloat32, {1, 2, 3}), Tensor::allocate(DType::kFloat32, {3, 5})});
  ASSERT_FALSE(y3.ok());
  EXPECT_NE(y3.status().message().find("rank 2"), std::string::npos);
}

// kiln MatMulBias (the optimizer's MatMul + bias + Gelu) against the naive
// product plus bias and the activation in double: ranks 1-4 of A, odd sizes
// (edge tiles), M large enough for the parallel GEMM, packed (constant) and
// raw B, 1-3 threads.
TEST(MatMulBiasTest, MatchesNaiveProductBiasAndGelu) {
  std::mt19937 rng(11);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},         {{7}, {7, 3}},           {{2, 5, 9}, {9, 17}},     {{1, 197, 48}, {48, 65}},
      {{2, 3, 5, 4}, {4, 6}},   {{130, 300}, {300, 40}}, {{4, 33, 70}, {70, 1}},   {{1, 1, 31}, {31, 129}},
  };
  const double kRoot2 = 1.4142135623730951, kBeta = 0.7978845608028654;
  for (const auto& [as, bs] : cases) {
    for (const char* act : {"", "Gelu", "GeluTanh"}) {
      for (bool constant : {false, true}) {
        for (int threads : {1, 2, 3}) {
          Tensor a = random_tensor(as, rng, -2.f, 2.f), b = random_tensor(bs, rng);
          Tensor bias = random_tensor(Shape{bs[1]}, rng);
          testing::OpCall call;
          call.op_type = "MatMulBias";
          call.domain = "kiln";
          call.opset = 1;
          call.inputs = {a, b, bias};
          if (*act) call.attrs = {attr("activation", act)};
          call.inputs_are_constant = constant;
          call.threads = threads;
          auto out = run_op(call);
          ASSERT_TRUE(out.ok()) << out.status().to_string();
          Shape want_shape;
          std::vector<double> want = naive_matmul(a, b, &want_shape);
          for (size_t i = 0; i < want.size(); ++i) {
            double v = want[i] + bias.data<float>()[i % static_cast<size_t>(bs[1])];
            if (std::string(act) == "Gelu") v = 0.5 * v * (1 + std::erf(v / kRoot2));
            if (std::string(act) == "GeluTanh") v = 0.5 * v * (1 + std::tanh(kBeta * (v + 0.044715 * v * v * v)));
            want[i] = v;
          }
          const Tensor& y = (*out)[0].tensor();
          ASSERT_EQ(y.shape(), want_shape) << as.to_string() << " x " << bs.to_string();
          SCOPED_TRACE(std::string(as.to_string()) + " x " + bs.to_string() + " " + act + " threads " +
                       std::to_string(threads) + (constant ? " constant" : ""));
          expect_near_all(y, want, 2e-4);
        }
      }
    }
  }
}

TEST(MatMulBiasTest, EmptyKGivesActivatedBiasAndBadInputsFail) {
  testing::OpCall call;
  call.op_type = "MatMulBias";
  call.domain = "kiln";
  call.opset = 1;
  call.inputs = {Tensor::zeros(DType::kFloat32, {2, 0}), Tensor::zeros(DType::kFloat32, {0, 3}),
                 f32({-1.f, 0.f, 2.f}, {3})};
  call.attrs = {attr("activation", "Gelu")};
  auto out = run_op(call);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(y.data<float>()[r * 3 + 0], -0.15865525f, 1e-6);
    EXPECT_EQ(y.data<float>()[r * 3 + 1], 0.f);
    EXPECT_NEAR(y.data<float>()[r * 3 + 2], 1.9544997f, 1e-6);
  }
  call.inputs = {Tensor::zeros(DType::kFloat32, {2, 4}), Tensor::zeros(DType::kFloat32, {4, 3}),
                 Tensor::zeros(DType::kFloat32, {4})};
  call.attrs = {};
  auto bad_bias = run_op(call);
  ASSERT_FALSE(bad_bias.ok());
  EXPECT_NE(bad_bias.status().message().find("bias"), std::string::npos) << bad_bias.status().message();
  call.inputs[2] = Tensor::zeros(DType::kFloat32, {3});
  call.attrs = {attr("activation", "Relu6")};
  auto bad_act = run_op(call);
  ASSERT_FALSE(bad_act.ok());
  EXPECT_NE(bad_act.status().message().find("activation"), std::string::npos) << bad_act.status().message();
}

// kiln TransposedMatMul against Transpose + MatMul + Transpose run as
// separate ops: the attention layouts of torch's exports (MultiheadAttention
// [S, B*H, D] and BERT's [B, S, H, D]), transposed and plain matrix reads,
// broadcast batches, vectors, 1-3 threads.
struct TransposedCase {
  Shape a, b;
  std::vector<int64_t> pa, pb, py;
};

// One case at `threads` against the Transpose / MatMul / Transpose ops.
void check_transposed(const TransposedCase& c, int threads, float alpha, std::mt19937& rng, const std::string& what) {
  Tensor a = random_tensor(c.a, rng), b = random_tensor(c.b, rng);
  // The reference: the ops the fused node replaces.
  Tensor ta = a, tb = b;
  if (!c.pa.empty()) ta = *run_op1("Transpose", {a}, {attr("perm", c.pa)});
  if (!c.pb.empty()) tb = *run_op1("Transpose", {b}, {attr("perm", c.pb)});
  auto prod = run_op1("MatMul", {ta, tb});
  ASSERT_TRUE(prod.ok()) << what << ": " << prod.status().to_string();
  Tensor want = *prod;
  if (!c.py.empty()) {
    auto w = run_op1("Transpose", {want}, {attr("perm", c.py)});
    ASSERT_TRUE(w.ok()) << what << ": " << w.status().to_string();
    want = *w;
  }
  testing::OpCall call;
  call.op_type = "TransposedMatMul";
  call.domain = "kiln";
  call.opset = 1;
  call.inputs = {a, b};
  if (!c.pa.empty()) call.attrs.push_back(attr("perm_a", c.pa));
  if (!c.pb.empty()) call.attrs.push_back(attr("perm_b", c.pb));
  if (!c.py.empty()) call.attrs.push_back(attr("perm_y", c.py));
  if (alpha != 1.f) call.attrs.push_back(attr("alpha", alpha));
  call.threads = threads;
  auto out = run_op(call);
  ASSERT_TRUE(out.ok()) << what << ": " << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.shape(), want.shape()) << what;
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_NEAR(y.data<float>()[i], alpha * want.data<float>()[i], 1e-4) << what << " threads " << threads << " at " << i;
}

TEST(TransposedMatMulTest, MatchesTheTransposesAndMatMulItReplaces) {
  const std::vector<TransposedCase> cases = {
      {{9, 3, 8}, {9, 3, 8}, {1, 0, 2}, {1, 2, 0}, {}},             // MHA: q [S,BH,D] -> [BH,S,D], k -> [BH,D,S]
      {{3, 9, 9}, {9, 3, 8}, {}, {1, 0, 2}, {1, 0, 2}},             // MHA: P V, context back to [S,BH,D]
      {{2, 7, 4, 16}, {2, 7, 4, 16}, {0, 2, 1, 3}, {0, 2, 3, 1}, {}},  // BERT: q K^T
      {{2, 4, 7, 7}, {2, 7, 4, 16}, {}, {0, 2, 1, 3}, {0, 2, 1, 3}},   // BERT: P V, context [B,S,H,D]
      {{5, 33, 70}, {19, 70}, {}, {1, 0}, {}},                      // B read transposed, broadcast over A's batch
      {{70, 5, 33}, {19, 70}, {1, 2, 0}, {1, 0}, {1, 0, 2}},         // A and B read transposed, Y [33, 5, 19]
      {{6, 5, 40}, {40, 33}, {}, {}, {1, 0, 2}},                    // only the output transpose
      {{13}, {4, 13, 6}, {}, {}, {}},                               // vector A (plain MatMul semantics)
  };
  std::mt19937 rng(3);
  for (size_t ci = 0; ci < cases.size(); ++ci)
    for (int threads : {1, 2, 3})
      check_transposed(cases[ci], threads, ci % 2 ? 0.125f : 1.f, rng, "case " + std::to_string(ci));
}

// Both per-head products of torch's MultiheadAttention layout ([S, B*H, D])
// over head counts, head sizes (odd too), query and key lengths 1..200:
// the small-product path's row groups, column blocks and k up to 200.
TEST(TransposedMatMulTest, AttentionHeadsOverSizes) {
  std::mt19937 rng(5);
  for (int64_t heads : {1, 3, 8})
    for (int64_t d : {1, 7, 32, 33})
      for (int64_t s : {1, 2, 17, 48, 200}) {
        const int64_t sk = s == 48 ? 100 : s;  // cross-attention: keys longer than queries
        const std::string what = "heads " + std::to_string(heads) + " d " + std::to_string(d) + " s " +
                                 std::to_string(s) + "/" + std::to_string(sk);
        for (int threads : {1, 2, 3}) {
          check_transposed({{s, heads, d}, {sk, heads, d}, {1, 0, 2}, {1, 2, 0}, {}}, threads, 0.25f, rng, what);
          check_transposed({{heads, s, sk}, {sk, heads, d}, {}, {1, 0, 2}, {1, 0, 2}}, threads, 1.f, rng, what);
        }
      }
}

TEST(TransposedMatMulTest, RejectsPermsItCannotStride) {
  testing::OpCall call;
  call.op_type = "TransposedMatMul";
  call.domain = "kiln";
  call.opset = 1;
  call.inputs = {Tensor::zeros(DType::kFloat32, {2, 3, 4}), Tensor::zeros(DType::kFloat32, {4, 5})};
  call.attrs = {attr("perm_a", std::vector<int64_t>{2, 0, 1})};  // [4, 2, 3]: neither stride of a matrix is 1
  call.inputs[1] = Tensor::zeros(DType::kFloat32, {3, 5});
  auto r = run_op(call);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("stride"), std::string::npos) << r.status().message();
  call.attrs = {attr("perm_a", std::vector<int64_t>{0, 0, 1})};
  auto dup = run_op(call);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("repeated"), std::string::npos) << dup.status().message();
}

}  // namespace
}  // namespace kiln
