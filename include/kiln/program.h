// Ahead-of-time programs: `kiln compile` turns an ONNX model into a .kiln
// file (docs/program-format.md) holding the graph, its constants and the
// backends' compiled partitions. Session::load accepts such a file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/result.h"
#include "kiln/session.h"

namespace kiln {

struct CompileOptions {
  /// Keep the portable nodes usable for partitions whose backend is missing
  /// or rejects its blob at load (they then run on portable kernels).
  bool keep_fallback = false;
};

struct ProgramPartitionInfo {
  std::string id;
  std::string backend;
  std::string backend_version;
  std::string compat_key;
  uint64_t blob_bytes = 0;
};

/// What a program file holds (`kiln inspect`, `kiln compile`'s summary).
struct ProgramSummary {
  uint32_t format_version = 0;
  std::string producer;
  uint64_t file_bytes = 0;
  uint64_t constant_bytes = 0;
  size_t num_nodes = 0;
  size_t num_values = 0;
  size_t num_initializers = 0;
  std::vector<std::string> backends;
  std::vector<std::pair<std::string, std::string>> options;
  bool keep_fallback = false;
  std::vector<ProgramPartitionInfo> partitions;
  bool has_memory_plan = false;
  uint64_t arena_bytes = 0;   // the stored memory plan's arena
  size_t num_packed = 0;      // packed weights stored for portable kernels
  uint64_t packed_bytes = 0;
  std::vector<std::string> packed_layouts;  // distinct packing layouts (key without the slot)
};

/// Imports `model_path`, partitions it over the backends of `options`,
/// compiles and exports every partition, and writes `out_path`.
Result<ProgramSummary> compile_program(const std::string& model_path, const std::string& out_path,
                                       const SessionOptions& options = {}, const CompileOptions& compile = {});

/// Reads and checks a program file without loading any backend.
Result<ProgramSummary> inspect_program(const std::string& path);

/// True when `path` starts with the .kiln magic bytes.
bool is_program_file(const std::string& path);

}  // namespace kiln
