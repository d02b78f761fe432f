// Winograd F(4x4, 3x3) in NHWC (see xnn_winograd.h).
//
// Layouts of one chunk of nt tiles (chunk-local tile j = global tile t0 + j):
//   V[xi][j][ci]  the transformed input, xi = 6 * i + k of the 6x6 tile;
//   M[xi][j][co]  the GEMM results.
// Global tile t is (image, tile row, tile column) in that order. The
// transforms work on kL = 16 channels at a time (one AVX-512 vector, two
// AVX2 ones, four SSE ones), as generic vector values (VF).
#include "xnn_winograd.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "kiln/c/backend_sdk.hpp"
#include "xnn_isa.h"
#include "xnn_tsan.h"

namespace kiln_xnnpack {

using kiln::sdk::fail;

namespace {

constexpr size_t kL = 16;  // channels per transform step
// V and M of one chunk of tiles: 36 * tiles * (Cin + Cout) floats within this
// many bytes, so they stay near the core between the transforms and the
// GEMMs; but at least the transformed weights' bytes (every chunk streams
// them all through the GEMMs: 512 channels would take 7 tiles a chunk
// otherwise). Measured (Zen 4, 1 MB L2, 1 thread): 0.25, 0.5, 1, 2, 8 MB
// chunks: 64ch 56x56 0.97, 0.96, 0.88, 0.86, 0.86 ms; 16->64 55x55 0.37,
// 0.35, 0.34, 0.34, 0.34; 32->128 27x27 0.24, 0.24, 0.24, 0.22, 0.22.
constexpr size_t kChunkBytes = size_t{2} << 20;
// kAuto: transformed weight floats (36 Cin Cout) per tile of a chunk at most
// this, and at least kMinChannels in and out. Measured on Zen 4 (1 thread,
// one Conv+Relu partition, XNNPACK's igemm time / Winograd's, min of 200-400 runs):
//   64ch 56x56 2.5x, 128ch 28x28 3.0x, 256ch 14x14 1.7x, 256ch 10x10 1.6x,
//   128ch 7x7 1.5x, 64ch 7x7 1.3x, 64ch 8x8 1.7x, 16ch 28x28 1.3x,
//   16->64 55x55 1.7x, 32->128 27x27 2.1x, 48->192 13x13 1.6x, 64->256 13x13 1.6x,
//   512ch 14x14 (590K floats a tile) 1.15-1.4x, 512ch 7x7 batch 4 (590K) 0.8-1.2x,
//   256ch 7x7 (590K) 1.6x, 256->512 7x7 (1.2M) 1.6x, 384ch 7x7 (1.3M) 1.22x;
//   but 512ch 7x7 (2.4M floats a tile: 38 MB of weights for 4 GEMM rows) 0.8x
//   and 8ch 56x56 (the transforms outweigh K = 8) 0.64x.
constexpr size_t kMaxWeightFloatsPerTile = size_t{3} << 19;  // 1.5M
constexpr size_t kMinChannels = 16;
// Up to this many threads, the 36 GEMMs of a chunk are 36 tasks of one
// parallel call (36 tasks fill 2, 3, 4, 6, 9 and 12 threads exactly, leave
// at most 18% of the slots idle otherwise: 11 threads); with more, each GEMM
// is split over all threads by XNNPACK (36 dispatches, balanced).
constexpr size_t kMaxThreadsPerGemmTask = 12;

size_t tiles_of(const WinogradShape& s) { return s.n * ((s.oh + 3) / 4) * ((s.ow + 3) / 4); }

// Tiles per chunk (see kChunkBytes).
size_t chunk_of(const WinogradShape& s) {
  const size_t bytes = std::max(kChunkBytes, 36 * sizeof(float) * s.cin * s.cout);
  return std::max<size_t>(1, std::min(tiles_of(s), bytes / (36 * sizeof(float) * (s.cin + s.cout))));
}

// U[xi][co][ci] = (G g G^T)[i][k] for g = filter[co, :, :, ci], in double.
std::vector<float> transform_weights(const float* f, size_t cout, size_t cin) {
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};
  std::vector<float> u(36 * cout * cin);
  for (size_t co = 0; co < cout; ++co) {
    for (size_t ci = 0; ci < cin; ++ci) {
      double g[9];
      for (size_t e = 0; e < 9; ++e) g[e] = f[(co * 9 + e) * cin + ci];
      double t[6][3];
      for (size_t i = 0; i < 6; ++i)
        for (size_t k = 0; k < 3; ++k) t[i][k] = G[i][0] * g[k] + G[i][1] * g[3 + k] + G[i][2] * g[6 + k];
      for (size_t i = 0; i < 6; ++i)
        for (size_t k = 0; k < 6; ++k)
          u[((i * 6 + k) * cout + co) * cin + ci] = static_cast<float>(t[i][0] * G[k][0] + t[i][1] * G[k][1] + t[i][2] * G[k][2]);
    }
  }
  return u;
}

// kL lanes as one value: one AVX-512 register, two AVX2 ones, four SSE ones
// (the compiler splits it by the target of the function it is inlined in).
// Only passed by pointer or reference, so no function's ABI depends on it.
typedef float VF __attribute__((vector_size(kL * sizeof(float))));
// The same at any float's alignment, aliasing floats: unaligned loads and
// stores of the target's width. (A memcpy into a VF compiles, for AVX2 and
// SSE, to 16-byte copies through the stack that wider loads then read back,
// stalling store forwarding: the AVX2 output transform ran 3x slower.)
typedef float VFu __attribute__((vector_size(kL * sizeof(float)), aligned(alignof(float)), may_alias));

[[gnu::always_inline]] inline void load(VF& v, const float* p) { v = *reinterpret_cast<const VFu*>(p); }
[[gnu::always_inline]] inline void store(float* p, const VF& v) { *reinterpret_cast<VFu*>(p) = v; }

// o[r] = sum_q B^T[r][q] d[q].
[[gnu::always_inline]] inline void bt6(const VF* d, VF* o) {
  const VF a = d[4] - 4.f * d[2], b = d[3] - 4.f * d[1];
  const VF c = d[4] - d[2], e = 2.f * (d[3] - d[1]);
  o[0] = 4.f * d[0] - 5.f * d[2] + d[4];
  o[1] = a + b;
  o[2] = a - b;
  o[3] = c + e;
  o[4] = c - e;
  o[5] = 4.f * d[1] - 5.f * d[3] + d[5];
}

// o[r] = sum_q A^T[r][q] m[q] (4 rows).
[[gnu::always_inline]] inline void at6(const VF* m, VF* o) {
  const VF s = m[1] + m[2], t = m[1] - m[2], p = m[3] + m[4], q = m[3] - m[4];
  o[0] = m[0] + s + p;
  o[1] = t + 2.f * q;
  o[2] = s + 4.f * p;
  o[3] = t + 8.f * q + m[5];
}

// What the tile tasks of one chunk read and write.
struct Chunk {
  const WinogradShape* s;
  size_t ht, wt, t0, stride;  // stride: tiles per chunk (V/M row pitch in tiles)
  const float *x, *residual, *bias, *zeros;
  float *v, *m, *y;
};

// B^T d B of kL channels from the 36 patch pixels at p[e] + c0 (all kL
// lanes readable), written to out[xi * os].
[[gnu::always_inline]] inline void input_lanes(const float* const* p, size_t c0, float* out, size_t os) {
  VF u[36];
  for (size_t i = 0; i < 6; ++i) {  // along x
    VF d[6];
    for (size_t k = 0; k < 6; ++k) load(d[k], p[i * 6 + k] + c0);
    bt6(d, u + i * 6);
  }
  for (size_t k = 0; k < 6; ++k) {  // along y
    VF d[6], o[6];
    for (size_t i = 0; i < 6; ++i) d[i] = u[i * 6 + k];
    bt6(d, o);
    for (size_t i = 0; i < 6; ++i) store(out + (i * 6 + k) * os, o[i]);
  }
}

// Input transform of tile t0 + j: V[xi][j][:] = (B^T d B)[xi] per channel.
[[gnu::always_inline]] inline void input_tile(const Chunk& c, size_t j) {
  const WinogradShape& s = *c.s;
  const size_t t = c.t0 + j, img = t / (c.ht * c.wt), ty = t % (c.ht * c.wt) / c.wt, tx = t % c.wt;
  const float* p[36];  // channel 0 of each patch position (zeros outside the input)
  for (size_t i = 0; i < 6; ++i) {
    const long iy = static_cast<long>(4 * ty + i) - static_cast<long>(s.pad_top);
    for (size_t k = 0; k < 6; ++k) {
      const long ix = static_cast<long>(4 * tx + k) - static_cast<long>(s.pad_left);
      const bool in = iy >= 0 && iy < static_cast<long>(s.h) && ix >= 0 && ix < static_cast<long>(s.w);
      p[i * 6 + k] = in ? c.x + ((img * s.h + static_cast<size_t>(iy)) * s.w + static_cast<size_t>(ix)) * s.cin : c.zeros;
    }
  }
  const size_t pitch = c.stride * s.cin;  // floats between V[xi] and V[xi + 1]
  float* v = c.v + j * s.cin;
  size_t c0 = 0;
  for (; c0 + kL <= s.cin; c0 += kL) input_lanes(p, c0, v + c0, pitch);
  if (c0 == s.cin) return;
  // The last nl < kL channels: through zero-padded copies (reading kL lanes
  // of the last pixel would run past the input).
  const size_t nl = s.cin - c0;
  alignas(64) float d[36 * kL], o[36 * kL];
  const float* q[36];
  for (size_t e = 0; e < 36; ++e) {
    for (size_t l = 0; l < kL; ++l) d[e * kL + l] = l < nl ? p[e][c0 + l] : 0.f;
    q[e] = d + e * kL;
  }
  input_lanes(q, 0, o, kL);
  for (size_t e = 0; e < 36; ++e) std::memcpy(v + e * pitch + c0, o + e * kL, nl * sizeof(float));
}

// A^T M A of kL channels from m[xi * pitch] (all kL lanes readable): o[4 r + q].
[[gnu::always_inline]] inline void output_lanes(const float* m, size_t pitch, VF* o) {
  VF b[24];  // A^T M: 4 rows x 6
  for (size_t k = 0; k < 6; ++k) {  // along y
    VF a[6], r[4];
    for (size_t i = 0; i < 6; ++i) load(a[i], m + (i * 6 + k) * pitch);
    at6(a, r);
    for (size_t q = 0; q < 4; ++q) b[q * 6 + k] = r[q];
  }
  for (size_t r = 0; r < 4; ++r) at6(b + r * 6, o + r * 4);  // along x
}

// y[l] = clamp(v[l] (+ res[l]), lo, hi) for l < nl.
[[gnu::always_inline]] inline void store_clamped(float* y, const VF& v, const float* res, float lo, float hi, size_t nl) {
  alignas(64) float t[kL];
  store(t, v);
  for (size_t l = 0; l < nl; ++l) y[l] = std::min(std::max(t[l] + (res ? res[l] : 0.f), lo), hi);
}

// Output transform of tile t0 + j: the valid outputs of A^T M A + bias
// (+ residual), clamped, per channel.
[[gnu::always_inline]] inline void output_tile(const Chunk& c, size_t j) {
  const WinogradShape& s = *c.s;
  const size_t t = c.t0 + j, img = t / (c.ht * c.wt), ty = t % (c.ht * c.wt) / c.wt, tx = t % c.wt;
  const size_t rows = std::min<size_t>(4, s.oh - 4 * ty), cols = std::min<size_t>(4, s.ow - 4 * tx);
  const size_t pitch = c.stride * s.cout;
  const float* m = c.m + j * s.cout;
  const size_t px0 = (img * s.oh + 4 * ty) * s.ow + 4 * tx;  // the tile's first output pixel
  for (size_t c0 = 0; c0 < s.cout; c0 += kL) {
    const size_t nl = std::min(kL, s.cout - c0);
    VF o[16], bias;
    if (nl == kL) {
      output_lanes(m + c0, pitch, o);
      load(bias, c.bias + c0);
    } else {  // the last channels: through zero-padded copies
      alignas(64) float tmp[36 * kL] = {}, bt[kL] = {};
      for (size_t e = 0; e < 36; ++e) std::memcpy(tmp + e * kL, m + e * pitch + c0, nl * sizeof(float));
      std::memcpy(bt, c.bias + c0, nl * sizeof(float));
      output_lanes(tmp, kL, o);
      load(bias, bt);
    }
    for (size_t r = 0; r < rows; ++r)
      for (size_t q = 0; q < cols; ++q) {
        const size_t px = px0 + r * s.ow + q;
        const float* res = c.residual ? c.residual + px * s.cout + c0 : nullptr;
        float* y = c.y + px * s.out_stride + c0;
        if (nl == kL) store_clamped(y, o[r * 4 + q] + bias, res, s.lo, s.hi, kL);
        else store_clamped(y, o[r * 4 + q] + bias, res, s.lo, s.hi, nl);
      }
  }
}

#if defined(__x86_64__) || defined(__i386__)
#define KILN_XNN_WINO_X86 1
__attribute__((target("avx512f"))) void input_avx512(void* ctx, size_t j) {
  input_tile(*static_cast<const Chunk*>(ctx), j);
}
__attribute__((target("avx2,fma"))) void input_avx2(void* ctx, size_t j) { input_tile(*static_cast<const Chunk*>(ctx), j); }
__attribute__((target("avx512f"))) void output_avx512(void* ctx, size_t j) {
  output_tile(*static_cast<const Chunk*>(ctx), j);
}
__attribute__((target("avx2,fma"))) void output_avx2(void* ctx, size_t j) {
  output_tile(*static_cast<const Chunk*>(ctx), j);
}
#endif
void input_base(void* ctx, size_t j) { input_tile(*static_cast<const Chunk*>(ctx), j); }
void output_base(void* ctx, size_t j) { output_tile(*static_cast<const Chunk*>(ctx), j); }

using TileFn = void (*)(void*, size_t);

struct Kernels {
  TileFn input = input_base, output = output_base;
  const char* isa = "baseline";
};

// The widest transforms this CPU runs, capped by KILN_XNNPACK_WINOGRAD_ISA
// and KILN_XNNPACK_ISA (avx512, avx2 or baseline; tests run every variant
// on one machine).
Kernels pick_kernels() {
  Kernels r;
#ifdef KILN_XNN_WINO_X86
  const Isa isa = std::min(capped_isa("KILN_XNNPACK_WINOGRAD_ISA"), kernel_isa());
  if (isa == Isa::kAvx512) r = {input_avx512, output_avx512, "avx512"};
  else if (isa == Isa::kAvx2) r = {input_avx2, output_avx2, "avx2"};
#endif
  return r;
}

// A chunk and the transform its tile tasks run.
struct Task {
  Chunk chunk;
  TileFn fn;
  // With the TSan edges of xnn_tsan.h.
  static void run(void* ctx, size_t j) {
    tsan_acquire(ctx);
    const Task* t = static_cast<const Task*>(ctx);
    t->fn(const_cast<Chunk*>(&t->chunk), j);
    tsan_release(ctx);
  }
};

// The 36 GEMMs of a chunk, one task each: each runs whole on one thread
// (XNNPACK's operator on no pool), so a chunk costs one parallel dispatch
// for its GEMMs instead of 36, and a thread keeps one xi's weights, V and M
// to itself. Status per xi (a task cannot throw through pthreadpool).
struct GemmTask {
  const xnn_operator_t* fc;
  const float* v;
  float* m;
  size_t nt, v_pitch, m_pitch;
  int* status;
  static void run(void* ctx, size_t xi) {
    tsan_acquire(ctx);
    const GemmTask* t = static_cast<const GemmTask*>(ctx);
    const Api& a = api();
    int st = a.xnn_setup_fully_connected_nc_f32(t->fc[xi], t->nt, t->v + xi * t->v_pitch, t->m + xi * t->m_pitch, nullptr);
    if (st == xnn_status_success) st = a.xnn_run_operator(t->fc[xi], nullptr);
    t->status[xi] = st;
    tsan_release(ctx);
  }
};

}  // namespace

WinogradMode parse_winograd_mode(const std::string& s) {
  if (s == "auto") return WinogradMode::kAuto;
  if (s == "off") return WinogradMode::kOff;
  if (s == "always") return WinogradMode::kAlways;
  fail(KILN_STATUS_INVALID_ARGUMENT, "option 'winograd' must be auto, off or always, got '" + s + "'");
}

bool winograd_fits(const std::vector<int64_t>& i, const std::vector<int64_t>& in) {
  if (i.size() < 13 || in.size() != 4) return false;
  for (size_t k = 0; k < 4; ++k)
    if (i[k] < 0 || i[k] > 2) return false;
  return i[4] == 3 && i[5] == 3 && i[6] == 1 && i[7] == 1 && i[8] == 1 && i[9] == 1 && i[10] == 1 && i[11] == in[3] &&
         i[12] > 0 && in[1] > 0 && in[2] > 0;
}

bool winograd_gains(const WinogradShape& s) {
  return s.cin >= kMinChannels && s.cout >= kMinChannels && 36 * s.cin * s.cout <= chunk_of(s) * kMaxWeightFloatsPerTile;
}

WinogradConv::WinogradConv(const WinogradShape& s, const float* filter, const float* bias) : s_(s) {
  if (s.cin == 0 || s.cout == 0 || s.oh == 0 || s.ow == 0 || s.out_stride < s.cout)
    fail(KILN_STATUS_INTERNAL, "bad Winograd convolution shape");
  const Kernels k = pick_kernels();
  input_ = k.input;
  output_ = k.output;
  isa_ = k.isa;
  ht_ = (s.oh + 3) / 4;
  wt_ = (s.ow + 3) / 4;
  tiles_ = tiles_of(s);
  chunk_ = chunk_of(s);
  bias_.assign(s.cout, 0.f);
  if (bias) std::copy(bias, bias + s.cout, bias_.begin());
  zeros_.assign(s.cin, 0.f);
  v_floats_ = (36 * chunk_ * s.cin + 15) / 16 * 16;
  const std::vector<float> u = transform_weights(filter, s.cout, s.cin);
  fc_.assign(36, nullptr);
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t xi = 0; xi < 36; ++xi) {
    check(api().xnn_create_fully_connected_nc_f32(s.cin, s.cout, s.cin, s.cout, u.data() + xi * s.cout * s.cin, nullptr,
                                                  -inf, inf, 0, &fc_[xi]),
          "create_fully_connected_nc_f32 (Winograd)");
  }
}

WinogradConv::~WinogradConv() {
  for (xnn_operator_t op : fc_)
    if (op) api().xnn_delete_operator(op);
}

void WinogradConv::run(const float* x, const float* residual, float* y, float* scratch, pthreadpool_t pool, bool yield) {
  float* v = scratch;
  float* m = scratch + v_floats_;
  const Api& a = api();
  const size_t threads = pool ? a.pthreadpool_get_threads_count(pool) : 1;
  for (size_t t0 = 0; t0 < tiles_; t0 += chunk_) {
    const size_t nt = std::min(chunk_, tiles_ - t0);
    Task in{{&s_, ht_, wt_, t0, chunk_, x, residual, bias_.data(), zeros_.data(), v, m, y}, input_};
    tsan_release(&in);
    a.pthreadpool_parallelize_1d(pool, &Task::run, &in, nt, 0);
    tsan_acquire(&in);
    if (threads <= kMaxThreadsPerGemmTask) {
      int status[36];
      GemmTask gemm{fc_.data(), v, m, nt, chunk_ * s_.cin, chunk_ * s_.cout, status};
      tsan_release(&gemm);
      a.pthreadpool_parallelize_1d(pool, &GemmTask::run, &gemm, 36, 0);
      tsan_acquire(&gemm);
      for (int st : status) check(st, "fully connected GEMM (Winograd)");
    } else {  // many threads: each GEMM split over all of them
      for (size_t xi = 0; xi < 36; ++xi) {
        check(a.xnn_setup_fully_connected_nc_f32(fc_[xi], nt, v + xi * chunk_ * s_.cin, m + xi * chunk_ * s_.cout, pool),
              "setup_fully_connected_nc_f32 (Winograd)");
        check(a.xnn_run_operator(fc_[xi], pool), "run_operator (Winograd)");
      }
    }
    const bool last = t0 + nt == tiles_;
    Task out{in.chunk, output_};
    tsan_release(&out);
    a.pthreadpool_parallelize_1d(pool, &Task::run, &out, nt, last && yield ? PTHREADPOOL_FLAG_YIELD_WORKERS : 0);
    tsan_acquire(&out);
  }
}

namespace {

// The Add at op i + 1 that adds a same-shaped run-time value to Conv op i's
// output, when that output has no other reader; -1 otherwise.
int64_t fusible_add(const Program& p, size_t i, const std::vector<size_t>& readers) {
  const Op& conv = p.ops[i];
  if (i + 1 >= p.ops.size() || readers[conv.out] != 1 || !std::isinf(conv.floats[0]) || !std::isinf(conv.floats[1]))
    return -1;
  const Op& add = p.ops[i + 1];
  if (add.kind != OpKind::kAdd || add.in.size() != 2 || (add.in[0] == conv.out) == (add.in[1] == conv.out)) return -1;
  const uint32_t r = add.in[0] == conv.out ? add.in[1] : add.in[0];
  const std::vector<int64_t>& d = p.values[conv.out].dims;
  if (p.values[r].constant >= 0 || p.values[r].dims != d || p.values[add.out].dims != d) return -1;
  return static_cast<int64_t>(i + 1);
}

}  // namespace

std::string WinogradOps::summary() const {
  const WinogradConv* any = nullptr;
  for (const auto& c : conv)
    if (c) any = c.get();
  if (!any) return "0 3x3 convolutions by Winograd";
  return std::to_string(count()) + " 3x3 convolutions by Winograd F(4x4,3x3), " + std::to_string(fused_adds()) +
         " with their residual Add (" + any->isa() + " transforms)";
}

WinogradOps plan_winograd(const Program& p, WinogradMode mode, const std::vector<int64_t>& into_concat) {
  WinogradOps w;
  w.conv.resize(p.ops.size());
  w.add.assign(p.ops.size(), -1);
  w.fused.assign(p.ops.size(), 0);
  if (mode == WinogradMode::kOff) return w;
  std::vector<size_t> readers(p.values.size(), 0);
  for (const Op& op : p.ops)
    for (uint32_t v : op.in)
      if (v != kNoValue) ++readers[v];
  for (const Boundary& b : p.outputs) readers[b.value] += 2;  // a partition output is always materialized
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (op.kind != OpKind::kConv || op.floats.size() < 2 || !winograd_fits(op.ints, p.values[op.in.at(0)].dims)) continue;
    const std::vector<int64_t>& x = p.values[op.in[0]].dims;
    const std::vector<int64_t>& y = p.values[op.out].dims;
    WinogradShape s;
    s.n = static_cast<size_t>(x[0]), s.h = static_cast<size_t>(x[1]), s.w = static_cast<size_t>(x[2]);
    s.cin = static_cast<size_t>(x[3]);
    s.oh = static_cast<size_t>(y[1]), s.ow = static_cast<size_t>(y[2]), s.cout = static_cast<size_t>(y[3]);
    s.pad_top = static_cast<size_t>(op.ints[0]), s.pad_left = static_cast<size_t>(op.ints[3]);
    s.out_stride = into_concat[i] >= 0 ? static_cast<size_t>(p.values[p.ops[static_cast<size_t>(into_concat[i])].out].dims[3])
                                       : s.cout;
    s.lo = op.floats[0], s.hi = op.floats[1];
    if (mode == WinogradMode::kAuto && !winograd_gains(s)) continue;
    const int64_t add = into_concat[i] >= 0 ? -1 : fusible_add(p, i, readers);
    if (add >= 0) {
      s.lo = p.ops[static_cast<size_t>(add)].floats.at(0);
      s.hi = p.ops[static_cast<size_t>(add)].floats.at(1);
      w.fused[static_cast<size_t>(add)] = 1;
    }
    w.add[i] = add;
    const float* filter = p.constants[static_cast<size_t>(p.values[op.in[1]].constant)].data();
    const float* bias = op.in.size() > 2 && op.in[2] != kNoValue
                            ? p.constants[static_cast<size_t>(p.values[op.in[2]].constant)].data() : nullptr;
    w.conv[i] = std::make_unique<WinogradConv>(s, filter, bias);
  }
  size_t floats = 0;
  for (const auto& c : w.conv)
    if (c) floats = std::max(floats, c->scratch_floats());
  if (floats) w.scratch.assign(floats, 0.f);
  return w;
}

}  // namespace kiln_xnnpack
