#include "xnn_stem.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "xnn_silu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_XNN_X86 1
#endif

namespace kiln_xnnpack {

namespace {

constexpr size_t kPanel = 32;  // output channels per packed panel
constexpr size_t kMaxKernel = 11;

size_t panel_width(size_t cols) { return cols <= 16 ? 16 : 32; }

// What the tile kernels of one panel share; each call computes mr pixels of
// one output row (pixel i's tap t at base[off[t] + i * stride], its output
// channel 0 at c + i * ldc) times the panel. Read into locals first: the
// kernels' float stores could alias it.
struct Tile {
  size_t k;           // taps, at least 1
  const uint32_t* off;
  const float* b;     // the panel: k rows of `width` floats
  const float* bias;  // `width` floats
  size_t ldc, cvs;    // floats from one pixel to the next; from one block of 16 channels to the next
  size_t cols;        // real channels of the panel (stores past them are masked when mask_tail)
  bool mask_tail;
  bool hswish;        // HardSwish after the clamp: v * clamp(v + 3, 0, 6) / 6
  float lo, hi;
};

}  // namespace

bool stem_fits(const std::vector<int64_t>& i, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
  if (i.size() < 13 || x.size() != 4 || y.size() != 4) return false;
  const int64_t pt = i[0], pr = i[1], pb = i[2], pl = i[3], kh = i[4], kw = i[5], sh = i[6], sw = i[7];
  if (i[8] != 1 || i[9] != 1 || i[10] != 1 || i[11] != x[3] || i[12] != y[3]) return false;
  if (x[3] < 1 || x[3] > static_cast<int64_t>(kStemMaxCin) || x[0] != y[0] || x[0] < 1 || y[3] < 1) return false;
  if (kh < 1 || kw < 1 || kh > static_cast<int64_t>(kMaxKernel) || kw > static_cast<int64_t>(kMaxKernel) || kh * kw < 2)
    return false;
  if ((sh != 1 && sh != 2) || (sw != 1 && sw != 2)) return false;
  if (pt < 0 || pb < 0 || pl < 0 || pr < 0 || pt >= kh || pb >= kh || pl >= kw || pr >= kw) return false;
  if (x[1] + pt + pb < kh || x[2] + pl + pr < kw) return false;
  return y[1] >= 1 && y[2] >= 1 && y[1] == (x[1] + pt + pb - kh) / sh + 1 && y[2] == (x[2] + pl + pr - kw) / sw + 1;
}

#ifdef KILN_XNN_X86
namespace {

// AVX-512: MR pixels x W (16 or 32) channels, the accumulators in registers
// over all taps; S is the horizontal stride (the broadcasts' displacements
// are constants).
template <size_t MR, size_t W, size_t S>
__attribute__((target("avx512f,fma"))) void tile512(const Tile& t, const float* base, float* c) {
  constexpr size_t NZ = W / 16;
  const size_t k = t.k, ldc = t.ldc, cvs = t.cvs;
  const uint32_t* off = t.off;
  const float* b = t.b;
  const size_t tail = t.cols - (NZ - 1) * 16;
  const __mmask16 last = t.mask_tail && tail < 16 ? static_cast<__mmask16>((1u << tail) - 1) : __mmask16(0xFFFF);
  const __m512 lo = _mm512_set1_ps(t.lo), hi = _mm512_set1_ps(t.hi);
  const bool hswish = t.hswish;
  __m512 acc[MR][NZ];
#pragma GCC unroll 2
  for (size_t j = 0; j < NZ; ++j) {
    const __m512 bj = _mm512_loadu_ps(t.bias + j * 16);
#pragma GCC unroll 16
    for (size_t i = 0; i < MR; ++i) acc[i][j] = bj;
  }
  size_t kk = 0;
  do {  // k >= 1: no path skips the loop (GCC then kept the accumulators' first values on the stack too)
    const float* a = base + off[kk];
    __m512 bv[NZ];
    for (size_t j = 0; j < NZ; ++j) bv[j] = _mm512_loadu_ps(b + j * 16);
    for (size_t i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * S]);
      for (size_t j = 0; j < NZ; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
    b += W;
  } while (++kk < k);
#pragma GCC unroll 16
  for (size_t i = 0; i < MR; ++i) {
#pragma GCC unroll 2
    for (size_t j = 0; j < NZ; ++j) {
      __m512 v = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, acc[i][j], lo), hi);
      if (hswish) {
        const __m512 g = _mm512_maskz_min_ps(
            0xFFFF, _mm512_maskz_max_ps(0xFFFF, _mm512_add_ps(v, _mm512_set1_ps(3.0f)), _mm512_setzero_ps()),
            _mm512_set1_ps(6.0f));
        v = _mm512_mul_ps(_mm512_mul_ps(v, g), _mm512_set1_ps(1.0f / 6.0f));
      }
      _mm512_mask_storeu_ps(c + i * ldc + j * cvs, j + 1 == NZ ? last : __mmask16(0xFFFF), v);
    }
  }
}

// Lanes [0, n) of a vector (n in 1..8).
__attribute__((target("avx2"))) inline __m256i lanes(size_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// AVX2: MR pixels x NV vectors of 8 channels from panel column g0 (a multiple of 16).
template <size_t MR, size_t NV, size_t S>
__attribute__((target("avx2,fma"))) void tile256(const Tile& t, const float* base, float* c, size_t width,
                                               size_t g0) {
  const size_t k = t.k, ldc = t.ldc, cvs = t.cvs, cols = t.cols;
  const bool mask_tail = t.mask_tail, hswish = t.hswish;
  const uint32_t* off = t.off;
  const float* b = t.b + g0;
  const __m256 lo = _mm256_set1_ps(t.lo), hi = _mm256_set1_ps(t.hi);
  __m256 acc[MR][NV];
#pragma GCC unroll 2
  for (size_t j = 0; j < NV; ++j) {
    const __m256 bj = _mm256_loadu_ps(t.bias + g0 + j * 8);
#pragma GCC unroll 8
    for (size_t i = 0; i < MR; ++i) acc[i][j] = bj;
  }
  size_t kk = 0;
  do {
    const float* a = base + off[kk];
    __m256 bv[NV];
    for (size_t j = 0; j < NV; ++j) bv[j] = _mm256_loadu_ps(b + j * 8);
    for (size_t i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * S);
      for (size_t j = 0; j < NV; ++j) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
    b += width;
  } while (++kk < k);
  // Unrolled: indexed by a loop counter, the accumulators went through the
  // stack on every tap.
#pragma GCC unroll 2
  for (size_t j = 0; j < NV; ++j) {
    const size_t col = g0 + j * 8;
    const size_t real = mask_tail ? std::min<size_t>(8, cols > col ? cols - col : 0) : 8;
    const __m256i mask = lanes(real == 0 ? 1 : real);
    float* dst = c + col / 16 * cvs + col % 16;
#pragma GCC unroll 8
    for (size_t i = 0; i < MR; ++i) {
      __m256 v = _mm256_min_ps(_mm256_max_ps(acc[i][j], lo), hi);
      if (hswish) {
        const __m256 g =
            _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, _mm256_set1_ps(3.0f)), _mm256_setzero_ps()), _mm256_set1_ps(6.0f));
        v = _mm256_mul_ps(_mm256_mul_ps(v, g), _mm256_set1_ps(1.0f / 6.0f));
      }
      if (real == 8) _mm256_storeu_ps(dst + i * ldc, v);
      else if (real > 0) _mm256_maskstore_ps(dst + i * ldc, mask, v);
    }
  }
}

using Tile512 = void (*)(const Tile&, const float*, float*);
using Tile256 = void (*)(const Tile&, const float*, float*, size_t, size_t);

// Pixels per tile: 12 x 32 or 16 x 16 channels (24 or 16 zmm accumulators);
// AVX2: 6 x 16 (12 ymm).
constexpr size_t kMr512W32 = 12, kMr512W16 = 16, kMr256 = 6;

template <size_t W, size_t S, size_t... I>
constexpr std::array<Tile512, sizeof...(I)> tiles512(std::index_sequence<I...>) {
  return {&tile512<I + 1, W, S>...};
}
template <size_t NV, size_t S, size_t... I>
constexpr std::array<Tile256, sizeof...(I)> tiles256(std::index_sequence<I...>) {
  return {&tile256<I + 1, NV, S>...};
}

Tile512 pick512(size_t width, size_t s, size_t mr) {
  static constexpr auto w32s1 = tiles512<32, 1>(std::make_index_sequence<kMr512W32>{});
  static constexpr auto w32s2 = tiles512<32, 2>(std::make_index_sequence<kMr512W32>{});
  static constexpr auto w16s1 = tiles512<16, 1>(std::make_index_sequence<kMr512W16>{});
  static constexpr auto w16s2 = tiles512<16, 2>(std::make_index_sequence<kMr512W16>{});
  if (width == 32) return (s == 1 ? w32s1 : w32s2)[mr - 1];
  return (s == 1 ? w16s1 : w16s2)[mr - 1];
}

Tile256 pick256(size_t nv, size_t s, size_t mr) {
  static constexpr auto v2s1 = tiles256<2, 1>(std::make_index_sequence<kMr256>{});
  static constexpr auto v2s2 = tiles256<2, 2>(std::make_index_sequence<kMr256>{});
  static constexpr auto v1s1 = tiles256<1, 1>(std::make_index_sequence<kMr256>{});
  static constexpr auto v1s2 = tiles256<1, 2>(std::make_index_sequence<kMr256>{});
  if (nv == 2) return (s == 1 ? v2s1 : v2s2)[mr - 1];
  return (s == 1 ? v1s1 : v1s2)[mr - 1];
}

// One output row of one panel: the row's pixels in tiles of at most `most`,
// as even as the count allows (112 pixels, at most 12: 2 x 12 + 8 x 11, not
// 9 x 12 + 4), each running `f(tile, mr)`.
template <typename F>
void for_tiles(size_t ow, size_t most, F&& f) {
  if (ow == 0) return;
  const size_t n = (ow + most - 1) / most, base = ow / n, rem = ow % n;
  size_t p = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t mr = base + (k < rem ? 1 : 0);
    f(p, mr);
    p += mr;
  }
}

}  // namespace
#endif

StemConv::StemConv(const StemShape& s, const float* filter, const float* bias, size_t max_rows)
    : s_(s), isa_(kernel_isa()), max_rows_(std::max<size_t>(1, std::min(max_rows, s.oh))) {
  if (s_.act == StemAct::kSiLU) silu_ = pick_silu().fn;
  pitch_ = std::max(s_.pad_left + s_.w, (s_.ow - 1) * s_.sw + s_.kw);
  pitch_ = (pitch_ + 15) / 16 * 16;
  cin_pitch_ = ((max_rows_ - 1) * s_.sh + s_.kh) * pitch_;
  const size_t taps = s_.kh * s_.kw * s_.cin;
  for (size_t ky = 0; ky < s_.kh; ++ky)
    for (size_t kx = 0; kx < s_.kw; ++kx)
      for (size_t c = 0; c < s_.cin; ++c) {
        offsets_.push_back(static_cast<uint32_t>(c * cin_pitch_ + ky * pitch_ + kx));
        direct_.push_back(static_cast<uint32_t>((c * s_.h + ky) * s_.w + kx));
      }
  // Output pixels whose taps are all inside the image's columns.
  direct_lo_ = std::min(s_.ow, (s_.pad_left + s_.sw - 1) / s_.sw);
  direct_hi_ = s_.w + s_.pad_left >= s_.kw ? std::min(s_.ow, (s_.w + s_.pad_left - s_.kw) / s_.sw + 1) : 0;
  if (direct_hi_ < direct_lo_) direct_lo_ = direct_hi_ = 0;
  for (size_t col0 = 0; col0 < s_.cout; col0 += kPanel) {
    const size_t width = panel_width(std::min(kPanel, s_.cout - col0));
    for (size_t t = 0; t < taps; ++t)
      for (size_t j = 0; j < width; ++j) panels_.push_back(col0 + j < s_.cout ? filter[(col0 + j) * taps + t] : 0.0f);
  }
  bias_.assign((s_.cout + kPanel - 1) / kPanel * kPanel, 0.0f);
  if (bias) std::copy(bias, bias + s_.cout, bias_.begin());
}

// Input rows [r0 sh - pad_top, (r1 - 1) sh - pad_top + kh) of each channel
// into the scratch, `pitch_` floats apart, with pad_left zeros before and
// zeros after; rows outside the image are zeros.
void StemConv::pad_rows(const float* x, size_t r0, size_t r1, float* scratch) const {
  const size_t rows = (r1 - r0 - 1) * s_.sh + s_.kh, tail = pitch_ - s_.pad_left - s_.w;
  for (size_t c = 0; c < s_.cin; ++c) {
    const float* plane = x + c * s_.h * s_.w;
    float* out = scratch + c * cin_pitch_;
    for (size_t j = 0; j < rows; ++j, out += pitch_) {
      const size_t iy = r0 * s_.sh + j;  // + pad_top
      if (iy < s_.pad_top || iy - s_.pad_top >= s_.h) {
        std::memset(out, 0, pitch_ * sizeof(float));
        continue;
      }
      std::memset(out, 0, s_.pad_left * sizeof(float));
      std::memcpy(out + s_.pad_left, plane + (iy - s_.pad_top) * s_.w, s_.w * sizeof(float));
      std::memset(out + s_.pad_left + s_.w, 0, tail * sizeof(float));
    }
  }
}

// The columns of the padded input rows that the pixels outside
// [direct_lo_, direct_hi_) read, for output rows [r0, r1) whose input rows
// are all inside the image (the pixels between read the image itself).
void StemConv::pad_cols(const float* x, size_t r0, size_t r1, float* scratch) const {
  const size_t rows = (r1 - r0 - 1) * s_.sh + s_.kh;
  const size_t left = direct_lo_ > 0 ? (direct_lo_ - 1) * s_.sw + s_.kw : 0;
  const size_t right = direct_hi_ < s_.ow ? direct_hi_ * s_.sw : pitch_;
  for (size_t c = 0; c < s_.cin; ++c) {
    float* out = scratch + c * cin_pitch_;
    for (size_t j = 0; j < rows; ++j, out += pitch_) {
      const float* row = x + (c * s_.h + r0 * s_.sh + j - s_.pad_top) * s_.w;
      auto fill = [&](size_t a, size_t b) {
        for (size_t col = a; col < b; ++col) {
          const size_t ix = col - s_.pad_left;  // wraps past w when col < pad_left
          out[col] = col >= s_.pad_left && ix < s_.w ? row[ix] : 0.0f;
        }
      };
      fill(0, left);
      fill(std::max(left, right), pitch_);
    }
  }
}

void StemConv::run(const float* x, size_t r0, size_t r1, float* y, size_t row_stride, size_t px_stride, size_t cvs,
                   float* scratch) const {
#ifdef KILN_XNN_X86
  const size_t taps = offsets_.size();
  const bool hswish = s_.act == StemAct::kHardSwish;
  for (size_t q0 = r0; q0 < r1; q0 += max_rows_) {
    const size_t q1 = std::min(r1, q0 + max_rows_);
    // Rows whose input rows are all inside the image read the image itself
    // (but for the pixels at the left and right edges): copying the rows,
    // which the image's first reader has to fetch from memory, cost 10% of
    // mobilenet_v2's stem fused with its block.
    const bool inside = q0 * s_.sh >= s_.pad_top && (q1 - 1) * s_.sh + s_.kh <= s_.h + s_.pad_top;
    if (inside) pad_cols(x, q0, q1, scratch);
    else pad_rows(x, q0, q1, scratch);
    // A row's panels one after the other, while its input rows are in L1.
    for (size_t r = q0; r < q1; ++r) {
      const float* padded = scratch + (r - q0) * s_.sh * pitch_;
      const float* image = inside ? x + (r * s_.sh - s_.pad_top) * s_.w : x;  // input row r sh - pad_top
      const float* b = panels_.data();
      for (size_t col0 = 0; col0 < s_.cout; col0 += kPanel) {
        const size_t cols = std::min(kPanel, s_.cout - col0), width = panel_width(cols);
        const Tile pt{taps, offsets_.data(), b, bias_.data() + col0, px_stride, cvs, cols, cvs == 16, hswish,
                      s_.lo, s_.hi};
        Tile dt = pt;
        dt.off = direct_.data();
        float* row = y + (r - r0) * row_stride + col0 / 16 * cvs;
        // Pixels [p0, p1): from the image (pixel p's window starts at column p sw - pad_left) or the padded rows.
        auto span = [&](size_t p0, size_t p1, bool direct) {
          const Tile& t = direct ? dt : pt;
          auto at = [&](size_t p) { return direct ? image + (p * s_.sw - s_.pad_left) : padded + p * s_.sw; };
          if (isa_ == Isa::kAvx512) {
            for_tiles(p1 - p0, width == 32 ? kMr512W32 : kMr512W16, [&](size_t p, size_t mr) {
              pick512(width, s_.sw, mr)(t, at(p0 + p), row + (p0 + p) * px_stride);
            });
          } else if (isa_ == Isa::kAvx2) {
            for_tiles(p1 - p0, kMr256, [&](size_t p, size_t mr) {
              for (size_t g0 = 0; g0 < width; g0 += 16)
                pick256(cols > g0 + 8 || !t.mask_tail ? 2 : 1, s_.sw, mr)(t, at(p0 + p), row + (p0 + p) * px_stride,
                                                                           width, g0);
            });
          }
        };
        if (inside && direct_hi_ > direct_lo_) {
          span(0, direct_lo_, false);
          span(direct_lo_, direct_hi_, true);
          span(direct_hi_, s_.ow, false);
        } else {
          span(0, s_.ow, false);
        }
        b += taps * width;
      }
      // SiLU on the row just written (plain NHWC: the constructor checked), still in L1.
      if (s_.act == StemAct::kSiLU) silu_(y + (r - r0) * row_stride, y + (r - r0) * row_stride, s_.ow * s_.cout);
    }
  }
#else
  (void)x, (void)r0, (void)r1, (void)y, (void)row_stride, (void)px_stride, (void)cvs, (void)scratch;
#endif
}

}  // namespace kiln_xnnpack
