// The SGEMM engine (see gemm.h): packing, blocking, microkernels, dispatch.
//
// Loop structure (BLIS, "Anatomy of High-Performance Matrix Multiplication",
// Goto & van de Geijn):
//
//   for jc in n step NC:            B block (KC x NC) lives in L2/L3
//     for pc in k step KC:          pack B[pc:pc+KC, jc:jc+NC] into NR-wide panels
//       for ic in m step MC:        pack A[ic:ic+MC, pc:pc+KC] into MR-tall panels (L2)
//         for jr in NC step NR:     one B panel (KC x NR) stays in L1
//           for ir in MC step MR:   microkernel: MR x NR of C in registers
//
// Parallelism splits C into a grid of tiles (rows in multiples of MR, columns
// in multiples of the vector width), picked by a cost model (gemm_plan.h);
// each task runs the loops above on its tile with its own thread-local
// packing buffers.
#include "kernels/portable/util/gemm.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/portable/util/cv_common.h"
#include "kernels/portable/util/gemm_plan.h"
#include "kernels/portable/util/gemm_tile.h"
#include "kernels/portable/util/interleave4.h"
#include "kernels/portable/util/scratch.h"
#include "kiln/tensor.h"

#if defined(__x86_64__) || defined(__i386__)
#define KILN_GEMM_X86 1
#include <immintrin.h>
#endif

namespace kiln::kernels {


namespace {

using gemm::MicroKernelFn;
using gemm::TileStore;
struct Baseline {};  // store_tile_scalar<Baseline>: this file's copy

struct MicroKernel {
  const char* name;
  int64_t mr, nr;  // register tile
  int64_t lane;    // columns of one vector: a tile may start mid-panel on one (the SIMD kernels' H = 1 variants)
  int64_t mc, kc, nc;  // cache blocks (mc % mr == 0, nc % nr == 0)
  MicroKernelFn fn;
  bool (*supported)();
};

// ---------------------------------------------------------------------------
// Portable microkernel: plain loops over a small accumulator array that the
// compiler keeps in vector registers of the baseline ISA.
constexpr int64_t kPortableMr = 4;
constexpr int64_t kPortableNr = 8;

void ukernel_portable(int64_t kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t mv,
                      int64_t nv, const TileStore& st) {
  float acc[kPortableMr][kPortableNr] = {};
  for (int64_t p = 0; p < kc; ++p) {
    for (int64_t i = 0; i < kPortableMr; ++i) {
      const float av = a[i];
      for (int64_t j = 0; j < kPortableNr; ++j) acc[i][j] += av * b[j];
    }
    a += kPortableMr;
    b += ldb;
  }
  store_tile_scalar<Baseline>(&acc[0][0], kPortableNr, c, ldc, mv, nv, st);
}

bool always_supported() { return true; }

#if KILN_GEMM_X86
// The x86 microkernels live in cpu/x86/ (one template, one file per ISA).
using gemm::kAvx2Mr;
using gemm::kAvx2Nr;
using gemm::kAvx512Mr;
using gemm::kAvx512Nr;
using gemm::ukernel_avx2;
using gemm::ukernel_avx512;
bool avx2_supported() { return cpu::kernel_isa() >= cpu::Isa::kAvx2; }
bool avx512_supported() { return cpu::kernel_isa() >= cpu::Isa::kAvx512; }
#endif

// The table, best first. Blocking: an MR x KC sliver of A and a KC x NR
// sliver of B fit in L1 (48 KiB on the reference machine), an MC x KC block
// of A in L2; NC bounds the packed B block.
const MicroKernel kKernels[] = {
#if KILN_GEMM_X86
    {"avx512f", kAvx512Mr, kAvx512Nr, kAvx512Nr / 2, 144, 256, 2048, ukernel_avx512, avx512_supported},
    {"avx2+fma", kAvx2Mr, kAvx2Nr, kAvx2Nr / 2, 144, 256, 2048, ukernel_avx2, avx2_supported},
#endif
    {"portable", kPortableMr, kPortableNr, kPortableNr, 128, 256, 2048, ukernel_portable, always_supported},
};
constexpr int kNumKernels = static_cast<int>(sizeof(kKernels) / sizeof(kKernels[0]));

int detect_kernel() {
  for (int i = 0; i < kNumKernels; ++i)
    if (kKernels[i].supported()) return i;
  return kNumKernels - 1;
}

int& active_kernel() {
  static int k = detect_kernel();
  return k;
}

// ---------------------------------------------------------------------------
// Packing.

// Packs rows [i0, i0 + mc) and columns [p0, p0 + kc) of op(A) into MR-row
// panels: out[(i / mr) * kc * mr + p * mr + i % mr], zero-padding the rows
// of the last panel.
void pack_a_block(const float* a, int64_t lda, bool trans, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                  int64_t mr, float* out) {
  for (int64_t ir = 0; ir < mc; ir += mr) {
    const int64_t rows = std::min(mr, mc - ir);
    float* panel = out + ir * kc;
    // A short last panel is cleared whole first (one memset, not mr - rows
    // scalar stores per p: a GEMM of 4 rows would spend most of its packing
    // on the 8 rows of zeros).
    if (rows < mr) std::memset(panel, 0, static_cast<size_t>(kc * mr) * sizeof(float));
    if (!trans) {
      // A[i, p] at a[i * lda + p]: gather one element of each row per p.
      int64_t r = 0;
#if KILN_GEMM_X86
      // Four rows at a time (SSE2, every x86-64): A is packed on every call
      // (the activations of every MatMul with constant weights).
      for (; r + 4 <= rows; r += 4) interleave4(a + (i0 + ir + r) * lda + p0, lda, kc, panel + r, mr);
#endif
      for (; r < rows; ++r) {
        const float* src = a + (i0 + ir + r) * lda + p0;
        for (int64_t p = 0; p < kc; ++p) panel[p * mr + r] = src[p];
      }
    } else {
      // A[i, p] at a[p * lda + i]: each p is a contiguous run of rows.
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = a + (p0 + p) * lda + i0 + ir;
        for (int64_t r = 0; r < rows; ++r) panel[p * mr + r] = src[r];
      }
    }
  }
}

// Packs rows [p0, p0 + kc) and columns [j0, j0 + nc) of op(B) into NR-column
// panels (the BPanelSource layout).
void pack_b_block(const float* b, int64_t ldb, bool trans, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                  int64_t nr, float* out) {
  for (int64_t jr = 0; jr < nc; jr += nr) {
    const int64_t cols = std::min(nr, nc - jr);
    float* panel = out + jr * kc;
    if (!trans) {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = b + (p0 + p) * ldb + j0 + jr;
        float* dst = panel + p * nr;
        for (int64_t j = 0; j < cols; ++j) dst[j] = src[j];
        for (int64_t j = cols; j < nr; ++j) dst[j] = 0.f;
      }
    } else {
      int64_t j = 0;
#if KILN_GEMM_X86
      // Four columns at a time by 4x4 transposes, as in pack_a_block.
      for (; j + 4 <= cols; j += 4) interleave4(b + (j0 + jr + j) * ldb + p0, ldb, kc, panel + j, nr);
#endif
      for (; j < cols; ++j) {
        const float* src = b + (j0 + jr + j) * ldb + p0;
        for (int64_t p = 0; p < kc; ++p) panel[p * nr + j] = src[p];
      }
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t j = cols; j < nr; ++j) panel[p * nr + j] = 0.f;
    }
  }
}

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

struct AlignedFree {
  void operator()(float* p) const { aligned_free_bytes(p); }
};

struct GemmProblem {
  int64_t m, n, k;
  float alpha, beta;
  GemmOperand a, b;
  float* c;
  int64_t ldc;
  const GemmEpilogue* ep;
  const MicroKernel* uk;
  bool clamp;
  // Whole operands in the PackedMatrix layout (pre-packed, or packed once
  // per call and shared by the parallel tasks); null: pack per block.
  const float* a_pack = nullptr;
  const float* b_pack = nullptr;
  // B is raw, untransposed and read in place by the microkernel (its full
  // NR-column panels; a ragged last panel is packed): small M, where
  // packing B would cost as much as the arithmetic (pointwise convs).
  bool b_direct = false;
};

// Runs the blocked loops on the C tile rows [i0, i1) x columns [j0, j1).
// i0 is a multiple of MR (so packed A panels line up); j0 a multiple of the
// vector width: a tile of packed B may start in the middle of a panel, and
// its first microkernel call then covers the panel's second vector only.
void run_tile(const GemmProblem& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  thread_local Scratch a_scratch, b_scratch;
  const MicroKernel& uk = *g.uk;
  const int64_t mr = uk.mr, nr = uk.nr;
  const int64_t m_pad = round_up(g.m, mr), n_pad = round_up(g.n, nr);
  float* a_buf = g.a_pack ? nullptr : a_scratch.get(round_up(std::min(uk.mc, i1 - i0), mr) * uk.kc);
  float* b_buf = g.b_pack ? nullptr : b_scratch.get(round_up(std::min(uk.nc, j1 - j0), nr) * uk.kc);
  TileStore st;
  st.alpha = g.alpha;
  st.beta = g.beta;
  st.clamp = g.clamp;
  st.lo = g.ep->clamp_min;
  st.hi = g.ep->clamp_max;

  for (int64_t jc = j0; jc < j1; jc += uk.nc) {
    const int64_t nc = std::min(uk.nc, j1 - jc);
    for (int64_t pc = 0; pc < g.k; pc += uk.kc) {
      const int64_t kc = std::min(uk.kc, g.k - pc);
      st.first = pc == 0;
      st.last = pc + kc == g.k;
      const float* bp = nullptr;
      if (g.b_direct) {
        if (nc % nr != 0)  // the ragged last panel, packed at its place in b_buf
          pack_b_block(g.b.data, g.b.ld, false, pc, kc, jc + nc / nr * nr, nc % nr, nr, b_buf + nc / nr * nr * kc);
      } else if (g.b_pack) {
        bp = g.b_pack + pc * n_pad;  // this K block's panels; columns are absolute
      } else if (g.b.source) {
        g.b.source->pack(pc, kc, jc, nc, nr, b_buf);
        bp = b_buf;
      } else {
        pack_b_block(g.b.data, g.b.ld, g.b.trans, pc, kc, jc, nc, nr, b_buf);
        bp = b_buf;
      }
      for (int64_t ic = i0; ic < i1; ic += uk.mc) {
        const int64_t mc = std::min(uk.mc, i1 - ic);
        const float* ap;
        if (g.a_pack) {
          ap = g.a_pack + pc * m_pad + ic * kc;
        } else {
          pack_a_block(g.a.data, g.a.ld, g.a.trans, ic, mc, pc, kc, mr, a_buf);
          ap = a_buf;
        }
        // apply runs on groups of column panels (rows of >= 256 values, the
        // block still in L2) so its per-call cost is amortized.
        int64_t applied = 0;
        for (int64_t jr = 0, nv = 0; jr < nc; jr += nv) {
          // Columns [jr, jr + nv) of the block within one B panel: packed
          // B's panels are at absolute column multiples of NR (jb: where in
          // its panel the run starts); a block packed here starts a panel at jc.
          const int64_t jb = g.b_pack ? (jc + jr) % nr : 0;
          nv = std::min(nr - jb, nc - jr);
          const float* bcol = g.b_pack ? bp + (jc + jr - jb) * kc + jb : (g.b_direct ? b_buf : bp) + jr * kc;
          int64_t ldb = nr;
          if (g.b_direct && nv == nr) {
            bcol = g.b.data + pc * g.b.ld + jc + jr;
            ldb = g.b.ld;
          }
          st.col_bias = g.ep->col_bias ? g.ep->col_bias + jc + jr : nullptr;
          for (int64_t ir = 0; ir < mc; ir += mr) {
            const int64_t mv = std::min(mr, mc - ir);
            st.row_bias = g.ep->row_bias ? g.ep->row_bias + ic + ir : nullptr;
            uk.fn(kc, ap + ir * kc, bcol, ldb, g.c + (ic + ir) * g.ldc + jc + jr, g.ldc, mv, nv, st);
          }
          const int64_t done = jr + nv;
          if (st.last && g.ep->apply && (done - applied >= 256 || done == nc)) {
            g.ep->apply(g.ep->apply_ctx, g.c + ic * g.ldc + jc + applied, g.ldc, mc, done - applied);
            applied = done;
          }
        }
      }
    }
  }
}

// k == 0: C = beta * C + biases, clamped.
void run_empty_k(const GemmProblem& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    float* crow = g.c + i * g.ldc;
    for (int64_t j = 0; j < g.n; ++j) {
      float v = g.beta != 0.f ? g.beta * crow[j] : 0.f;
      if (g.ep->row_bias) v += g.ep->row_bias[i];
      if (g.ep->col_bias) v += g.ep->col_bias[j];
      if (g.clamp) v = std::min(std::max(v, g.ep->clamp_min), g.ep->clamp_max);
      crow[j] = v;
    }
  }
  if (g.ep->apply) g.ep->apply(g.ep->apply_ctx, g.c, g.ldc, g.m, g.n);
}

// acc[w] += sum_p panel[p * width + w] * x[p * incx] for w < width: one
// packed panel (kc rows of `width` values) times a vector. The usual widths
// get constant trip counts so the accumulators stay in registers.
KILN_ISA_BODY
void panel_times_vector_body(const float* __restrict panel, int64_t kc, int64_t width, const float* __restrict x,
                        int64_t incx, float* __restrict acc) {
  auto run = [&](auto w_const) {
    constexpr int64_t W = decltype(w_const)::value;
    // Two sets of accumulators (even and odd p) halve the FMA latency chain.
    float a[W], b[W];
    for (int64_t w = 0; w < W; ++w) {
      a[w] = acc[w];
      b[w] = 0.f;
    }
    int64_t p = 0;
    for (; p + 2 <= kc; p += 2) {
      const float x0 = x[p * incx], x1 = x[(p + 1) * incx];
      for (int64_t w = 0; w < W; ++w) {
        a[w] += x0 * panel[p * W + w];
        b[w] += x1 * panel[(p + 1) * W + w];
      }
    }
    if (p < kc)
      for (int64_t w = 0; w < W; ++w) a[w] += x[p * incx] * panel[p * W + w];
    for (int64_t w = 0; w < W; ++w) acc[w] = a[w] + b[w];
  };
  switch (width) {
    case 32: run(std::integral_constant<int64_t, 32>()); return;
    case 16: run(std::integral_constant<int64_t, 16>()); return;
    case 12: run(std::integral_constant<int64_t, 12>()); return;
    case 8: run(std::integral_constant<int64_t, 8>()); return;
    case 6: run(std::integral_constant<int64_t, 6>()); return;
    case 4: run(std::integral_constant<int64_t, 4>()); return;
    default:
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t w = 0; w < width; ++w) acc[w] += x[p * incx] * panel[p * width + w];
  }
}
KILN_ISA_DISPATCH(panel_times_vector, panel_times_vector_body);

// A pre-packed operand times a vector: C = alpha * op(A) * op(B) + beta * C
// plus the epilogue when m == 1 and B is packed (out runs along C's row) or
// n == 1 and A is packed (out runs down C's column). The microkernel would
// compute MR rows (NR columns) for the one there is; this reads each packed
// panel once. `x` is the other operand's single row / column.
void packed_gemv(const GemmProblem& g, bool b_side, const float* x, int64_t incx, ThreadPool* pool) {
  const MicroKernel& uk = *g.uk;
  const int64_t width = b_side ? uk.nr : uk.mr;
  const int64_t len = b_side ? g.n : g.m, pad = round_up(len, width), k = g.k;
  const float* packed = b_side ? g.b_pack : g.a_pack;
  const int64_t panels = pad / width;
  // Chunks of at least ~64k multiply-adds.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, width * k));
  parallel_for(pool, panels, grain, [&](int64_t p0, int64_t p1) {
    float acc[64];
    for (int64_t panel = p0; panel < p1; ++panel) {
      const int64_t r = panel * width, rows = std::min(width, len - r);
      std::fill_n(acc, width, 0.f);
      for (int64_t pc = 0; pc < k; pc += uk.kc) {
        const int64_t kc = std::min(uk.kc, k - pc);
        panel_times_vector(packed + pc * pad + r * kc, kc, width, x + pc * incx, incx, acc);
      }
      for (int64_t w = 0; w < rows; ++w) {
        const int64_t i = b_side ? 0 : r + w, j = b_side ? r + w : 0;
        float& c = g.c[i * g.ldc + j];
        float v = g.alpha * acc[w];
        if (g.beta != 0.f) v += g.beta * c;
        if (g.ep->row_bias) v += g.ep->row_bias[i];
        if (g.ep->col_bias) v += g.ep->col_bias[j];
        if (g.clamp) v = std::min(std::max(v, g.ep->clamp_min), g.ep->clamp_max);
        c = v;
      }
      if (g.ep->apply) {
        float* first = g.c + (b_side ? r : r * g.ldc);
        if (b_side) g.ep->apply(g.ep->apply_ctx, first, g.ldc, 1, rows);
        else g.ep->apply(g.ep->apply_ctx, first, g.ldc, rows, 1);
      }
    }
  });
}

// Calls fn(pc, kc, p0, p1) over the K blocks of a `k`-deep operand times
// ranges [p0, p1) of its `panels` panels, split over the pool: a few pieces
// per thread even when K is a single block (the packing of a shared operand
// is then not left to one thread).
template <class F>
void for_each_pack_block(ThreadPool* pool, int64_t k, int64_t kc_max, int64_t panels, const F& fn) {
  const int64_t k_blocks = (k + kc_max - 1) / kc_max;
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t groups = std::clamp<int64_t>((4 * threads + k_blocks - 1) / k_blocks, 1, panels);
  parallel_for(pool, k_blocks * groups, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t blk = u / groups, grp = u % groups;
      const int64_t pc = blk * kc_max;
      fn(pc, std::min(kc_max, k - pc), grp * panels / groups, (grp + 1) * panels / groups);
    }
  });
}

}  // namespace

namespace {
// Bumped whenever pack_a_block / pack_b_block change what they write.
constexpr int kPackLayoutVersion = 1;

std::shared_ptr<float> packed_buffer(int64_t elems) {
  const auto n = static_cast<size_t>(std::max<int64_t>(1, elems));
  return std::shared_ptr<float>(static_cast<float*>(aligned_alloc_bytes(n * sizeof(float))),
                                [](float* p) { aligned_free_bytes(p); });
}

int64_t packed_elems(const MicroKernel& uk, bool is_a, int64_t rows, int64_t cols) {
  // A: m_pad x k; B: k x n_pad.
  return is_a ? round_up(rows, uk.mr) * cols : rows * round_up(cols, uk.nr);
}
}  // namespace

std::string PackedMatrix::layout_key(bool is_a) {
  const MicroKernel& uk = kKernels[active_kernel()];
  return std::string(is_a ? "sgemm-a/" : "sgemm-b/") + uk.name + "/mr" + std::to_string(uk.mr) + "/nr" +
         std::to_string(uk.nr) + "/kc" + std::to_string(uk.kc) + "/v" + std::to_string(kPackLayoutVersion);
}

size_t PackedMatrix::packed_bytes(bool is_a, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return 0;
  return static_cast<size_t>(packed_elems(kKernels[active_kernel()], is_a, rows, cols)) * sizeof(float);
}

std::span<const uint8_t> PackedMatrix::bytes() const {
  if (!data_) return {};
  const size_t n = static_cast<size_t>(packed_elems(kKernels[kernel_], is_a_, rows_, cols_)) * sizeof(float);
  return {reinterpret_cast<const uint8_t*>(data_.get()), n};
}

PackedMatrix PackedMatrix::from_bytes(bool is_a, int64_t rows, int64_t cols, std::span<const uint8_t> bytes,
                                      std::shared_ptr<const void> holder) {
  PackedMatrix pm;
  const size_t want = packed_bytes(is_a, rows, cols);
  if (want == 0 || bytes.size() != want || reinterpret_cast<uintptr_t>(bytes.data()) % 64 != 0) return pm;
  pm.is_a_ = is_a;
  pm.kernel_ = active_kernel();
  pm.rows_ = rows;
  pm.cols_ = cols;
  pm.data_ = std::shared_ptr<const float>(std::move(holder), reinterpret_cast<const float*>(bytes.data()));
  return pm;
}

PackedMatrix PackedMatrix::pack_a(bool trans, int64_t m, int64_t k, const float* a, int64_t lda) {
  const int kernel = active_kernel();
  const MicroKernel& uk = kKernels[kernel];
  const int64_t m_pad = round_up(m, uk.mr);
  PackedMatrix pm;
  pm.is_a_ = true;
  pm.kernel_ = kernel;
  pm.rows_ = m;
  pm.cols_ = k;
  std::shared_ptr<float> buf = packed_buffer(m_pad * k);
  // Block pc holds m_pad x kc values; its panel for rows [ic, ic+mr) starts at ic * kc.
  for (int64_t pc = 0; pc < k; pc += uk.kc) {
    const int64_t kc = std::min(uk.kc, k - pc);
    pack_a_block(a, lda, trans, 0, m, pc, kc, uk.mr, buf.get() + pc * m_pad);
  }
  pm.data_ = std::move(buf);
  return pm;
}

PackedMatrix PackedMatrix::pack_b(bool trans, int64_t k, int64_t n, const float* b, int64_t ldb) {
  const int kernel = active_kernel();
  const MicroKernel& uk = kKernels[kernel];
  const int64_t n_pad = round_up(n, uk.nr);
  PackedMatrix pm;
  pm.is_a_ = false;
  pm.kernel_ = kernel;
  pm.rows_ = k;
  pm.cols_ = n;
  std::shared_ptr<float> buf = packed_buffer(n_pad * k);
  for (int64_t pc = 0; pc < k; pc += uk.kc) {
    const int64_t kc = std::min(uk.kc, k - pc);
    pack_b_block(b, ldb, trans, pc, kc, 0, n, uk.nr, buf.get() + pc * n_pad);
  }
  pm.data_ = std::move(buf);
  return pm;
}

void sgemm_ex(int64_t m, int64_t n, int64_t k, float alpha, const GemmOperand& a, const GemmOperand& b,
              float beta, float* c, int64_t ldc, ThreadPool* pool, const GemmEpilogue& epilogue) {
  if (m <= 0 || n <= 0) return;
  // A pre-packed operand fixes the microkernel (it matches the panel layout).
  int kernel = active_kernel();
  if (a.packed) kernel = a.packed->kernel();
  else if (b.packed) kernel = b.packed->kernel();
  GemmProblem g{m, n, k, alpha, beta, a, b, c, ldc, &epilogue, &kKernels[kernel],
                epilogue.clamp_min > -std::numeric_limits<float>::infinity() ||
                    epilogue.clamp_max < std::numeric_limits<float>::infinity()};
  if (k <= 0) {
    run_empty_k(g);
    return;
  }
  if (a.packed) g.a_pack = a.packed->data();
  if (b.packed) g.b_pack = b.packed->data();
  // One row times packed B, or packed A times one column: a GEMV.
  if (m == 1 && g.b_pack && !a.packed) {
    packed_gemv(g, true, a.data, a.trans ? a.ld : 1, pool);
    return;
  }
  if (n == 1 && g.a_pack && !b.packed && !b.source) {
    packed_gemv(g, false, b.data, b.trans ? 1 : b.ld, pool);
    return;
  }
  const MicroKernel& uk = *g.uk;
  g.b_direct = !g.b_pack && !b.source && !b.trans && m <= 8 * uk.mr && n >= uk.nr;
  const int64_t threads = pool ? pool->num_threads() : 1;
  const gemm::TilePlan plan =
      gemm::plan_tiles({m, n, k, g.a_pack != nullptr, g.b_pack != nullptr, g.b_direct, b.source != nullptr},
                       {uk.mr, uk.nr, uk.lane}, threads);
  if (plan.tiles() == 1) {
    run_tile(g, 0, m, 0, n);
    return;
  }
  // An operand every tile would pack in full (B when only rows are split, A
  // when only columns are) is packed once, split over the pool by K block
  // and panel range, and shared: Conv's im2col on small maps would otherwise
  // run once per tile.
  std::unique_ptr<float, AlignedFree> shared_a, shared_b;
  if (plan.share_b) {
    const int64_t n_pad = round_up(n, uk.nr);
    shared_b.reset(static_cast<float*>(aligned_alloc_bytes(static_cast<size_t>(n_pad * k) * sizeof(float))));
    float* dst = shared_b.get();
    for_each_pack_block(pool, k, uk.kc, n_pad / uk.nr, [&](int64_t pc, int64_t kc, int64_t p0, int64_t p1) {
      const int64_t j0 = p0 * uk.nr, nc = std::min(n, p1 * uk.nr) - j0;
      float* out = dst + pc * n_pad + j0 * kc;
      if (b.source) b.source->pack(pc, kc, j0, nc, uk.nr, out);
      else pack_b_block(b.data, b.ld, b.trans, pc, kc, j0, nc, uk.nr, out);
    });
    g.b_pack = dst;
  }
  if (plan.share_a) {
    const int64_t m_pad = round_up(m, uk.mr);
    shared_a.reset(static_cast<float*>(aligned_alloc_bytes(static_cast<size_t>(m_pad * k) * sizeof(float))));
    float* dst = shared_a.get();
    for_each_pack_block(pool, k, uk.kc, m_pad / uk.mr, [&](int64_t pc, int64_t kc, int64_t p0, int64_t p1) {
      const int64_t i0 = p0 * uk.mr, mc = std::min(m, p1 * uk.mr) - i0;
      pack_a_block(a.data, a.ld, a.trans, i0, mc, pc, kc, uk.mr, dst + pc * m_pad + i0 * kc);
    });
    g.a_pack = dst;
  }
  parallel_for(pool, plan.tiles(), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = t / plan.tn, c = t % plan.tn;
      run_tile(g, plan.row_begin(r), plan.row_begin(r + 1), plan.col_begin(c), plan.col_begin(c + 1));
    }
  });
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, ThreadPool* pool,
           const GemmEpilogue& epilogue) {
  sgemm_ex(m, n, k, alpha, GemmOperand::raw(a, lda, trans_a), GemmOperand::raw(b, ldb, trans_b), beta, c, ldc,
           pool, epilogue);
}

const char* sgemm_kernel_name() { return kKernels[active_kernel()].name; }

bool sgemm_force_kernel(const char* name) {
  for (int i = 0; i < kNumKernels; ++i) {
    if (std::strcmp(kKernels[i].name, name) == 0 && kKernels[i].supported()) {
      active_kernel() = i;
      return true;
    }
  }
  return false;
}

}  // namespace kiln::kernels
