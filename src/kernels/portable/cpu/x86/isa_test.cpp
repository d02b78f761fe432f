// The portable kernels' ISA level: parsing and capping of $KILN_CPU_ISA, the
// dispatch of KILN_ISA_DISPATCH, and the element-wise loops at every level
// this CPU runs against the baseline variant. (ctest also runs the whole
// kernels suite with KILN_CPU_ISA=avx2 and =baseline: unit.kernels.avx2,
// unit.kernels.baseline.)
#include "kernels/portable/cpu/x86/isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/portable/cpu/x86/elementwise_simd.h"
#include "kernels/portable/util/gemm.h"

namespace kiln::kernels::cpu {
namespace {

constexpr Isa kAll[] = {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512};

// Restores the level a test changed.
class IsaTest : public ::testing::Test {
 protected:
  void TearDown() override { set_kernel_isa(saved_); }
  Isa saved_ = kernel_isa();
};

TEST_F(IsaTest, ParsesEveryLevelAndRejectsOtherWords) {
  Isa isa = Isa::kAvx512;
  ASSERT_TRUE(parse_isa("baseline", &isa));
  EXPECT_EQ(isa, Isa::kBaseline);
  ASSERT_TRUE(parse_isa("avx2", &isa));
  EXPECT_EQ(isa, Isa::kAvx2);
  ASSERT_TRUE(parse_isa("avx512", &isa));
  EXPECT_EQ(isa, Isa::kAvx512);
  ASSERT_TRUE(parse_isa("none", &isa));  // $KILN_XNNPACK_ISA's word for it
  EXPECT_EQ(isa, Isa::kBaseline);
  for (const char* bad : {"AVX2", "avx-2", "avx512f", "sse2", " avx2", ""}) EXPECT_FALSE(parse_isa(bad, &isa)) << bad;
  for (Isa i : kAll) {
    Isa back = Isa::kBaseline;
    ASSERT_TRUE(parse_isa(isa_name(i), &back));
    EXPECT_EQ(back, i);
  }
}

TEST_F(IsaTest, CapNeverRaisesTheCpuLevel) {
  std::string error;
  for (Isa cpu : kAll) {
    EXPECT_EQ(capped_isa(nullptr, cpu, &error), cpu);
    EXPECT_EQ(capped_isa("", cpu, &error), cpu);
    EXPECT_EQ(capped_isa("avx512", cpu, &error), cpu);
    EXPECT_EQ(capped_isa("baseline", cpu, &error), Isa::kBaseline);
    EXPECT_EQ(capped_isa("avx2", cpu, &error), cpu == Isa::kBaseline ? Isa::kBaseline : Isa::kAvx2);
    EXPECT_TRUE(error.empty()) << error;
  }
}

TEST_F(IsaTest, UnknownValueIsNamedAndTheCpuLevelKept) {
  std::string error;
  EXPECT_EQ(capped_isa("avx-2", Isa::kAvx512, &error), Isa::kAvx512);
  EXPECT_NE(error.find("KILN_CPU_ISA='avx-2'"), std::string::npos) << error;
  EXPECT_NE(error.find("avx512, avx2, baseline"), std::string::npos) << error;
  EXPECT_EQ(capped_isa("avx2", Isa::kAvx512, &error), Isa::kAvx2);
  EXPECT_TRUE(error.empty());  // cleared by the next good value
}

// What ctest's unit.kernels.<isa> runs rely on: the environment's cap is the
// level in effect, for the loops and for the SGEMM microkernel.
TEST_F(IsaTest, EnvironmentCapIsInEffect) {
  std::string error;
  const Isa want = capped_isa(std::getenv("KILN_CPU_ISA"), cpu_isa(), &error);
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(kernel_isa(), want);
#if defined(KILN_ISA_X86)
  const char* gemm = want == Isa::kAvx512 ? "avx512f" : want == Isa::kAvx2 ? "avx2+fma" : "portable";
  EXPECT_STREQ(sgemm_kernel_name(), gemm);
#endif
}

TEST_F(IsaTest, SetKernelIsaCapsAtTheCpu) {
  for (Isa isa : kAll) {
    set_kernel_isa(isa);
    EXPECT_EQ(kernel_isa(), static_cast<uint8_t>(isa) <= static_cast<uint8_t>(cpu_isa()) ? isa : cpu_isa());
  }
}

int tag_body(int x) { return x; }
struct TagVariants {
  static int avx512(int x) { return 512 + x; }
  static int avx2(int x) { return 2 + x; }
  static int baseline(int x) { return x; }
};

TEST_F(IsaTest, DispatchRunsTheVariantOfTheLevel) {
  const auto call = &detail::IsaDispatch<&tag_body, TagVariants>::call;
  for (Isa isa : kAll) {
    if (static_cast<uint8_t>(isa) > static_cast<uint8_t>(cpu_isa())) continue;
#if defined(KILN_ISA_X86)
    const int want = isa == Isa::kAvx512 ? 512 : isa == Isa::kAvx2 ? 2 : 0;
#else
    const int want = 0;
#endif
    set_kernel_isa(isa);
    EXPECT_EQ(call(1), want + 1) << isa_name(isa);
  }
}

// A body compiled per level: the same results from every variant.
KILN_ISA_BODY float dot_body(const float* a, const float* b, int64_t n) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  float s = 0;
  for (float v : acc) s += v;
  return s;
}
KILN_ISA_DISPATCH(dot, dot_body);

TEST_F(IsaTest, DispatchedBodyAgreesAtEveryLevel) {
  std::vector<float> a(1003), b(1003);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 17) * 0.25f - 2.0f;  // exact products and sums
    b[i] = static_cast<float>(i % 5) - 2.0f;
  }
  set_kernel_isa(Isa::kBaseline);
  const float want = dot(a.data(), b.data(), 1003);
  for (Isa isa : kAll) {
    set_kernel_isa(isa);
    EXPECT_EQ(dot(a.data(), b.data(), 1003), want) << isa_name(isa);
  }
}

// Inputs that reach every branch of the loops: specials, tiny and huge
// values, and a length with a remainder past any vector width.
std::vector<float> mixed_inputs() {
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -3.0f, 3.0f, 9.5f, -9.5f, 88.0f, -104.5f, 1e-30f, -1e-30f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min()};
  for (int i = 0; static_cast<int>(x.size()) < 1037; ++i) x.push_back(std::sin(0.37f * i) * (1 + i % 23));
  return x;
}

// Equal, or (rel > 0) within rel of the result plus rel * max(1, |x|):
// contracted and separate multiply-adds differ by an ulp of the terms, which
// is more than an ulp of the result where terms cancel (HardSwish near -3,
// Gelu's 1 + erf near -2).
bool same_or_close(float got, float want, float rel, float x = 0.f) {
  if (std::isnan(want)) return std::isnan(got);
  if (got == want) return true;
  return std::fabs(got - want) <= rel * (std::fabs(want) + std::max(1.f, std::fabs(x)));
}

using Unary = void (*)(const float*, float*, int64_t);

TEST_F(IsaTest, ElementwiseLoopsAgreeWithTheBaselineAtEveryLevel) {
  const std::vector<float> x = mixed_inputs();
  const auto n = static_cast<int64_t>(x.size());
  struct Case {
    const char* name;
    Unary fn;
    float rel;  // FMA contraction moves the polynomials by an ulp or two
  };
  const Case cases[] = {
      {"relu", simd::relu_f32, 0},
      {"hard_swish", simd::hard_swish_f32, 4e-7f},
      {"sqrt", simd::sqrt_f32, 0},
      {"square", simd::square_f32, 0},
      {"exp", simd::exp_f32, 5e-7f},
      {"sigmoid", simd::sigmoid_f32, 5e-7f},
      {"tanh", simd::tanh_f32, 5e-7f},
      {"erf", simd::erf_f32, 5e-7f},
      {"gelu", simd::gelu_f32, 5e-7f},
      {"gelu_tanh", simd::gelu_tanh_f32, 5e-7f},
      {"pow_half", simd::pow_half_f32, 0},
      {"clip", [](const float* a, float* y, int64_t m) { simd::clip_f32(a, y, m, -1.5f, 2.5f); }, 0},
      {"add", [](const float* a, float* y, int64_t m) { simd::arith_f32(simd::Arith::kAdd, a, 1, a + 1, 1, y, m - 1); },
       0},
      {"div_sv",
       [](const float* a, float* y, int64_t m) { simd::arith_f32(simd::Arith::kDiv, a, 0, a + 1, 1, y, m - 1); }, 0},
  };
  for (const Case& c : cases) {
    set_kernel_isa(Isa::kBaseline);
    std::vector<float> want(x.size(), 0.f);
    c.fn(x.data(), want.data(), n);
    for (Isa isa : kAll) {
      set_kernel_isa(isa);
      std::vector<float> got(x.size(), 0.f);
      c.fn(x.data(), got.data(), n);
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i)
        if (!same_or_close(got[i], want[i], c.rel, x[i]) && bad++ < 3)
          ADD_FAILURE() << c.name << " at " << isa_name(kernel_isa()) << ": x=" << x[i] << " got " << got[i]
                        << " baseline " << want[i];
    }
  }
}

TEST_F(IsaTest, HalfConversionsAgreeAtEveryLevel) {
  const std::vector<float> x = mixed_inputs();
  const auto n = static_cast<int64_t>(x.size());
  set_kernel_isa(Isa::kBaseline);
  std::vector<uint16_t> want_h(x.size());
  simd::f32_to_f16(x.data(), want_h.data(), n);
  std::vector<float> want_f(x.size());
  simd::f16_to_f32(want_h.data(), want_f.data(), n);
  for (Isa isa : kAll) {
    set_kernel_isa(isa);
    std::vector<uint16_t> h(x.size());
    simd::f32_to_f16(x.data(), h.data(), n);
    std::vector<float> f(x.size());
    simd::f16_to_f32(want_h.data(), f.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      // NaN payloads may differ; NaN stays NaN.
      if (std::isnan(x[i])) continue;
      ASSERT_EQ(h[i], want_h[i]) << isa_name(kernel_isa()) << " x=" << x[i];
      ASSERT_TRUE(same_or_close(f[i], want_f[i], 0)) << isa_name(kernel_isa()) << " i=" << i;
    }
  }
}

}  // namespace
}  // namespace kiln::kernels::cpu
