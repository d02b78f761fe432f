// The SGEMM engine shared by MatMul, Gemm, Conv, ConvTranspose and the
// quantized/Einsum kernels:
//
//   C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C  (+ bias, clamp)
//
// All matrices are row-major with a leading dimension (elements between
// rows); op(X) is X or its transpose. The engine is BLIS-style: op(A) and
// op(B) are copied into panels of MR rows / NR columns (packing), blocked so a
// KC x NR sliver of B stays in L1 and an MC x KC block of A in L2, and an
// MR x NR register microkernel does the arithmetic. The microkernel is picked
// once per process from what the CPU supports (AVX-512F, AVX2+FMA, or a
// portable C++ kernel that the compiler vectorizes for the baseline ISA).
//
// Operands that do not change between runs (Conv weights, MatMul weights) can
// be packed once with PackedMatrix and passed instead of a raw pointer.
//
// None of these functions allocate tensors; packing scratch is thread-local.
// All are thread-safe: concurrent calls share nothing but read-only inputs.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>

#include "core/thread_pool.h"

namespace kiln::kernels {

/// What the engine does to C after alpha * op(A) * op(B): on top of
/// `beta * C` it adds a per-row bias (Conv: one per output channel) and/or a
/// per-column bias (Gemm/Linear), then clamps (fused Relu/Clip). Pointers are
/// borrowed for the duration of the call; null means none.
struct GemmEpilogue {
  const float* row_bias = nullptr;  // m values
  const float* col_bias = nullptr;  // n values
  float clamp_min = -std::numeric_limits<float>::infinity();
  float clamp_max = std::numeric_limits<float>::infinity();
  /// When set, runs on every block of C once it is final (after the biases
  /// and the clamp), a few microkernel tiles at a time while they are still
  /// in cache: an activation that would otherwise be a pass over all of C
  /// (Conv + Silu/HardSwish). `c` points at the block's first element; rows
  /// are `ldc` apart. Called from the pool's threads, concurrently on
  /// disjoint blocks.
  void (*apply)(const void* ctx, float* c, int64_t ldc, int64_t rows, int64_t cols) = nullptr;
  const void* apply_ctx = nullptr;
};

/// op(A) or op(B) copied into the engine's panel layout for the microkernel
/// of this process. Move-only; owns its memory, or (from_bytes) borrows
/// bytes packed earlier, such as a program file's mapping.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  PackedMatrix(PackedMatrix&&) noexcept = default;
  PackedMatrix& operator=(PackedMatrix&&) noexcept = default;

  /// Packs op(A), an m x k matrix: A[i * lda + p], or A[p * lda + i] when
  /// `trans`. The result is the left operand of sgemm_packed.
  static PackedMatrix pack_a(bool trans, int64_t m, int64_t k, const float* a, int64_t lda);
  /// Packs op(B), a k x n matrix: B[p * ldb + j], or B[j * ldb + p] when
  /// `trans`. The result is the right operand of sgemm_packed.
  static PackedMatrix pack_b(bool trans, int64_t k, int64_t n, const float* b, int64_t ldb);

  /// Names the panel layout pack_a (`is_a`) or pack_b produces in this
  /// process: microkernel, register tile, KC block and a layout version.
  /// Bytes packed under another name are not usable here.
  static std::string layout_key(bool is_a);
  /// Bytes pack_a / pack_b make for `rows` x `cols` in this process.
  static size_t packed_bytes(bool is_a, int64_t rows, int64_t cols);
  /// A view of bytes packed earlier under layout_key(is_a) (by pack_a /
  /// pack_b, possibly in another process); `holder` keeps them alive. Empty
  /// (a miss) unless the size is exactly packed_bytes and the data 64-byte
  /// aligned, so bytes from a file are never read past their end.
  static PackedMatrix from_bytes(bool is_a, int64_t rows, int64_t cols, std::span<const uint8_t> bytes,
                                 std::shared_ptr<const void> holder);

  bool empty() const { return data_ == nullptr; }
  bool is_a() const { return is_a_; }
  /// The microkernel (index into the engine's table) it was packed for.
  int kernel() const { return kernel_; }
  int64_t rows() const { return rows_; }  // m for A, k for B
  int64_t cols() const { return cols_; }  // k for A, n for B
  const float* data() const { return data_.get(); }
  /// The packed bytes (packed_bytes(is_a, rows, cols) of them).
  std::span<const uint8_t> bytes() const;
  /// Shares ownership of the packed bytes (they stay valid while it lives).
  std::shared_ptr<const void> holder() const { return data_; }

 private:
  std::shared_ptr<const float> data_;
  bool is_a_ = false;
  int kernel_ = 0;
  int64_t rows_ = 0, cols_ = 0;
};

/// Produces op(B) directly in the packed panel layout instead of reading a
/// stored matrix: Conv's implicit im2col, which so never materializes the
/// whole column matrix. Implementations must be thread-safe (const).
class BPanelSource {
 public:
  virtual ~BPanelSource() = default;
  /// Writes rows [p0, p0 + kc) and columns [j0, j0 + nc) of B: for each group
  /// of `nr` columns, kc rows of `nr` consecutive values,
  /// out[(j / nr) * kc * nr + p * nr + j % nr] = B(p0 + p, j0 + j), with the
  /// columns past j0 + nc of the last group set to zero.
  virtual void pack(int64_t p0, int64_t kc, int64_t j0, int64_t nc, int64_t nr, float* out) const = 0;
};

/// One operand of the engine: a raw row-major matrix (with transpose flag and
/// leading dimension), a pre-packed one, or (B only) a panel source. Views;
/// they own nothing.
struct GemmOperand {
  const float* data = nullptr;
  int64_t ld = 0;
  bool trans = false;
  const PackedMatrix* packed = nullptr;  // when set, data/ld/trans are unused
  const BPanelSource* source = nullptr;  // B only; when set, the rest is unused

  static GemmOperand raw(const float* p, int64_t ld, bool trans = false) { return {p, ld, trans, nullptr, nullptr}; }
  static GemmOperand prepacked(const PackedMatrix& m) { return {nullptr, 0, false, &m, nullptr}; }
  static GemmOperand from_source(const BPanelSource& s) { return {nullptr, 0, false, nullptr, &s}; }
};

/// C = alpha * op(A) * op(B) + beta * C, then the epilogue. When beta == 0, C
/// is not read (it may hold NaN). m, n, k may be 0 (k == 0 sets C to
/// beta * C plus the epilogue). Splits the work over `pool` (may be null)
/// when it is large enough.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, ThreadPool* pool,
           const GemmEpilogue& epilogue = {});

/// The same with operands that may be pre-packed. A packed A must be m x k
/// and a packed B k x n; the caller checks (the kernels do, at init).
void sgemm_ex(int64_t m, int64_t n, int64_t k, float alpha, const GemmOperand& a, const GemmOperand& b,
              float beta, float* c, int64_t ldc, ThreadPool* pool, const GemmEpilogue& epilogue = {});

/// A straightforward (vectorizable, unblocked) GEMM for every other numeric
/// type: C = op(A) * op(B) (+ C when `accumulate`). Accumulates in T, as
/// numpy does for integer matmul.
template <class T>
void gemm_generic(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                  const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * ldc;
    if (!accumulate)
      for (int64_t j = 0; j < n; ++j) crow[j] = T(0);
    for (int64_t p = 0; p < k; ++p) {
      const T av = trans_a ? a[p * lda + i] : a[i * lda + p];
      if (!trans_b) {
        const T* brow = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
      } else {
        for (int64_t j = 0; j < n; ++j) crow[j] += av * b[j * ldb + p];
      }
    }
  }
}

/// The name of the microkernel this process uses: "avx512f", "avx2+fma" or
/// "portable".
const char* sgemm_kernel_name();

/// Forces the microkernel (for tests and benchmarks comparing them): one of
/// the names above. Returns false (and changes nothing) if the CPU lacks it.
/// Not thread-safe; call before any sgemm and before packing matrices.
bool sgemm_force_kernel(const char* name);

}  // namespace kiln::kernels
