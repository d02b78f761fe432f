// Attribute: a named node attribute of any ONNX attribute type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/value_type.h"
#include "kiln/tensor.h"

namespace kiln::ir {

class Graph;

enum class AttrType : uint8_t {
  kUndefined = 0,
  kFloat = 1,
  kInt = 2,
  kString = 3,
  kTensor = 4,
  kGraph = 5,
  kSparseTensor = 11,
  kTypeProto = 13,
  kFloats = 6,
  kInts = 7,
  kStrings = 8,
  kTensors = 9,
  kGraphs = 10,
  kSparseTensors = 12,
  kTypeProtos = 14,
};  // values equal onnx::AttributeProto::AttributeType

const char* attr_type_name(AttrType t);

struct Attribute {
  std::string name;
  AttrType type = AttrType::kUndefined;
  /// Inside a function body: the caller's attribute this one refers to.
  std::string ref_attr_name;

  float f = 0.f;
  int64_t i = 0;
  std::string s;  // bytes, not necessarily UTF-8
  Tensor t;
  std::shared_ptr<Graph> g;
  ValueType tp;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  std::vector<ValueType> tps;
};

}  // namespace kiln::ir
