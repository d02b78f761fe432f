// Content hashes for compiled partitions (the compile cache's and the
// program file's keys).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

#include "ir/graph.h"

namespace kiln::runtime {

/// A hash (32 hex digits) of a group's content: each node's op, domain,
/// opset, attributes and wiring, the boundary values' types, and the bytes of
/// every constant the group reads. Equal content gives equal keys across runs.
std::string partition_content_key(const ir::Graph& g, const std::unordered_map<ir::ValueId, Tensor>& constants,
                                  std::span<const int32_t> nodes, std::span<const ir::ValueId> inputs,
                                  std::span<const ir::ValueId> outputs);

/// The 128-bit hash of one constant's dtype, dims and bytes: exactly what
/// partition_content_key hashes for each constant a group reads, so equal
/// contents give equal words across sessions and models (value_constant_info).
std::array<uint64_t, 2> tensor_content_hash(const Tensor& t);

/// The same 128-bit hash over raw bytes (32 hex digits); not cryptographic.
std::string hash_hex(const void* data, size_t size);

/// Another 128-bit hash (32 hex digits) for whole files (the program cache's
/// model keys and checksums): four independent lanes over 8-byte words, so
/// about four times faster than hash_hex on large inputs. Not cryptographic;
/// its values differ from hash_hex's.
std::string wide_hash_hex(const void* data, size_t size);

}  // namespace kiln::runtime
