// The xnnpack plugin's own kernels, compiled into this test from their
// sources (backends/xnnpack: the fused blocks' GEMM, xnn_gemm.h, and the
// 3x3 depthwise, xnn_dwconv.h), each variant the CPU runs (AVX-512F and
// AVX2+FMA, picked with KILN_XNNPACK_ISA, so an AVX-512 machine runs both),
// and the fused head's FC (xnn_head.h),
// against a float64 reference over their parameter space: GEMM column
// counts around the 8-, 16-, 24- and 32-column panels and groups (masked
// last vectors), row counts around the tile heights (edge tiles), padded
// reductions, row strides, the channel-blocked output layout of the blocks'
// ring, with and without a residual; depthwise channels 16/32/48, maps of
// 1 to 13 columns (interior blocks of four outputs and edge pixels), strides
// 1 and 2, pads 0 to 2, padding rows, pixel strides, clamps. The kernels are
// thread-agnostic (a band of rows per call); their 1/2/3-thread use is
// tested through the plugin in xnnpack_block_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "abi_test_util.h"
#include "kiln/c/backend_sdk.hpp"
#include "xnn_dwconv.h"
#include "xnn_gemm.h"
#include "xnn_head.h"
#include "xnn_isa.h"

namespace kiln_xnnpack {
namespace {

using kiln::abi_test::ScopedEnv;

// The variants this CPU runs, widest first.
std::vector<Isa> variants() {
  std::vector<Isa> v;
  if (cpu_isa() >= Isa::kAvx512) v.push_back(Isa::kAvx512);
  if (cpu_isa() >= Isa::kAvx2) v.push_back(Isa::kAvx2);
  return v;
}

std::vector<float> uniform(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

double clampd(double v, double lo, double hi) { return std::min(std::max(v, lo), hi); }

TEST(XnnpackKernelIsa, CapParsesAndNeverExceedsTheCpu) {
  {
    ScopedEnv e("KILN_XNNPACK_ISA", nullptr);
    EXPECT_EQ(kernel_isa(), cpu_isa());
  }
  for (const char* v : {"none", "baseline"}) {
    ScopedEnv e("KILN_XNNPACK_ISA", v);
    EXPECT_EQ(kernel_isa(), Isa::kNone) << v;
    EXPECT_FALSE(gemm_supported());
    EXPECT_FALSE(native_depthwise_supported());
  }
  {
    ScopedEnv e("KILN_XNNPACK_ISA", "avx2");
    EXPECT_EQ(kernel_isa(), std::min(cpu_isa(), Isa::kAvx2));
  }
  {
    ScopedEnv e("KILN_XNNPACK_ISA", "avx512");
    EXPECT_EQ(kernel_isa(), cpu_isa());
  }
  ScopedEnv e("KILN_XNNPACK_ISA", "sse9");
  try {
    (void)kernel_isa();
    ADD_FAILURE() << "an unknown instruction set was accepted";
  } catch (const kiln::sdk::Error& err) {
    EXPECT_NE(std::string(err.what()).find("KILN_XNNPACK_ISA='sse9'"), std::string::npos) << err.what();
  }
}

struct GemmCase {
  size_t m, n, k, k_pad;
  bool residual, blocked;  // blocked: C by blocks of 16 columns ([n / 16][m][16], as the blocks' ring)
};

void check_gemm(const GemmCase& c, Isa isa) {
  ScopedEnv e("KILN_XNNPACK_ISA", isa_name(isa));
  const size_t lda = c.k_pad + 3, ldr = c.n + 5;
  const std::vector<float> w = uniform(c.n * c.k, 1), bias = uniform(c.n, 2), r = uniform(c.m * ldr, 4);
  std::vector<float> a = uniform(c.m * lda, 3);
  const PackedGemm g(w.data(), bias.data(), c.n, c.k, c.k_pad);
  ASSERT_EQ(g.isa(), isa);
  PackedGemm::Epilogue ep{-0.75f, 1.5f};
  if (c.residual) ep = {-0.75f, 1.5f, r.data(), ldr, -1.0f, 2.0f};
  // Plain: rows ldc = n + 7 apart (the gap must stay untouched). Blocked: ldc 16, cvs m * 16.
  const size_t ldc = c.blocked ? 16 : c.n + 7, cvs = c.blocked ? c.m * 16 : 16;
  const float kSentinel = 12345.0f;
  std::vector<float> out(c.blocked ? c.n * c.m : c.m * ldc, kSentinel);
  g.run(c.m, a.data(), lda, out.data(), ldc, ep, cvs);
  for (size_t i = 0; i < c.m; ++i)
    for (size_t j = 0; j < c.n; ++j) {
      double acc = bias[j], mag = std::fabs(bias[j]);
      for (size_t q = 0; q < c.k; ++q) {
        acc += double(a[i * lda + q]) * w[j * c.k + q];
        mag += std::fabs(double(a[i * lda + q]) * w[j * c.k + q]);
      }
      double want = clampd(acc, ep.lo, ep.hi);
      if (c.residual) want = clampd(want + r[i * ldr + j], ep.lo2, ep.hi2), mag += 1;
      const float got = c.blocked ? out[j / 16 * cvs + i * 16 + j % 16] : out[i * ldc + j];
      ASSERT_NEAR(got, want, 1e-6 * (1 + mag)) << isa_name(isa) << " row " << i << " col " << j;
    }
  if (c.blocked) return;
  for (size_t i = 0; i < c.m; ++i)
    for (size_t j = c.n; j < ldc; ++j) ASSERT_EQ(out[i * ldc + j], kSentinel) << "wrote past row " << i << "'s columns";
}

TEST(XnnpackKernelGemm, EveryVariantMatchesTheReference) {
  // Columns: 1..8 (one masked vector), around 16, 24 (the 4 x 24 tile), 32
  // and past it (a second panel of 16, 24 or 32 columns, its second group
  // partial or not). Rows: around the tiles (4, 6, 8, 12 rows).
  const size_t ns[] = {1, 5, 8, 9, 15, 16, 17, 20, 24, 25, 31, 32, 33, 40, 48, 56, 64, 72, 100};
  const size_t ms[] = {1, 3, 5, 7, 8, 12, 13, 25};
  for (Isa isa : variants())
    for (size_t n : ns)
      for (size_t m : ms)
        for (size_t k : {size_t{1}, size_t{7}, size_t{24}})
          for (bool res : {false, true}) {
            const size_t k_pad = k == 7 ? 9 : k;  // padded reductions read finite A and zero weights
            check_gemm({m, n, k, k_pad, res, false}, isa);
            if (n % 16 == 0 && !res) check_gemm({m, n, k, k_pad, false, true}, isa);
            if (HasFatalFailure()) return;
          }
}

// run_panels prefetching a stream while it computes (the fused head's FC
// rows): the same results, bit for bit, as without (the tiles that
// prefetch are other instantiations of the kernel), over panel ranges,
// row counts around the tiles, streams of fewer and more lines than the
// reduction has steps, and a stream that does not start on a line.
TEST(XnnpackKernelGemm, PanelsThatPrefetchMatchThoseThatDoNot) {
  const std::vector<float> stream = uniform(64 * 1024, 11);
  for (Isa isa : variants()) {
    ScopedEnv e("KILN_XNNPACK_ISA", isa_name(isa));
    for (size_t n : {16, 24, 40, 100})
      for (size_t m : {1, 7, 8, 13, 49})
        for (size_t k : {3, 96})
          for (size_t bytes : {size_t{64}, size_t{4000}, size_t{200000}}) {
            const std::vector<float> w = uniform(n * k, 1), bias = uniform(n, 2), a = uniform(m * k, 3);
            const PackedGemm g(w.data(), bias.data(), n, k, k);
            const PackedGemm::Epilogue ep{-0.75f, 1.5f};
            const size_t p0 = n > 32 ? 1 : 0, p1 = g.panels(), ldc = (p1 - p0) * 32;
            std::vector<float> plain(m * ldc, 0.0f), pf(m * ldc, 0.0f);
            g.run_panels(m, a.data(), k, plain.data(), ldc, ep, p0, p1);
            g.run_panels(m, a.data(), k, pf.data(), ldc, ep, p0, p1, {stream.data() + 3, bytes});
            ASSERT_EQ(plain, pf) << isa_name(isa) << " n " << n << " m " << m << " k " << k << " bytes " << bytes;
          }
  }
}

// The fused head's FC (xnn_head.h): panels of up to 32 rows accumulated
// into a partial output in any order, partial outputs summed with the bias
// and clamped, against float64: outputs around the 16-column vectors and
// the 128-column blocks, one image and three, a panel of fewer rows.
TEST(XnnpackKernelHeadFc, AccumulateAndFinishMatchTheReference) {
  for (Isa isa : variants()) {
    ScopedEnv e("KILN_XNNPACK_ISA", isa_name(isa));
    for (size_t outputs : {1, 10, 17, 100, 150, 1000})
      for (size_t k : {5, 37, 96})
        for (size_t n : {1, 3}) {
          const std::vector<float> w = uniform(outputs * k, 21), bias = uniform(outputs, 22), x = uniform(n * k, 23);
          const HeadFc fc(w.data(), bias.data(), outputs, k, -2.0f, 2.5f);
          ASSERT_EQ(fc.isa(), isa);
          ASSERT_EQ(fc.ld() % 16, 0u);
          const GemmPrefetch rows = fc.rows(0, k);
          ASSERT_EQ(rows.bytes, k * fc.ld() * sizeof(float));
          // Two partial outputs (two threads), a gap between them; panels dealt alternately, the last first.
          const size_t stride = n * fc.ld() + 16, panels = (k + 31) / 32;
          std::vector<float> parts(2 * stride, 0.0f);
          for (size_t p = panels; p-- > 0;) {
            const size_t k0 = p * 32, k1 = std::min(k, k0 + 32);
            fc.accumulate(n, x.data() + k0, k, k0, k1, parts.data() + (p % 2) * stride);
          }
          std::vector<float> out(n * outputs, 0.0f);
          fc.finish(n, parts.data(), 2, stride, out.data(), 0, outputs);
          for (size_t i = 0; i < n; ++i)
            for (size_t o = 0; o < outputs; ++o) {
              double acc = bias[o], mag = std::fabs(bias[o]);
              for (size_t q = 0; q < k; ++q) {
                acc += double(x[i * k + q]) * w[o * k + q];
                mag += std::fabs(double(x[i * k + q]) * w[o * k + q]);
              }
              ASSERT_NEAR(out[i * outputs + o], clampd(acc, -2.0, 2.5), 1e-6 * (1 + mag))
                  << isa_name(isa) << " outputs " << outputs << " k " << k << " image " << i << " output " << o;
            }
          for (size_t i = 0; i < n; ++i)  // the padding columns stay 0
            for (size_t o = outputs; o < fc.ld(); ++o) ASSERT_EQ(parts[i * fc.ld() + o], 0.0f);
          // finish over a range of outputs writes only those.
          std::vector<float> part_out(n * outputs, 7.0f);
          const size_t o0 = outputs / 3, o1 = outputs - outputs / 4;
          fc.finish(n, parts.data(), 2, stride, part_out.data(), o0, o1);
          for (size_t i = 0; i < n; ++i)
            for (size_t o = 0; o < outputs; ++o)
              ASSERT_EQ(part_out[i * outputs + o], o >= o0 && o < o1 ? out[i * outputs + o] : 7.0f);
        }
  }
}

TEST(XnnpackKernelGemm, LongReductions) {
  for (Isa isa : variants())
    for (size_t k : {96, 144, 385, 960})
      for (size_t n : {24, 32, 48, 160}) {
        check_gemm({29, n, k, (k + 15) / 16 * 16, n == 24, false}, isa);
        if (HasFatalFailure()) return;
      }
}

struct DwCase {
  size_t n, c, h, w, stride, pt, pl, pb, pr;
};

// depthwise3x3_rows over a dense NHWC tensor against float64.
void check_depthwise(const DwCase& d, Isa isa) {
  DepthwiseShape s;
  s.n = d.n, s.h = d.h, s.w = d.w, s.c = d.c, s.stride = d.stride, s.pad_top = d.pt, s.pad_left = d.pl;
  s.oh = (d.h + d.pt + d.pb - 3) / d.stride + 1;
  s.ow = (d.w + d.pl + d.pr - 3) / d.stride + 1;
  s.lo = -0.5f, s.hi = 1.25f;
  s.isa = isa;
  const std::vector<float> x = uniform(d.n * d.h * d.w * d.c, 5), f = uniform(9 * d.c, 6), b = uniform(d.c, 7);
  std::vector<float> y(d.n * s.oh * s.ow * d.c, 0.0f);
  depthwise3x3_rows(s, x.data(), f.data(), b.data(), y.data(), 0, d.n * s.oh);
  for (size_t n = 0; n < d.n; ++n)
    for (size_t oy = 0; oy < s.oh; ++oy)
      for (size_t ox = 0; ox < s.ow; ++ox)
        for (size_t ch = 0; ch < d.c; ++ch) {
          double acc = b[ch];
          for (size_t ky = 0; ky < 3; ++ky)
            for (size_t kx = 0; kx < 3; ++kx) {
              const long iy = long(oy * d.stride + ky) - long(d.pt), ix = long(ox * d.stride + kx) - long(d.pl);
              if (iy < 0 || ix < 0 || iy >= long(d.h) || ix >= long(d.w)) continue;
              acc += double(x[((n * d.h + size_t(iy)) * d.w + size_t(ix)) * d.c + ch]) * f[(ky * 3 + kx) * d.c + ch];
            }
          const float got = y[((n * s.oh + oy) * s.ow + ox) * d.c + ch];
          ASSERT_NEAR(got, clampd(acc, s.lo, s.hi), 1e-5)
              << isa_name(isa) << " n" << n << " y" << oy << " x" << ox << " c" << ch;
        }
}

TEST(XnnpackKernelDepthwise, EveryVariantMatchesTheReference) {
  for (Isa isa : variants())
    for (size_t c : {16, 32, 48})
      for (size_t stride : {1, 2})
        for (size_t w : {1, 2, 4, 5, 7, 8, 13})
          for (size_t p : {0, 1, 2}) {
            if (w + 2 * p < 3) continue;
            check_depthwise({c == 32 ? size_t{2} : size_t{1}, c, w == 1 ? size_t{3} : size_t{5}, w, stride, p, p,
                             p == 2 ? size_t{0} : p, p == 2 ? size_t{1} : p},
                            isa);
            if (HasFatalFailure()) return;
          }
}

// depthwise3x3_rows16: several output rows from input rows with pixels
// further apart than the channels (the blocks' ring: 16 floats a pixel,
// the depthwise output: ce16), padding rows (null), into strided output.
TEST(XnnpackKernelDepthwise, Rows16WithPixelStridesAndPaddingRows) {
  for (Isa isa : variants())
    for (size_t stride : {1, 2})
      for (size_t w : {3, 6, 9, 14, 33}) {  // 33: wide rows run row by row (AVX2)
        DepthwiseShape s;
        s.w = w, s.c = 48, s.stride = stride, s.pad_left = 1, s.ow = (w + 2 - 3) / stride + 1;
        s.in_px = 24, s.out_px = 40, s.lo = -0.25f, s.hi = 0.75f, s.isa = isa;
        const size_t nrows = 3, in_rows = 5, out_row = s.ow * s.out_px + 8;
        const std::vector<float> x = uniform(in_rows * w * s.in_px, 8), f = uniform(9 * s.c, 9), b = uniform(s.c, 10);
        // Output row r reads input rows r, r + 1, r + 2 of x (row r + 2 of the last is padding).
        std::vector<const float*> rows(3 * nrows);
        for (size_t r = 0; r < nrows; ++r)
          for (size_t ky = 0; ky < 3; ++ky)
            rows[3 * r + ky] = r + 1 == nrows && ky == 2 ? nullptr : x.data() + (r + ky) * w * s.in_px + 16;
        std::vector<float> y(nrows * out_row, 0.0f);
        // Channels 16..31 of the filter: the rows point at the pixel's channel 16.
        depthwise3x3_rows16(s, rows.data(), nrows, f.data() + 16, b.data() + 16, y.data(), out_row);
        for (size_t r = 0; r < nrows; ++r)
          for (size_t ox = 0; ox < s.ow; ++ox)
            for (size_t ch = 0; ch < 16; ++ch) {
              double acc = b[16 + ch];
              for (size_t ky = 0; ky < 3; ++ky) {
                if (!rows[3 * r + ky]) continue;
                for (size_t kx = 0; kx < 3; ++kx) {
                  const long ix = long(ox * stride + kx) - 1;
                  if (ix < 0 || ix >= long(w)) continue;
                  acc += double(rows[3 * r + ky][size_t(ix) * s.in_px + ch]) * f[(ky * 3 + kx) * s.c + 16 + ch];
                }
              }
              ASSERT_NEAR(y[r * out_row + ox * s.out_px + ch], clampd(acc, s.lo, s.hi), 1e-5)
                  << isa_name(isa) << " stride " << stride << " w " << w << " row " << r << " x " << ox << " c " << ch;
            }
      }
}

}  // namespace
}  // namespace kiln_xnnpack
