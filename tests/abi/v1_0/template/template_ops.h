// The template backend's kernels: float32 Add, Mul (numpy broadcasting),
// Relu and MatMul (numpy matmul semantics). Plain loops a compiler can
// vectorize; parallel over the host's thread pool through ExecContext.
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/c/backend_sdk.hpp"

namespace kiln_template {

/// A float32 tensor the kernels read or write (borrowed memory).
struct F32 {
  std::vector<int64_t> dims;
  float* data = nullptr;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

/// Output dims of numpy broadcasting; throws kiln::sdk::Error when they do not broadcast.
std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
/// Output dims of MatMul; throws when the inner dims differ or a rank is 0.
std::vector<int64_t> matmul_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

enum class Binary { kAdd, kMul };
/// out = a (op) b; out.dims must be broadcast_dims(a.dims, b.dims).
void binary(kiln::sdk::ExecContext& ctx, Binary op, const F32& a, const F32& b, const F32& out);
/// out = max(x, 0).
void relu(kiln::sdk::ExecContext& ctx, const F32& x, const F32& out);
/// out = a @ b; out.dims must be matmul_dims(a.dims, b.dims).
void matmul(kiln::sdk::ExecContext& ctx, const F32& a, const F32& b, const F32& out);

}  // namespace kiln_template
