// External tensor data (ONNX TensorProto.data_location == EXTERNAL): the
// bytes live in a side file named by the tensor's external_data entries
// "location" (relative to the model's folder), "offset" and "length".
//
// Each side file is mapped once (read-only, MAP_PRIVATE) and shared by every
// tensor that lives in it. A tensor whose bytes start on a kTensorAlignment
// boundary is wrapped without a copy; its holder keeps the mapping alive, so
// the Tensor stays valid after the importer is gone. Such tensors point to
// read-only memory: writing through them faults. Others are copied.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include "ir/graph.h"
#include "kiln/result.h"
#include "kiln/tensor.h"
#include "onnx/onnx_pb.h"

namespace kiln::importer {

/// A whole file mapped read-only; unmapped when the last holder goes.
class MappedFile {
 public:
  /// Maps `path`. Errors: kNotFound when it does not exist, kIo otherwise.
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  size_t size() const { return size_; }

 private:
  MappedFile(void* addr, size_t size) : addr_(addr), size_(size) {}
  void* addr_ = nullptr;
  size_t size_ = 0;
};

/// Resolves external tensor data relative to one folder, mapping each side
/// file at most once. Not thread-safe; one per import.
class ExternalData {
 public:
  /// `base_dir` is the folder locations are relative to ("" = current folder).
  explicit ExternalData(std::string base_dir) : base_dir_(std::move(base_dir)) {}

  /// The data of `proto` (whose data_location is EXTERNAL) as a tensor of
  /// `dtype` and `shape` holding `nbytes` bytes. Errors name the tensor and
  /// the file: a missing location, an absolute path or one that leaves the
  /// base folder, a missing file, a length that disagrees with the dims, or
  /// a file too short for offset + length.
  Result<Tensor> load(const onnx::TensorProto& proto, DType dtype, const Shape& shape, size_t nbytes);

  /// Number of tensors wrapped without a copy so far (for tests and stats).
  size_t num_mapped() const { return num_mapped_; }

  /// Where the tensor whose data is `data` (a tensor load() returned) lives:
  /// the resolved file, offset and length, or null for other pointers.
  const ir::ExternalLocation* location_of(const void* data) const {
    auto it = locations_.find(data);
    return it == locations_.end() ? nullptr : &it->second;
  }

 private:
  std::string base_dir_;
  std::unordered_map<std::string, std::shared_ptr<MappedFile>> files_;
  size_t num_mapped_ = 0;
  std::unordered_map<const void*, ir::ExternalLocation> locations_;  // by the loaded tensor's data
};

}  // namespace kiln::importer
