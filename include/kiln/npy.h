// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
//
// Supported: little-endian (or byte-order-free) C-order arrays of bool, the
// signed and unsigned integers of 8..64 bits, float16/32/64, complex64/128,
// and fixed-width strings ('<U', read and written; '|S', read only), which
// become DType::kString tensors holding UTF-8. Everything else — Fortran
// order, big-endian data, object or structured arrays, truncated files — is
// refused with an error that names the file and the problem.
//
// Format reference: numpy/lib/format.py ("NEP 1").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/result.h"
#include "kiln/tensor.h"

namespace kiln {

/// Parses the bytes of a whole .npy file into an owned tensor. `what` names
/// the source in error messages (a path, or "buffer").
Result<Tensor> parse_npy(std::span<const uint8_t> bytes, const std::string& what = "npy buffer");
/// Reads a .npy file. Errors: kIo if the file cannot be read, kInvalidArgument
/// if it is not a supported .npy array.
Result<Tensor> read_npy_file(const std::string& path);

/// Serializes `tensor` as .npy (version 1.0, or 2.0 if the header needs it;
/// 3.0 is never needed since the header is ASCII). kBFloat16 and kUndefined
/// have no NumPy dtype and are refused.
Result<std::vector<uint8_t>> serialize_npy(const Tensor& tensor);
/// Writes `tensor` to `path` as .npy (see serialize_npy).
Status write_npy_file(const std::string& path, const Tensor& tensor);

/// True if `bytes` start with the .npy magic string "\x93NUMPY".
bool has_npy_magic(std::span<const uint8_t> bytes);

}  // namespace kiln
