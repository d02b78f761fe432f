// Value: what flows along a graph edge. Most edges carry a Tensor; ONNX also
// has sequences of tensors and optionals. An optional that holds a value is
// stored as that value; an empty optional is kind kNone.
#pragma once

#include <utility>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

class Value {
 public:
  enum class Kind : uint8_t { kNone, kTensor, kSequence };

  Value() = default;
  Value(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT: implicit by design
  static Value sequence(std::vector<Tensor> items, DType elem_dtype = DType::kUndefined) {
    Value v;
    v.kind_ = Kind::kSequence;
    v.sequence_ = std::move(items);
    v.elem_dtype_ = elem_dtype;
    return v;
  }
  /// An empty optional (or an absent value).
  static Value none() { return Value(); }

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_none() const { return kind_ == Kind::kNone; }

  Tensor& tensor() { return tensor_; }
  const Tensor& tensor() const { return tensor_; }
  std::vector<Tensor>& sequence_items() { return sequence_; }
  const std::vector<Tensor>& sequence_items() const { return sequence_; }
  /// Element dtype of a sequence (known even when it is empty), else kUndefined.
  DType elem_dtype() const { return elem_dtype_; }

  /// Deep copy.
  Value clone() const {
    Value v;
    v.kind_ = kind_;
    v.elem_dtype_ = elem_dtype_;
    if (tensor_.defined()) v.tensor_ = tensor_.clone();
    for (const Tensor& t : sequence_) v.sequence_.push_back(t.clone());
    return v;
  }

  void reset() {
    kind_ = Kind::kNone;
    tensor_ = Tensor();
    sequence_.clear();
  }

 private:
  Kind kind_ = Kind::kNone;
  DType elem_dtype_ = DType::kUndefined;
  Tensor tensor_;
  std::vector<Tensor> sequence_;
};

}  // namespace kiln
