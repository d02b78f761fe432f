// The .kiln program file: write and load (docs/program-format.md).
//
// Layout: a 16-byte header (magic "KILNPRG\0", u32 format version, u32
// FlatBuffer size), the FlatBuffer (schema program.fbs), then constant and
// blob segments, each at a 64-byte-aligned file offset. Loading maps the file
// and checks it completely (the FlatBuffers verifier, then every id, index,
// segment offset and size against the file) before anything is used;
// initializers then point into the mapping, not copied.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "kiln/result.h"

namespace kiln::program {

inline constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'R', 'G', '\0'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr size_t kHeaderSize = 16;
inline constexpr size_t kSegmentAlign = 64;

/// True when `head` (the file's first bytes) starts with the magic.
bool has_program_magic(std::span<const uint8_t> head);
/// True when the file at `path` starts with the magic (false if unreadable).
bool is_program_file(const std::string& path);

/// One compiled partition: identity, what it was compiled for, its blob.
struct PartitionRecord {
  std::string id;
  std::string key;
  std::string backend;
  std::string backend_version;
  std::string compat_key;
  std::span<const uint8_t> blob;  // writer: any memory; loader: inside the mapping
};

/// The main graph's static memory plan (runtime::MemoryPlan's fields).
struct StoredPlan {
  bool present = false;
  uint64_t arena_bytes = 0;
  std::vector<int64_t> offsets;  // per main-graph value; -1 = not in the arena
  std::vector<uint64_t> sizes;
};

/// One packed constant weight (kernels/prepack.h).
struct PackedRecord {
  ir::ValueId value = ir::kNoValue;  // the node's first output
  std::string key;
  std::span<const uint8_t> bytes;  // writer: any memory; loader: inside the mapping, 64-byte aligned
};

struct ProgramContents {
  std::string producer;
  std::vector<std::string> backends;  // backend order at compile time
  std::vector<std::pair<std::string, std::string>> options;  // "NAME.KEY", value
  bool keep_fallback = false;
  uint64_t arena_bytes = 0;
  std::vector<PartitionRecord> partitions;
  StoredPlan plan;
  std::vector<PackedRecord> packed;
};

/// Writes `graph` and `contents` to `path` (through a temporary file and a rename).
Status write_program(const ir::Graph& graph, const ProgramContents& contents, const std::string& path);

struct LoadedProgram {
  std::shared_ptr<void> mapping;      // keeps the bytes alive (initializers point into it)
  size_t file_size = 0;
  uint32_t format_version = 0;
  ir::Graph graph;
  ProgramContents contents;
  size_t constant_bytes = 0;  // bytes of initializer segments
};

/// Maps and checks a program file.
Result<LoadedProgram> load_program_file(const std::string& path);
/// Checks a program held in `bytes` (copied into an aligned buffer first).
Result<LoadedProgram> load_program_bytes(std::span<const uint8_t> bytes);

}  // namespace kiln::program
