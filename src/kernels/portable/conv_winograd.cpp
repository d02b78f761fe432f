// Winograd F(4x4, 3x3) convolution (see conv_winograd.h).
//
// Layouts, per group of images run together (their tiles side by side):
//   tiles    numbered t = (image, tile row, tile column), T of them;
//   V[xi]    Cin x (columns of one input pass), the transformed input at
//            position xi = 6 * i + j, in the SGEMM engine's packed-B layout
//            when it can be (VLayout), so the GEMM takes it as pre-packed;
//   M[xi]    Cout x (columns of one GEMM chunk), the GEMM results.
// The input transform reads each channel from a zero-bordered copy (the
// pads, and the rows/columns a partial last tile reads past the input), so
// gathering a tile's 6x6 patch needs no checks. Transforms run on kL tiles
// at a time, one float per tile in each vector lane.
#include "kernels/portable/conv_winograd.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "kernels/portable/util/gemm_prepack.h"
#include "kernels/portable/util/scratch.h"
#include "kernels/prepack.h"

namespace kiln::kernels {

namespace {

constexpr int64_t kL = 16;  // tiles per transform block: one AVX-512 vector
// Images run together until this many tiles (fuller GEMM columns), within
// kMaxScratchFloats of bordered input.
constexpr int64_t kTargetTiles = 64;
constexpr int64_t kMaxScratchFloats = int64_t{8} << 20;  // 32 MiB
// kAuto: Cin and Cout at least kMinChannels, and the GEMM work relative to
// im2col's, r = 36 * round_up(tiles, 32) / (9 * outputs) per group of
// images (GEMM columns are padded to the widest microkernel's 32), at most
// kMaxRatio (kMaxRatioFewChannels when Cin < 32: the transforms weigh more
// against a short K). Measured (AVX-512, 1 thread; Winograd / im2col time):
// r 0.25-0.35 gives 0.41-0.79 (64ch 56x56 0.41, 128ch 28x28 0.47, 16->64
// 55x55 0.73), 256ch 14x14 (r 0.65) 0.68, 64ch 14x14 0.83, but 16ch 14x14
// (r 0.65) 1.02, 48->192 13x13 (r 0.76) 1.24, 128ch 7x7 (r 2.6) 1.8.
constexpr int64_t kMinChannels = 16;
constexpr double kMaxRatio = 0.7, kMaxRatioFewChannels = 0.6;
// The small-map (lanes) path, at most 16 tiles (measured, 1 thread; Winograd
// / im2col time): 256ch 14x14 0.49, 64ch 14x14 0.47, 16ch 14x14 0.42,
// 48->192 13x13 0.68, 64->256 13x13 0.64, 128ch 7x7 0.56, 512ch 7x7 0.89.
constexpr int64_t kMaxStreamedLaneBytes = int64_t{16} << 20;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Tiles the lanes path computes for `tiles` (its kernels take 4, 8 or 16).
int64_t lane_tiles(int64_t tiles) { return tiles <= 4 ? 4 : (tiles <= 8 ? 8 : 16); }

int64_t images_per_group(int64_t n, int64_t tiles_per_image, int64_t cin) {
  const int64_t group = std::min(n, std::max<int64_t>(1, (kTargetTiles + tiles_per_image - 1) / tiles_per_image));
  // The group's zero-bordered input: (4 rows + 2) x (4 columns + 2) per tile row / column.
  return std::max<int64_t>(1, std::min(group, kMaxScratchFloats / (cin * 16 * tiles_per_image + 1)));
}

// KILN_WINOGRAD=off|always|auto (the default) sets the starting mode.
WinogradMode initial_mode() {
  const char* env = std::getenv("KILN_WINOGRAD");
  if (env && std::strcmp(env, "off") == 0) return WinogradMode::kOff;
  if (env && std::strcmp(env, "always") == 0) return WinogradMode::kAlways;
  return WinogradMode::kAuto;
}

WinogradMode g_mode = initial_mode();

// U[xi][co][ci] = (G g G^T)[i][j] for g = W[co][ci], in double.
std::vector<float> transform_weights(const float* w, int64_t cout, int64_t cin) {
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};
  std::vector<float> u(static_cast<size_t>(36 * cout * cin));
  for (int64_t co = 0; co < cout; ++co) {
    for (int64_t ci = 0; ci < cin; ++ci) {
      const float* g = w + (co * cin + ci) * 9;
      double t[6][3];
      for (int i = 0; i < 6; ++i)
        for (int k = 0; k < 3; ++k) t[i][k] = G[i][0] * g[k] + G[i][1] * g[3 + k] + G[i][2] * g[6 + k];
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j)
          u[static_cast<size_t>(((i * 6 + j) * cout + co) * cin + ci)] =
              static_cast<float>(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
    }
  }
  return u;
}

// B^T applied to 6 rows of kL lanes: out[k * os] = sum_r B^T[k][r] in[r * is].
[[gnu::always_inline]] inline void bt6(const float* in, int64_t is, float* out, int64_t os) {
  for (int64_t l = 0; l < kL; ++l) {
    const float d0 = in[l], d1 = in[is + l], d2 = in[2 * is + l], d3 = in[3 * is + l], d4 = in[4 * is + l],
                d5 = in[5 * is + l];
    const float a = d4 - 4.f * d2, b = d3 - 4.f * d1;
    const float c = d4 - d2, e = 2.f * (d3 - d1);
    out[l] = 4.f * d0 - 5.f * d2 + d4;
    out[os + l] = a + b;
    out[2 * os + l] = a - b;
    out[3 * os + l] = c + e;
    out[4 * os + l] = c - e;
    out[5 * os + l] = 4.f * d1 - 5.f * d3 + d5;
  }
}

// A^T applied to 6 rows of kL lanes: out[k * os] = sum_r A^T[k][r] in[r * is].
[[gnu::always_inline]] inline void at6(const float* in, int64_t is, float* out, int64_t os) {
  for (int64_t l = 0; l < kL; ++l) {
    const float m0 = in[l], m1 = in[is + l], m2 = in[2 * is + l], m3 = in[3 * is + l], m4 = in[4 * is + l],
                m5 = in[5 * is + l];
    const float s = m1 + m2, t = m1 - m2, p = m3 + m4, q = m3 - m4;
    out[l] = m0 + s + p;
    out[os + l] = t + 2.f * q;
    out[2 * os + l] = s + 4.f * p;
    out[3 * os + l] = t + 8.f * q + m5;
  }
}

// d[(6 i + j) * kL + k] = p[i * wp + 4 k + j] for k < len: the patches of
// `len` tiles side by side in one tile row (4-way de-interleaving loads).
KILN_ISA_BODY
void gather_run_body(const float* p, int64_t wp, int64_t len, float* d) {
  for (int64_t i = 0; i < 6; ++i) {
    const float* src = p + i * wp;
    float* dst = d + i * 6 * kL;
    for (int64_t k = 0; k < len; ++k) {
      const float a0 = src[4 * k], a1 = src[4 * k + 1], a2 = src[4 * k + 2], a3 = src[4 * k + 3];
      dst[k] = a0;
      dst[kL + k] = a1;
      dst[2 * kL + k] = a2;
      dst[3 * kL + k] = a3;
    }
    // Columns 4 and 5 of a tile are columns 0 and 1 of the next one.
    for (int64_t k = 0; k + 1 < len; ++k) {
      dst[4 * kL + k] = dst[k + 1];
      dst[5 * kL + k] = dst[kL + k + 1];
    }
    dst[4 * kL + len - 1] = src[4 * len];
    dst[5 * kL + len - 1] = src[4 * len + 1];
  }
}
KILN_ISA_DISPATCH(gather_run, gather_run_body);

// One block of up to kL tiles of one channel: gathers each tile's 6x6 patch
// from the zero-bordered plane (`off`: patch starts, row stride wp; `run`:
// tiles side by side from each one on), applies B^T . B and writes
// V[xi][l] = v[xi * vs + l] for all kL lanes (zeros past the nt tiles).
KILN_ISA_BODY
void input_block_body(const float* plane, int64_t wp, const int64_t* off, const uint8_t* run, int64_t nt, float* v,
                 int64_t vs) {
  alignas(64) float d[36 * kL];
  alignas(64) float t[36 * kL];
  for (int64_t l = 0; l < nt;) {
    const int64_t len = std::min<int64_t>(run[l], nt - l);
    gather_run(plane + off[l], wp, len, d + l);
    l += len;
  }
  for (int64_t e = 0; e < 36; ++e)
    for (int64_t l = nt; l < kL; ++l) d[e * kL + l] = 0.f;
  for (int64_t i = 0; i < 6; ++i) bt6(d + i * 6 * kL, kL, t + i * 6 * kL, kL);  // along x
  for (int64_t j = 0; j < 6; ++j) {                                             // along y
    alignas(64) float col[6 * kL];
    bt6(t + j * kL, 6 * kL, col, kL);
    for (int64_t i = 0; i < 6; ++i) std::memcpy(v + (i * 6 + j) * vs, col + i * kL, kL * sizeof(float));
  }
}
KILN_ISA_DISPATCH(input_block, input_block_body);

// One block of kL tiles of one output channel: o[(4 r + c) * kL + l] =
// (A^T M A)[r][c] + bias, clamped to [lo, hi] when `clamp`.
KILN_ISA_BODY
void output_block_body(const float* m, int64_t ms, float bias, bool clamp, float lo, float hi, float* o) {
  alignas(64) float s[24 * kL];  // 4 rows x 6 columns
  for (int64_t j = 0; j < 6; ++j) at6(m + j * ms, 6 * ms, s + j * kL, 6 * kL);  // along y
  for (int64_t r = 0; r < 4; ++r) at6(s + r * 6 * kL, kL, o + r * 4 * kL, kL);  // along x
  for (int64_t e = 0; e < 16 * kL; ++e) {
    float x = o[e] + bias;
    if (clamp) x = std::min(std::max(x, lo), hi);
    o[e] = x;
  }
}
KILN_ISA_DISPATCH(output_block, output_block_body);

// Where each tile of a group of images reads and writes.
struct TileTable {
  int64_t ht = 0, wt = 0;        // tiles per column / row of one image
  int64_t hp = 0, wp = 0;        // zero-bordered plane of one image
  int64_t count = 0, padded = 0;  // T, Tp
  std::vector<int64_t> in_off;    // patch start in the group's bordered planes
  std::vector<int64_t> out_off;   // first output in Y, relative to channel 0 of image 0
  std::vector<uint8_t> rows, cols;  // valid outputs of the tile (1..4)
  // Tiles from this one on along its tile row (at most 255): their patches
  // and, for full tiles, their outputs are 4 columns apart.
  std::vector<uint8_t> in_run, out_run;
};

TileTable make_tiles(const WindowGeometry& g, int64_t images, int64_t cout) {
  TileTable tt;
  const int64_t oh = g.out[0], ow = g.out[1];
  tt.ht = (oh + 3) / 4;
  tt.wt = (ow + 3) / 4;
  tt.hp = 4 * tt.ht + 2;
  tt.wp = 4 * tt.wt + 2;
  tt.count = images * tt.ht * tt.wt;
  tt.padded = round_up(tt.count, kL);
  const auto n = static_cast<size_t>(tt.padded);
  tt.in_off.assign(n, 0);
  tt.out_off.assign(n, 0);
  tt.rows.assign(n, 0);
  tt.cols.assign(n, 0);
  size_t t = 0;
  for (int64_t img = 0; img < images; ++img)
    for (int64_t ty = 0; ty < tt.ht; ++ty)
      for (int64_t tx = 0; tx < tt.wt; ++tx, ++t) {
        tt.in_off[t] = (img * tt.hp + 4 * ty) * tt.wp + 4 * tx;
        tt.out_off[t] = img * cout * oh * ow + 4 * ty * ow + 4 * tx;
        tt.rows[t] = static_cast<uint8_t>(std::min<int64_t>(4, oh - 4 * ty));
        tt.cols[t] = static_cast<uint8_t>(std::min<int64_t>(4, ow - 4 * tx));
      }
  tt.in_run.assign(n, 0);
  tt.out_run.assign(n, 0);
  for (size_t i = static_cast<size_t>(tt.count); i-- > 0;) {
    const bool row_end = (i + 1) % static_cast<size_t>(tt.wt) == 0;
    tt.in_run[i] = static_cast<uint8_t>(row_end ? 1 : std::min(255, tt.in_run[i + 1] + 1));
    const bool full = tt.rows[i] == 4 && tt.cols[i] == 4;
    tt.out_run[i] = static_cast<uint8_t>(!full ? 0 : (row_end ? 1 : std::min(255, tt.out_run[i + 1] + 1)));
  }
  return tt;
}

// Copies one channel of `images` images of X (x: its plane in the first
// image; images are c_stride apart) into zero-bordered planes:
// input row r lands on plane row r + pad_top, column x on x + pad_left.
void border_planes(const WindowGeometry& g, const TileTable& tt, const float* x, int64_t c_stride,
                   int64_t images, float* planes) {
  const int64_t ih = g.in[0], iw = g.in[1], pt = g.pad_begin[0], pl = g.pad_begin[1];
  std::fill_n(planes, images * tt.hp * tt.wp, 0.f);
  const int64_t cols = std::min(iw, tt.wp - pl);
  for (int64_t img = 0; img < images; ++img) {
    const float* src = x + img * c_stride;
    float* dst = planes + img * tt.hp * tt.wp;
    for (int64_t r = 0; r < ih && r + pt < tt.hp; ++r)
      if (cols > 0) std::memcpy(dst + (r + pt) * tt.wp + pl, src + r * iw, static_cast<size_t>(cols) * sizeof(float));
  }
}

// The outputs of `len` full tiles side by side in one tile row (o offset to
// the first one's lane) into Y rows starting at y (4-way interleaving stores).
KILN_ISA_BODY
void store_run_body(const float* o, int64_t len, float* y, int64_t ow) {
  for (int64_t r = 0; r < 4; ++r) {
    float* dst = y + r * ow;
    const float* src = o + 4 * r * kL;
    for (int64_t k = 0; k < len; ++k) {
      dst[4 * k] = src[k];
      dst[4 * k + 1] = src[kL + k];
      dst[4 * k + 2] = src[2 * kL + k];
      dst[4 * k + 3] = src[3 * kL + k];
    }
  }
}
KILN_ISA_DISPATCH(store_run, store_run_body);

// Writes one block of output tiles of one channel (o from output_block) into
// Y, adding Z (then clamping) when the epilogue has one.
void scatter_block(const TileTable& tt, int64_t t0, int64_t nt, const float* o, int64_t ow, int64_t plane_off,
                   float* y, const WinogradEpilogue& ep, bool clamp) {
  for (int64_t l = 0; l < nt; ++l) {
    const auto t = static_cast<size_t>(t0 + l);
    const int64_t base = plane_off + tt.out_off[t];
    const int rows = tt.rows[t], cols = tt.cols[t];
    if (tt.out_run[t] > 0 && !ep.z) {  // full tiles side by side
      const int64_t len = std::min<int64_t>(tt.out_run[t], nt - l);
      store_run(o + l, len, y + base, ow);
      l += len - 1;
      continue;
    }
    for (int r = 0; r < rows; ++r) {
      float* dst = y + base + r * ow;
      const float* zr = ep.z ? ep.z + base + r * ow : nullptr;
      for (int c = 0; c < cols; ++c) {
        float v = o[(4 * r + c) * kL + l];
        if (zr) {
          v += zr[c];
          if (clamp) v = std::min(std::max(v, ep.lo), ep.hi);
        }
        dst[c] = v;
      }
    }
  }
}

// Where V[xi] lives. When the SGEMM engine's B panels are a multiple of kL
// columns wide, V[xi] is written straight in its packed-B layout (gemm.h
// PackedMatrix) and handed to it as pre-packed, so no copy packs it again;
// otherwise V[xi] is a plain Cin x Tp matrix.
struct VLayout {
  bool packed = false;
  int64_t nr = kL, kc = 0;  // the engine's panel width and K block, when packed
  int64_t tp = 0;           // columns, padded
  int64_t cin = 0;
  int64_t plane() const { return cin * tp; }
  // Columns [j0, j0 + n) of V[xi] (at `vx`) as the GEMM's B; j0 % nr == 0.
  GemmOperand columns(const float* vx, int64_t j0, int64_t n, PackedMatrix& holder) const {
    if (!packed) return GemmOperand::raw(vx + j0, tp);
    const size_t bytes = static_cast<size_t>(cin * round_up(n, nr)) * sizeof(float);
    holder = PackedMatrix::from_bytes(false, cin, n, {reinterpret_cast<const uint8_t*>(vx + j0 * cin), bytes}, nullptr);
    return GemmOperand::prepacked(holder);
  }
  // Offset in a plane of the kL lanes of row c starting at column j0 (j0 % kL == 0).
  int64_t offset(int64_t c, int64_t j0) const {
    if (!packed) return c * tp + j0;
    const int64_t pc = c / kc * kc, kcb = std::min(kc, cin - pc);
    return pc * tp + (j0 / nr) * nr * kcb + (c - pc) * nr + j0 % nr;
  }
};

// The engine's B panel width and K block, from its layout key
// ("sgemm-b/<isa>/mr<MR>/nr<NR>/kc<KC>/v1"); 0, 0 when unreadable or of
// another layout version than the one VLayout writes (then V stays plain).
// Read per call: tests and benchmarks may switch the microkernel.
std::pair<int64_t, int64_t> engine_b_panels() {
  const std::string key = PackedMatrix::layout_key(false);
  const size_t nr = key.find("/nr"), kc = key.find("/kc");
  const bool v1 = key.size() >= 3 && key.compare(key.size() - 3, 3, "/v1") == 0;
  if (!v1 || key.rfind("sgemm-b/", 0) != 0 || nr == std::string::npos || kc == std::string::npos) return {0, 0};
  return {std::atoll(key.c_str() + nr + 3), std::atoll(key.c_str() + kc + 3)};
}

VLayout v_layout(int64_t cin, int64_t tiles) {
  VLayout l;
  l.cin = cin;
  const auto [nr, kc] = engine_b_panels();
  if (nr > 0 && nr % kL == 0 && kc >= cin) {  // one K block: column ranges of panels are contiguous
    const int64_t tp = round_up(tiles, nr);
    if (PackedMatrix::packed_bytes(false, cin, tiles) == static_cast<size_t>(cin * tp) * sizeof(float)) {
      l.packed = true;
      l.nr = nr;
      l.kc = kc;
      l.tp = tp;
      return l;
    }
  }
  l.tp = round_up(tiles, kL);
  return l;
}

// V = B^T d B for tiles [j0, j0 + cols) (V's column 0 is tile j0), over
// input channels. `planes` holds each channel's zero-bordered planes, or is
// null: then each channel of X's `images` images is bordered here.
void input_pass(const WindowGeometry& g, const TileTable& tt, const VLayout& vl, const float* planes, const float* x,
                int64_t images, int64_t j0, int64_t cols, float* v, ThreadPool* pool) {
  const int64_t channel = images * tt.hp * tt.wp, in_plane = g.in[0] * g.in[1];
  parallel_for(pool, vl.cin, 1, [&](int64_t c0, int64_t c1) {
    thread_local Scratch own;
    for (int64_t c = c0; c < c1; ++c) {
      const float* pc = planes ? planes + c * channel : nullptr;
      if (!pc) {
        float* p = own.get(channel);
        border_planes(g, tt, x + c * in_plane, vl.cin * in_plane, images, p);
        pc = p;
      }
      int64_t j = 0;
      for (; j < cols; j += kL)
        input_block(pc, tt.wp, tt.in_off.data() + j0 + j, tt.in_run.data() + j0 + j, std::min(kL, cols - j),
                    v + vl.offset(c, j), vl.plane());
      for (; j < round_up(cols, vl.nr); j += kL)  // padding columns the GEMM reads
        for (int64_t xi = 0; xi < 36; ++xi) std::fill_n(v + xi * vl.plane() + vl.offset(c, j), kL, 0.f);
    }
  });
}

// Y = A^T M A + bias (+ Z), clamped, for tiles [j0, j0 + cols) whose M is
// m[xi][c][t - j0] (row stride `width`), over output channels.
void output_pass(const WindowGeometry& g, const TileTable& tt, int64_t cout, int64_t j0, int64_t cols, const float* m,
                 int64_t width, int64_t y_off, float* y, const WinogradEpilogue& ep, ThreadPool* pool) {
  const bool clamp = ep.lo > -std::numeric_limits<float>::infinity() || ep.hi < std::numeric_limits<float>::infinity();
  const int64_t out_plane = g.out[0] * g.out[1];
  parallel_for(pool, cout, 1, [&](int64_t c0, int64_t c1) {
    alignas(64) float o[16 * kL];
    for (int64_t c = c0; c < c1; ++c) {
      const float bias = ep.bias ? ep.bias[c] : 0.f;
      for (int64_t t = 0; t < cols; t += kL) {
        output_block(m + c * width + t, cout * width, bias, clamp && !ep.z, ep.lo, ep.hi, o);
        scatter_block(tt, j0 + t, std::min(kL, cols - t), o, g.out[1], y_off + c * out_plane, y, ep, clamp);
      }
    }
  });
}

// The small-map path: with at most kL tiles (7x7 .. 16x16 maps), M[xi] =
// U[xi] V[xi] runs with 16 output channels in the vector lanes and every
// tile a broadcast, so no GEMM panel is mostly padding. U is laid out for it
// at load: ul[((xi * blocks + b) * Cin + ci) * kL + lane] = U[xi][16 b + lane][ci].
template <int T>
[[gnu::always_inline]] inline void lanes_gemm_t(const float* __restrict u, const float* __restrict v, int64_t cin,
                                                float* __restrict acc) {
  float a[T][kL];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t)
    for (int64_t l = 0; l < kL; ++l) a[t][l] = 0.f;
  for (int64_t ci = 0; ci < cin; ++ci) {
    const float* uc = u + ci * kL;
    const float* vc = v + ci * kL;
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const float b = vc[t];
      for (int64_t l = 0; l < kL; ++l) a[t][l] += uc[l] * b;
    }
  }
  for (int t = 0; t < static_cast<int>(kL); ++t)
    for (int64_t l = 0; l < kL; ++l) acc[t * kL + l] = t < T ? a[t][l] : 0.f;
}

// acc[t * kL + lane] = sum_ci u[ci * kL + lane] * v[ci * kL + t] for t <
// t_pad (4, 8 or 16 tiles; zeros past it).
KILN_ISA_BODY
void lanes_gemm_body(int64_t t_pad, const float* u, const float* v, int64_t cin, float* acc) {
  if (t_pad <= 4)
    lanes_gemm_t<4>(u, v, cin, acc);
  else if (t_pad <= 8)
    lanes_gemm_t<8>(u, v, cin, acc);
  else
    lanes_gemm_t<16>(u, v, cin, acc);
}
KILN_ISA_DISPATCH(lanes_gemm, lanes_gemm_body);

std::shared_ptr<float> aligned_floats(int64_t n) {
  return std::shared_ptr<float>(static_cast<float*>(aligned_alloc_bytes(static_cast<size_t>(std::max<int64_t>(1, n)) * sizeof(float))),
                                [](float* p) { aligned_free_bytes(p); });
}

}  // namespace

void set_winograd_mode(WinogradMode mode) { g_mode = mode; }
WinogradMode winograd_mode() { return g_mode; }

void WinogradConv::prepare(const KernelInit& init, const Tensor& w, int64_t group, const WindowAttrs& attrs) {
  u_.clear();
  if (g_mode == WinogradMode::kOff) return;
  if (w.dtype() != DType::kFloat32 || w.rank() != 4 || w.dim(2) != 3 || w.dim(3) != 3 || group != 1) return;
  for (int64_t s : attrs.strides)
    if (s != 1) return;
  for (int64_t d : attrs.dilations)
    if (d != 1) return;
  if (g_mode == WinogradMode::kAuto && (w.dim(0) < kMinChannels || w.dim(1) < kMinChannels)) return;
  cout_ = w.dim(0);
  cin_ = w.dim(1);
  attrs_ = attrs;
  const int64_t tiles = static_tiles_per_image(init);
  lanes_ = tiles > 0 && tiles <= kL;  // a small static map: the lanes path
  if (static_input_applies(init) == 0) return;  // the static input shape never gains: no transform
  if (lanes_) {
    prepare_lanes(init, w);
    return;
  }
  // Packed earlier (a .kiln program): the transform is not needed. The key is
  // pack_a_for's (gemm_prepack.cpp): slot, then the engine's layout.
  if (PrepackStore* store = active_prepack_store()) {
    for (int64_t xi = 0; xi < 36; ++xi) {
      PackedBytes found = store->find(init.node, "winograd-f4x4-v1/U" + std::to_string(xi) + "/" + PackedMatrix::layout_key(true));
      PackedMatrix pm = PackedMatrix::from_bytes(true, cout_, cin_, found.bytes, std::move(found.holder));
      if (pm.empty()) break;
      u_.push_back(std::move(pm));
    }
    if (u_.size() == 36) return;
    u_.clear();
  }
  const std::vector<float> u = transform_weights(w.data<float>(), cout_, cin_);
  u_.reserve(36);
  for (int64_t xi = 0; xi < 36; ++xi)
    u_.push_back(pack_a_for(init, "winograd-f4x4-v1/U" + std::to_string(xi), false, cout_, cin_,
                            u.data() + xi * cout_ * cin_, cin_));
}

void WinogradConv::prepare_lanes(const KernelInit& init, const Tensor& w) {
  const int64_t blocks = (cout_ + kL - 1) / kL, count = 36 * blocks * cin_ * kL;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  const std::string key = "winograd-f4x4-v1/U-lanes16";
  PrepackStore* store = active_prepack_store();
  if (store) {
    PackedBytes found = store->find(init.node, key);
    if (found.bytes.size() == bytes && reinterpret_cast<uintptr_t>(found.bytes.data()) % 64 == 0) {
      ul_holder_ = std::move(found.holder);
      ul_ = reinterpret_cast<const float*>(found.bytes.data());
      return;
    }
  }
  const std::vector<float> u = transform_weights(w.data<float>(), cout_, cin_);
  std::shared_ptr<float> ul = aligned_floats(count);
  for (int64_t xi = 0; xi < 36; ++xi)
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t ci = 0; ci < cin_; ++ci)
        for (int64_t l = 0; l < kL; ++l) {
          const int64_t co = b * kL + l;
          ul.get()[((xi * blocks + b) * cin_ + ci) * kL + l] = co < cout_ ? u[static_cast<size_t>((xi * cout_ + co) * cin_ + ci)] : 0.f;
        }
  ul_ = ul.get();
  ul_holder_ = ul;
  if (store) store->offer(init.node, key, PackedBytes{{reinterpret_cast<const uint8_t*>(ul_), bytes}, ul_holder_});
}

bool WinogradConv::applies(const WindowGeometry& g, int64_t n, const Shape& w_shape) const {
  if (!ready() || w_shape.rank() != 4 || w_shape[0] != cout_ || w_shape[1] != cin_) return false;
  return gains(g, n);
}

int64_t WinogradConv::static_tiles_per_image(const KernelInit& init) const {
  if (init.inputs.empty() || !init.inputs[0].type) return -1;
  const ir::ValueType& t = *init.inputs[0].type;
  if (!t.has_shape || t.dims.size() != 4 || !t.dims[2].known() || !t.dims[3].known()) return -1;
  const int64_t in[2] = {t.dims[2].value, t.dims[3].value};
  const int64_t k[2] = {3, 3};
  Result<WindowGeometry> g = resolve_window(attrs_, in, k);
  if (!g.ok() || g->out[0] < 1 || g->out[1] < 1) return -1;
  return ((g->out[0] + 3) / 4) * ((g->out[1] + 3) / 4);
}

int WinogradConv::static_input_applies(const KernelInit& init) const {
  if (init.inputs.empty() || !init.inputs[0].type) return -1;
  const ir::ValueType& t = *init.inputs[0].type;
  if (!t.has_shape || t.dims.size() != 4 || !t.dims[2].known() || !t.dims[3].known()) return -1;
  const int64_t in[2] = {t.dims[2].value, t.dims[3].value};
  const int64_t k[2] = {3, 3};
  Result<WindowGeometry> g = resolve_window(attrs_, in, k);
  if (!g.ok()) return -1;
  return gains(*g, t.dims[0].known() ? std::max<int64_t>(1, t.dims[0].value) : 1) ? 1 : 0;
}

bool WinogradConv::gains(const WindowGeometry& g, int64_t n) const {
  if (g.rank() != 2) return false;
  for (size_t d = 0; d < 2; ++d)
    if (g.kernel[d] != 3 || g.stride[d] != 1 || g.dilation[d] != 1) return false;
  if (g.out[0] < 1 || g.out[1] < 1) return false;
  const int64_t tiles_per_image = ((g.out[0] + 3) / 4) * ((g.out[1] + 3) / 4);
  if (lanes_ && tiles_per_image > kL) return false;  // the lanes path holds at most kL tiles
  if (g_mode == WinogradMode::kAlways) return true;
  if (cin_ < kMinChannels || cout_ < kMinChannels) return false;
  if (lanes_) {
    const int64_t images = std::min(std::max<int64_t>(1, n), kL / tiles_per_image);
    const int64_t t_pad = lane_tiles(images * tiles_per_image);
    const double r = 36.0 * static_cast<double>(t_pad) / (9.0 * static_cast<double>(images * g.out[0] * g.out[1]));
    // 4 tiles use each U value 4 times: a U past the caches makes the product
    // memory-bound (512 channels at 7x7: 0.89 of im2col's time for 4x the
    // weight bytes), not worth the memory.
    if (t_pad < 8 && 36 * cin_ * cout_ * static_cast<int64_t>(sizeof(float)) > kMaxStreamedLaneBytes) return false;
    return r <= kMaxRatio;
  }
  const int64_t images = images_per_group(std::max<int64_t>(1, n), tiles_per_image, cin_);
  const double r = 36.0 * static_cast<double>(round_up(images * tiles_per_image, 32)) /
                   (9.0 * static_cast<double>(images * g.out[0] * g.out[1]));
  return r <= (cin_ >= 32 ? kMaxRatio : kMaxRatioFewChannels);
}

bool WinogradConv::covers_static_input(const KernelInit& init) const {
  return ready() && static_input_applies(init) == 1;
}

// Columns of tiles per GEMM + output pass: M for them (36 x Cout x width)
// stays within about kMChunkFloats, so the output transform reads it from
// L2. The input pass runs ahead over up to kVFloats of V (all tiles of the
// usual maps: fewer synchronizations), so memory stays bounded on big maps.
constexpr int64_t kMChunkFloats = int64_t{128} << 10;  // 512 KiB
constexpr int64_t kVFloats = int64_t{2} << 20;         // 8 MiB

void WinogradConv::run(int64_t n, const WindowGeometry& g, const float* x, float* y, const WinogradEpilogue& ep,
                       ThreadPool* pool) const {
  if (lanes_) {
    run_lanes(n, g, x, y, ep, pool);
    return;
  }
  const int64_t tiles_per_image = ((g.out[0] + 3) / 4) * ((g.out[1] + 3) / 4);
  const int64_t group = images_per_group(n, tiles_per_image, cin_);
  const int64_t in_plane = g.in[0] * g.in[1], out_plane = g.out[0] * g.out[1];
  const int64_t width = std::max<int64_t>(32, kMChunkFloats / (36 * cout_) / 32 * 32);
  const int64_t span = std::max<int64_t>(1, kVFloats / (36 * cin_ * width)) * width;  // columns per input pass
  thread_local Scratch b_scratch, v_scratch, m_scratch;
  float* m = m_scratch.get(36 * cout_ * width);
  for (int64_t img0 = 0; img0 < n; img0 += group) {
    const int64_t images = std::min(group, n - img0);
    const TileTable tt = make_tiles(g, images, cout_);
    const float* xg = x + img0 * cin_ * in_plane;
    float* planes = nullptr;  // one input pass borders as it goes; several share one bordering
    if (tt.count > span) {
      const int64_t channel = images * tt.hp * tt.wp;
      planes = b_scratch.get(cin_ * channel);
      parallel_for(pool, cin_, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c)
          border_planes(g, tt, xg + c * in_plane, cin_ * in_plane, images, planes + c * channel);
      });
    }
    const VLayout vl = v_layout(cin_, std::min(span, round_up(tt.count, width)));
    float* v = v_scratch.get(36 * vl.plane());
    for (int64_t s0 = 0; s0 < tt.count; s0 += span) {
      const int64_t scols = std::min(span, tt.count - s0);
      input_pass(g, tt, vl, planes, xg, images, s0, scols, v, pool);
      for (int64_t j = 0; j < scols; j += width) {
        const int64_t cols = std::min(width, scols - j);
        // M[xi] = U[xi] V[xi] over these columns: 36 GEMMs of equal size.
        parallel_for(pool, 36, 1, [&](int64_t x0, int64_t x1) {
          for (int64_t xi = x0; xi < x1; ++xi) {
            PackedMatrix holder;
            const GemmOperand b = vl.columns(v + xi * vl.plane(), j, cols, holder);
            sgemm_ex(cout_, cols, cin_, 1.f, GemmOperand::prepacked(u_[static_cast<size_t>(xi)]), b, 0.f,
                     m + xi * cout_ * width, width, nullptr);
          }
        });
        output_pass(g, tt, cout_, s0 + j, cols, m, width, img0 * cout_ * out_plane, y, ep, pool);
      }
    }
    if (ep.act)  // over whole planes, after every chunk wrote its tiles
      parallel_for(pool, images * cout_, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) ep.act(y + (img0 * cout_ + p) * out_plane, out_plane, ep.act_ctx);
      });
  }
}

// The small-map path: images in groups of at most kL tiles; per group the
// input transform over input channels, the products over (xi, block of 16
// output channels), the output transform over output channels.
void WinogradConv::run_lanes(int64_t n, const WindowGeometry& g, const float* x, float* y,
                             const WinogradEpilogue& ep, ThreadPool* pool) const {
  const int64_t tiles_per_image = ((g.out[0] + 3) / 4) * ((g.out[1] + 3) / 4);
  const int64_t group = std::max<int64_t>(1, kL / tiles_per_image);
  const int64_t in_plane = g.in[0] * g.in[1], out_plane = g.out[0] * g.out[1];
  const int64_t blocks = (cout_ + kL - 1) / kL;
  VLayout vl;
  vl.cin = cin_;
  vl.tp = kL;
  thread_local Scratch v_scratch, m_scratch;
  float* v = v_scratch.get(36 * vl.plane());
  float* m = m_scratch.get(36 * cout_ * kL);
  for (int64_t img0 = 0; img0 < n; img0 += group) {
    const int64_t images = std::min(group, n - img0);
    const TileTable tt = make_tiles(g, images, cout_);
    input_pass(g, tt, vl, nullptr, x + img0 * cin_ * in_plane, images, 0, tt.count, v, pool);
    const int64_t t_pad = lane_tiles(tt.count);
    parallel_for(pool, 36 * blocks, 1, [&](int64_t j0, int64_t j1) {
      alignas(64) float acc[kL * kL];
      for (int64_t job = j0; job < j1; ++job) {
        const int64_t xi = job / blocks, b = job % blocks;
        lanes_gemm(t_pad, ul_ + (xi * blocks + b) * cin_ * kL, v + xi * vl.plane(), cin_, acc);
        const int64_t lanes = std::min(kL, cout_ - b * kL);
        for (int64_t l = 0; l < lanes; ++l) {
          float* row = m + (xi * cout_ + b * kL + l) * kL;
          for (int64_t t = 0; t < kL; ++t) row[t] = acc[t * kL + l];
        }
      }
    });
    output_pass(g, tt, cout_, 0, tt.count, m, kL, img0 * cout_ * out_plane, y, ep, pool);
    if (ep.act)
      parallel_for(pool, images * cout_, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) ep.act(y + (img0 * cout_ + p) * out_plane, out_plane, ep.act_ctx);
      });
  }
}

}  // namespace kiln::kernels
