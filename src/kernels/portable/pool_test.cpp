// Pooling kernels against naive references (2-D random sweeps) and
// hand-checked values for 1-D/3-D, indices, globals and MaxUnpool.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/portable/conv_depthwise_rows.h"
#include "kernels/portable/pool_rows.h"
#include "kernels/testing/tensor_builders.h"

namespace kiln {
namespace {

using testing::attr;
using testing::run_op;
using testing::run_op1;

using namespace kiln::testing;  // tensor builders

std::vector<float> values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

struct Pool2D {
  int64_t kh, kw, sh, sw, dh, dw, pt, pl, pbm, pr;
  bool ceil, include_pad;
};

int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil) {
  const int64_t span = in + pb + pe - ((k - 1) * d + 1);
  int64_t o = ceil ? (span + s - 1) / s + 1 : span / s + 1;
  if (ceil && (o - 1) * s >= in + pb) --o;
  return o;
}

// Reference MaxPool (value and row-major argmax) and AveragePool on one 2-D plane.
void naive_pool(const Pool2D& p, const float* x, int64_t h, int64_t w, bool max, std::vector<float>* y,
                std::vector<int64_t>* idx) {
  const int64_t oh = out_dim(h, p.kh, p.sh, p.dh, p.pt, p.pbm, p.ceil), ow = out_dim(w, p.kw, p.sw, p.dw, p.pl, p.pr, p.ceil);
  for (int64_t i = 0; i < oh; ++i)
    for (int64_t j = 0; j < ow; ++j) {
      float best = -INFINITY;
      int64_t at = -1, count = 0, padded = 0;
      double sum = 0;
      for (int64_t a = 0; a < p.kh; ++a)
        for (int64_t b = 0; b < p.kw; ++b) {
          const int64_t r = i * p.sh - p.pt + a * p.dh, c = j * p.sw - p.pl + b * p.dw;
          if (r >= -p.pt && r < h + p.pbm && c >= -p.pl && c < w + p.pr) ++padded;
          if (r < 0 || r >= h || c < 0 || c >= w) continue;
          const float v = x[r * w + c];
          if (v > best) {
            best = v;
            at = r * w + c;
          }
          sum += v;
          ++count;
        }
      if (max) {
        y->push_back(best);
        idx->push_back(at);
      } else {
        y->push_back(static_cast<float>(sum / static_cast<double>(p.include_pad ? padded : count)));
      }
    }
}

TEST(PoolTest, MaxAndAverageMatchNaiveOnRandom2D) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> u(0, 1000);
  int checked = 0;
  for (int t = 0; t < 80; ++t) {
    Pool2D p{1 + u(rng) % 3, 1 + u(rng) % 4, 1 + u(rng) % 3, 1 + u(rng) % 2, 1 + u(rng) % 2, 1 + u(rng) % 2,
             0, 0, 0, 0, u(rng) % 2 == 0, u(rng) % 2 == 0};
    // pads must be smaller than the kernel so no window is all padding
    p.pt = u(rng) % p.kh;
    p.pbm = u(rng) % p.kh;
    p.pl = u(rng) % p.kw;
    p.pr = u(rng) % p.kw;
    const int64_t h = 3 + u(rng) % 8, w = 3 + u(rng) % 8;
    if ((p.kh - 1) * p.dh + 1 > h + p.pt + p.pbm || (p.kw - 1) * p.dw + 1 > w + p.pl + p.pr) continue;
    const bool max = t % 2 == 0;
    if (!max) p.dh = p.dw = 1;
    Tensor x = random_tensor({2, 3, h, w}, rng);
    std::vector<float> want;
    std::vector<int64_t> want_idx;
    for (int64_t plane = 0; plane < 6; ++plane) {
      const size_t before = want_idx.size();
      naive_pool(p, x.data<float>() + plane * h * w, h, w, max, &want, &want_idx);
      for (size_t i = before; i < want_idx.size(); ++i) want_idx[i] += plane * h * w;
    }
    testing::OpCall call;
    call.op_type = max ? "MaxPool" : "AveragePool";
    call.inputs = {x};
    call.attrs = {attr("kernel_shape", std::vector<int64_t>{p.kh, p.kw}), attr("strides", std::vector<int64_t>{p.sh, p.sw}),
                  attr("pads", std::vector<int64_t>{p.pt, p.pl, p.pbm, p.pr}), attr("ceil_mode", int64_t{p.ceil})};
    if (max) call.attrs.push_back(attr("dilations", std::vector<int64_t>{p.dh, p.dw}));
    else call.attrs.push_back(attr("count_include_pad", int64_t{p.include_pad}));
    const bool want_indices = max && t % 4 == 0;  // without Indices, float runs the fast path
    call.num_outputs = want_indices ? 2 : 1;
    call.threads = t % 3 == 0 ? 2 : 1;
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = (*r)[0].tensor();
    ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size())) << "case " << t;
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(y.data<float>()[i], want[i], 1e-5) << "case " << t << " at " << i;
    if (want_indices) {
      const Tensor& idx = (*r)[1].tensor();
      ASSERT_EQ(idx.dtype(), DType::kInt64);
      for (size_t i = 0; i < want_idx.size(); ++i) ASSERT_EQ(idx.data<int64_t>()[i], want_idx[i]) << "case " << t;
    }
    ++checked;
  }
  EXPECT_GT(checked, 40);
}

// Runs MaxPool (max) or AveragePool on x [n, c, h, w] and compares every
// plane with naive_pool.
void check_pool2d(const Pool2D& p, const Tensor& x, bool max, int threads, const std::string& what) {
  const int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  std::vector<float> want;
  std::vector<int64_t> want_idx;
  for (int64_t plane = 0; plane < planes; ++plane) naive_pool(p, x.data<float>() + plane * h * w, h, w, max, &want, &want_idx);
  testing::OpCall call;
  call.op_type = max ? "MaxPool" : "AveragePool";
  call.inputs = {x};
  call.attrs = {attr("kernel_shape", std::vector<int64_t>{p.kh, p.kw}), attr("strides", std::vector<int64_t>{p.sh, p.sw}),
                attr("pads", std::vector<int64_t>{p.pt, p.pl, p.pbm, p.pr}), attr("ceil_mode", int64_t{p.ceil})};
  if (max) {
    call.attrs.push_back(attr("dilations", std::vector<int64_t>{p.dh, p.dw}));
  } else {
    call.attrs.push_back(attr("count_include_pad", int64_t{p.include_pad}));
  }
  call.threads = threads;
  auto r = run_op(call);
  ASSERT_TRUE(r.ok()) << what << ": " << r.status().to_string();
  const Tensor& y = (*r)[0].tensor();
  ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(y.data<float>()[i])) << what << " at " << i;
    } else {
      ASSERT_NEAR(y.data<float>()[i], want[i], 1e-5) << what << " at " << i;
    }
  }
}

// The float path pools each plane separably over the flat plane (rows, then
// columns, then a gather), in place when every window lies inside the
// plane, else from a padded copy: squeezenet's 3x3 stride-2 ceil_mode pools
// on odd maps, 2x2 stride 2, pads, strides 3, dilations, maps narrower and
// wider than a vector, one to three threads, max and average.
TEST(PoolTest, SeparablePathOverShapes) {
  std::mt19937 rng(32);
  const Pool2D cases[] = {
      {3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true, false},   // squeezenet
      {3, 3, 2, 2, 1, 1, 0, 0, 0, 0, false, false},
      {2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false, false},  // 2x2 stride 2
      {2, 2, 2, 2, 1, 1, 0, 0, 0, 0, true, false},
      {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true},   // resnet stem, padded
      {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false},  // stride 1, same
      {5, 3, 3, 2, 1, 1, 2, 1, 1, 2, true, true},    // uneven pads, stride 3
      {3, 3, 2, 1, 2, 2, 2, 0, 1, 2, false, false},  // dilated (max only)
      {1, 4, 1, 3, 1, 1, 0, 1, 0, 2, true, false},
  };
  const int64_t maps[][2] = {{13, 13}, {27, 27}, {55, 55}, {8, 40}, {33, 6}, {111, 17}};
  int n = 0;
  for (const Pool2D& p : cases)
    for (const auto& hw : maps)
      for (bool max : {true, false}) {
        if (!max && (p.dh > 1 || p.dw > 1)) continue;
        if ((p.kh - 1) * p.dh + 1 > hw[0] + p.pt + p.pbm || (p.kw - 1) * p.dw + 1 > hw[1] + p.pl + p.pr) continue;
        Tensor x = random_tensor({1, 3 + n % 3, hw[0], hw[1]}, rng);
        check_pool2d(p, x, max, 1 + n % 3, "case " + std::to_string(n) + " map " + std::to_string(hw[0]) + "x" +
                                                std::to_string(hw[1]) + (max ? " max" : " average"));
        ++n;
      }
  EXPECT_GT(n, 90);
}

// A NaN wins its windows and only its windows.
TEST(PoolTest, SeparablePathPropagatesNaN) {
  std::mt19937 rng(33);
  Tensor x = random_tensor({1, 2, 9, 9}, rng);
  x.data<float>()[4 * 9 + 4] = NAN;
  x.data<float>()[81 + 8] = NAN;  // channel 1, row 0, last column
  for (const Pool2D& p : {Pool2D{3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true, false}, Pool2D{3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false}}) {
    // naive_pool skips NaN (v > best is false): its windows want NaN.
    const int64_t planes = 2, h = 9, w = 9;
    std::vector<float> want;
    std::vector<int64_t> idx;
    for (int64_t plane = 0; plane < planes; ++plane) naive_pool(p, x.data<float>() + plane * h * w, h, w, true, &want, &idx);
    testing::OpCall call;
    call.op_type = "MaxPool";
    call.inputs = {x};
    call.attrs = {attr("kernel_shape", std::vector<int64_t>{3, 3}), attr("strides", std::vector<int64_t>{p.sh, p.sw}),
                  attr("pads", std::vector<int64_t>{p.pt, p.pl, p.pbm, p.pr}), attr("ceil_mode", int64_t{p.ceil})};
    auto r = run_op(call);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = (*r)[0].tensor();
    const int64_t oh = out_dim(h, 3, p.sh, 1, p.pt, p.pbm, p.ceil), ow = out_dim(w, 3, p.sw, 1, p.pl, p.pr, p.ceil);
    for (int64_t c = 0; c < planes; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t r0 = i * p.sh - p.pt, c0 = j * p.sw - p.pl;
          const int64_t nr = c == 0 ? 4 : 0, nc = c == 0 ? 4 : 8;
          const bool covers = r0 <= nr && nr <= r0 + 2 && c0 <= nc && nc <= c0 + 2;
          const size_t at = static_cast<size_t>((c * oh + i) * ow + j);
          if (covers) {
            EXPECT_TRUE(std::isnan(y.data<float>()[at])) << c << " " << i << "," << j;
          } else {
            EXPECT_EQ(y.data<float>()[at], want[at]) << c << " " << i << "," << j;
          }
        }
  }
}

// Runs the phase-row kernels of one ISA (1 AVX-512, 2 AVX2) while alive.
struct ForcedIsa {
  explicit ForcedIsa(int isa) : ok(kernels::depthwise_rows_force_isa(isa)) {}
  ~ForcedIsa() { (void)kernels::depthwise_rows_force_isa(0); }
  bool ok;
};

// Whether the op on an h x w map takes the phase-row kernels (pool_rows.h).
bool on_phase_rows(const Pool2D& p, int64_t h, int64_t w, bool max) {
  kernels::PoolRows2D g;
  g.in_h = h;
  g.in_w = w;
  g.out_h = out_dim(h, p.kh, p.sh, p.dh, p.pt, p.pbm, p.ceil);
  g.out_w = out_dim(w, p.kw, p.sw, p.dw, p.pl, p.pr, p.ceil);
  g.k_h = p.kh;
  g.k_w = p.kw;
  g.s_h = p.sh;
  g.s_w = p.sw;
  g.p_t = p.pt;
  g.p_l = p.pl;
  g.is_max = max;
  const float one = 1.f;
  g.row_count = g.col_count = &one;
  return p.dh == 1 && p.dw == 1 && kernels::pool_rows_applies(g);
}

// The phase-row kernels for each ISA the CPU has: kernels 2/3/5/7 (square
// and not), strides 1/2/3, pads, ceil_mode overhang, count_include_pad,
// output widths around the vector widths (8, 16) and their pairs, odd
// plane counts, one to three threads, max and average.
TEST(PoolTest, PhaseRowPathOverShapes) {
  std::mt19937 rng(34);
  const Pool2D cases[] = {
      {3, 3, 2, 2, 1, 1, 0, 0, 0, 0, true, false},   // squeezenet, googlenet
      {3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, true},   // resnet stem
      {3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false},   // inception branch pool (average only)
      {3, 3, 1, 2, 1, 1, 1, 1, 1, 1, true, false},
      {2, 2, 2, 2, 1, 1, 0, 0, 0, 0, true, false},
      {5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false, false},
      {7, 3, 3, 2, 1, 1, 3, 0, 1, 2, true, true},
      {2, 7, 1, 3, 1, 1, 1, 3, 0, 2, false, true},
  };
  const int64_t widths[] = {8, 9, 15, 16, 17, 31, 33, 56, 112};
  int run = 0, isas = 0;
  for (int isa : {1, 2}) {
    ForcedIsa forced(isa);
    if (!forced.ok) continue;
    ++isas;
    int n = 0;
    for (const Pool2D& p : cases)
      for (int64_t ow : widths)
        for (bool max : {true, false}) {
          const int64_t w = (ow - 1) * p.sw + p.kw - p.pl - p.pr + (n % 2), h = 5 + (n * 7) % 20;
          ++n;
          if (w < p.kw - p.pl - p.pr || w < 1 || !on_phase_rows(p, h, w, max)) continue;
          Tensor x = random_tensor({1 + n % 2, 1 + (n * 2) % 5, h, w}, rng);
          check_pool2d(p, x, max, 1 + n % 3, "isa " + std::to_string(isa) + " case " + std::to_string(n) + " map " +
                                                 std::to_string(h) + "x" + std::to_string(w) + (max ? " max" : " average"));
          ++run;
        }
    EXPECT_GT(n, 0);
  }
  if (run == 0) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
  EXPECT_GT(run, 60 * isas);  // 126 cases per ISA level run (KILN_CPU_ISA may cap it to one)
}

// On the phase-row kernels too, a NaN wins its windows and only those, and
// -inf padding never reaches an output.
TEST(PoolTest, PhaseRowPathPropagatesNaN) {
  int run = 0;
  for (int isa : {1, 2}) {
    ForcedIsa forced(isa);
    if (!forced.ok) continue;
    std::mt19937 rng(35);
    const int64_t h = 12, w = 40;
    Tensor x = random_tensor({1, 2, h, w}, rng);
    const int64_t nans[2][2] = {{5, 17}, {0, w - 1}};  // (row, column) in channel 0 and 1
    for (int64_t c = 0; c < 2; ++c) x.data<float>()[(c * h + nans[c][0]) * w + nans[c][1]] = NAN;
    for (const Pool2D& p : {Pool2D{3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false}, Pool2D{3, 3, 1, 2, 1, 1, 1, 1, 1, 1, false, false}}) {
      ASSERT_TRUE(on_phase_rows(p, h, w, true));
      std::vector<float> want;
      std::vector<int64_t> idx;
      for (int64_t c = 0; c < 2; ++c) naive_pool(p, x.data<float>() + c * h * w, h, w, true, &want, &idx);
      testing::OpCall call;
      call.op_type = "MaxPool";
      call.inputs = {x};
      call.attrs = {attr("kernel_shape", std::vector<int64_t>{3, 3}), attr("strides", std::vector<int64_t>{p.sh, p.sw}),
                    attr("pads", std::vector<int64_t>{p.pt, p.pl, p.pbm, p.pr}), attr("ceil_mode", int64_t{p.ceil})};
      auto r = run_op(call);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const Tensor& y = (*r)[0].tensor();
      const int64_t oh = out_dim(h, 3, p.sh, 1, p.pt, p.pbm, p.ceil), ow = out_dim(w, 3, p.sw, 1, p.pl, p.pr, p.ceil);
      ASSERT_EQ(y.numel(), 2 * oh * ow);
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t r0 = i * p.sh - p.pt, c0 = j * p.sw - p.pl;
            const bool covers = r0 <= nans[c][0] && nans[c][0] <= r0 + 2 && c0 <= nans[c][1] && nans[c][1] <= c0 + 2;
            const size_t at = static_cast<size_t>((c * oh + i) * ow + j);
            const std::string where = "isa " + std::to_string(isa) + " s_w " + std::to_string(p.sw) + " channel " +
                                      std::to_string(c) + " at " + std::to_string(i) + "," + std::to_string(j);
            if (covers) {
              EXPECT_TRUE(std::isnan(y.data<float>()[at])) << where;
            } else {
              EXPECT_EQ(y.data<float>()[at], want[at]) << where;
            }
          }
      ++run;
    }
  }
  if (run == 0) GTEST_SKIP() << "this CPU has neither AVX-512 nor AVX2+FMA";
}

TEST(PoolTest, ColumnMajorIndices) {
  // 2x3 plane, global 2x3 max at (1, 0): row-major 3, column-major 0 * 2 + 1 = 1.
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 9, 4, 5}, {1, 1, 2, 3});
  testing::OpCall call;
  call.op_type = "MaxPool";
  call.inputs = {x};
  call.attrs = {attr("kernel_shape", std::vector<int64_t>{2, 3}), attr("storage_order", int64_t{1})};
  call.num_outputs = 2;
  auto r = run_op(call);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].tensor().data<float>()[0], 9.f);
  EXPECT_EQ((*r)[1].tensor().data<int64_t>()[0], 1);
}

TEST(PoolTest, SamePaddingAndOneDThreeD) {
  // 1-D average, SAME_UPPER, k=2: windows [1,2], [3,4], [5, pad] -> 1.5, 3.5, 5
  auto y1 = run_op1("AveragePool", {Tensor::from_vector<float>({1, 2, 3, 4, 5}, {1, 1, 5})},
                    {attr("kernel_shape", std::vector<int64_t>{2}), attr("strides", std::vector<int64_t>{2}),
                     attr("auto_pad", "SAME_UPPER")});
  ASSERT_TRUE(y1.ok()) << y1.status().to_string();
  EXPECT_EQ(values(*y1), (std::vector<float>{1.5f, 3.5f, 5.f}));
  // SAME_LOWER puts the pad first: [pad, 1], [2, 3], [4, 5]
  auto y2 = run_op1("AveragePool", {Tensor::from_vector<float>({1, 2, 3, 4, 5}, {1, 1, 5})},
                    {attr("kernel_shape", std::vector<int64_t>{2}), attr("strides", std::vector<int64_t>{2}),
                     attr("auto_pad", "SAME_LOWER")});
  ASSERT_TRUE(y2.ok());
  EXPECT_EQ(values(*y2), (std::vector<float>{1.f, 2.5f, 4.5f}));
  // 3-D max over a 2x2x2 cube of 0..7 with kernel 2: one output, 7.
  std::vector<float> cube(8);
  for (int i = 0; i < 8; ++i) cube[static_cast<size_t>(i)] = static_cast<float>(i);
  auto y3 = run_op1("MaxPool", {Tensor::from_vector<float>(cube, {1, 1, 2, 2, 2})},
                    {attr("kernel_shape", std::vector<int64_t>{2, 2, 2})});
  ASSERT_TRUE(y3.ok());
  EXPECT_EQ(y3->shape(), (Shape{1, 1, 1, 1, 1}));
  EXPECT_EQ(y3->data<float>()[0], 7.f);
}

TEST(PoolTest, IntegerAndHalfMaxPool) {
  auto y = run_op1("MaxPool", {Tensor::from_vector<uint8_t>({1, 200, 3, 4}, {1, 1, 2, 2})},
                   {attr("kernel_shape", std::vector<int64_t>{2, 2})}, 12);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->data<uint8_t>()[0], 200);
  auto yh = run_op1("MaxPool", {Tensor::from_vector<Float16>({Float16(1.f), Float16(-2.f)}, {1, 1, 2})},
                    {attr("kernel_shape", std::vector<int64_t>{1})});
  ASSERT_TRUE(yh.ok());
  EXPECT_EQ(static_cast<float>(yh->data<Float16>()[1]), -2.f);
}

TEST(PoolTest, LpPool) {
  // p=2 over [3, 4] -> 5; p=1 -> 7 (absolute values)
  Tensor x = Tensor::from_vector<float>({3, -4}, {1, 1, 2});
  auto y2 = run_op1("LpPool", {x}, {attr("kernel_shape", std::vector<int64_t>{2})});
  ASSERT_TRUE(y2.ok()) << y2.status().to_string();
  EXPECT_NEAR(y2->data<float>()[0], 5.f, 1e-6);
  auto y1 = run_op1("LpPool", {x}, {attr("kernel_shape", std::vector<int64_t>{2}), attr("p", int64_t{1})});
  ASSERT_TRUE(y1.ok());
  EXPECT_NEAR(y1->data<float>()[0], 7.f, 1e-6);
  auto g = run_op1("GlobalLpPool", {x}, {attr("p", int64_t{2})});
  ASSERT_TRUE(g.ok());
  EXPECT_NEAR(g->data<float>()[0], 5.f, 1e-6);
}

TEST(PoolTest, GlobalPools) {
  std::mt19937 rng(32);
  Tensor x = random_tensor({2, 5, 7, 9}, rng);
  auto avg = run_op1("GlobalAveragePool", {x});
  auto mx = run_op1("GlobalMaxPool", {x});
  ASSERT_TRUE(avg.ok() && mx.ok());
  EXPECT_EQ(avg->shape(), (Shape{2, 5, 1, 1}));
  for (int64_t plane = 0; plane < 10; ++plane) {
    double s = 0;
    float m = -INFINITY;
    for (int64_t i = 0; i < 63; ++i) {
      const float v = x.data<float>()[plane * 63 + i];
      s += v;
      m = std::max(m, v);
    }
    EXPECT_NEAR(avg->data<float>()[plane], s / 63, 1e-6);
    EXPECT_EQ(mx->data<float>()[plane], m);
  }
  Tensor nan = Tensor::from_vector<float>({1.f, NAN, 3.f}, {1, 1, 3});
  auto mn = run_op1("GlobalMaxPool", {nan});
  ASSERT_TRUE(mn.ok());
  EXPECT_TRUE(std::isnan(mn->data<float>()[0]));
  auto ad = run_op1("GlobalAveragePool", {Tensor::from_vector<double>({1, 2, 3, 6}, {1, 1, 2, 2})});
  ASSERT_TRUE(ad.ok());
  EXPECT_DOUBLE_EQ(ad->data<double>()[0], 3.0);
}

TEST(PoolTest, MaxUnpoolInvertsMaxPool) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  testing::OpCall pool;
  pool.op_type = "MaxPool";
  pool.inputs = {x};
  pool.attrs = {attr("kernel_shape", std::vector<int64_t>{2, 2}), attr("strides", std::vector<int64_t>{2, 2})};
  pool.num_outputs = 2;
  auto p = run_op(pool);
  ASSERT_TRUE(p.ok());
  auto un = run_op1("MaxUnpool", {(*p)[0], (*p)[1]},
                    {attr("kernel_shape", std::vector<int64_t>{2, 2}), attr("strides", std::vector<int64_t>{2, 2})}, 11);
  ASSERT_TRUE(un.ok()) << un.status().to_string();
  EXPECT_EQ(values(*un), (std::vector<float>{0, 0, 0, 0, 0, 6, 0, 8, 0, 0, 0, 0, 0, 14, 0, 16}));
  // Larger output_shape keeps coordinates.
  auto big = run_op1("MaxUnpool", {(*p)[0], (*p)[1], Tensor::from_vector<int64_t>({1, 1, 5, 5})},
                     {attr("kernel_shape", std::vector<int64_t>{2, 2}), attr("strides", std::vector<int64_t>{2, 2})}, 11);
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_EQ(big->data<float>()[1 * 5 + 1], 6.f);
  EXPECT_EQ(big->data<float>()[3 * 5 + 3], 16.f);
  // Out-of-range index.
  auto bad = run_op1("MaxUnpool", {(*p)[0], Tensor::from_vector<int64_t>({0, 1, 2, 99}, {1, 1, 2, 2})},
                     {attr("kernel_shape", std::vector<int64_t>{2, 2}), attr("strides", std::vector<int64_t>{2, 2})}, 11);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input 1 (I)"), std::string::npos);
}

TEST(PoolTest, RejectsBadAttributes) {
  Tensor x = Tensor::zeros(DType::kFloat32, {1, 1, 4, 4});
  auto e1 = run_op1("MaxPool", {x});
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.status().message().find("kernel_shape"), std::string::npos);
  auto e2 = run_op1("MaxPool", {x}, {attr("kernel_shape", std::vector<int64_t>{2})});
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.status().message().find("spatial"), std::string::npos);
  auto e3 = run_op1("AveragePool", {x}, {attr("kernel_shape", std::vector<int64_t>{5, 5})});
  ASSERT_FALSE(e3.ok());
  EXPECT_NE(e3.status().message().find("smaller than the kernel"), std::string::npos);
  auto e4 = run_op1("MaxPool", {x}, {attr("kernel_shape", std::vector<int64_t>{2, 2}), attr("strides", std::vector<int64_t>{0, 1})});
  ASSERT_FALSE(e4.ok());
  auto e5 = run_op1("MaxPool", {x}, {attr("kernel_shape", std::vector<int64_t>{2, 2}), attr("storage_order", int64_t{2})});
  ASSERT_FALSE(e5.ok());
  auto e6 = run_op1("GlobalAveragePool", {Tensor::zeros(DType::kFloat32, {3})});
  ASSERT_FALSE(e6.ok());
}

}  // namespace
}  // namespace kiln
