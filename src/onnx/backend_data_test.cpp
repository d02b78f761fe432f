// Imports every model of the ONNX backend test data (libonnx-testdata) and
// reads every input/output .pb file beside it, with the type the model
// declares for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "onnx/importer.h"
#include "onnx/tensor_proto_io.h"

#ifndef KILN_ONNX_BACKEND_DATA
#define KILN_ONNX_BACKEND_DATA "/usr/include/onnx/backend/test/data"
#endif

namespace kiln::importer {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> backend_models() {
  std::vector<fs::path> models;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    const fs::path root = fs::path(KILN_ONNX_BACKEND_DATA) / suite;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    for (const auto& entry : fs::directory_iterator(root))
      if (fs::exists(entry.path() / "model.onnx")) models.push_back(entry.path());
  }
  std::sort(models.begin(), models.end());
  return models;
}

// Whether `v` fits the declared type `t` (element dtype of tensors and of
// sequences; optionals may be empty).
bool fits(const Value& v, const ir::ValueType& t) {
  using Kind = ir::ValueType::Kind;
  switch (t.kind) {
    case Kind::kTensor: return v.is_tensor() && (t.dtype == DType::kUndefined || v.tensor().dtype() == t.dtype);
    case Kind::kSequence:
      if (!v.is_sequence()) return false;
      for (const Tensor& item : v.sequence_items())
        if (t.elem && t.elem->kind == Kind::kTensor && item.dtype() != t.elem->dtype) return false;
      return true;
    case Kind::kOptional: return v.is_none() || (t.elem && fits(v, *t.elem));
    default: return true;
  }
}

struct Failures {
  size_t count = 0;
  std::string report;
  void add(const std::string& what) {
    if (count++ < 25) report += what + "\n";
  }
};

// Whether shape inference typed every value of the main graph.
bool fully_typed(const ir::Graph& g) {
  for (const ir::ValueInfo& v : g.values)
    if (v.type.kind == ir::ValueType::Kind::kUnknown) return false;
  return true;
}

void check_model(const fs::path& dir, const ImportOptions& options, Failures* failures, size_t* values_read,
                 size_t* typed_models = nullptr) {
  auto model = import_model_file((dir / "model.onnx").string(), options);
  if (!model.ok()) {
    failures->add(dir.string() + ": " + model.status().to_string());
    return;
  }
  const ir::Graph& g = model->graph;
  if (typed_models && fully_typed(g)) ++*typed_models;
  for (const auto& set : fs::directory_iterator(dir)) {
    if (!set.is_directory() || set.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
    for (const auto& file : fs::directory_iterator(set.path())) {
      const std::string fname = file.path().filename().string();
      const bool is_input = fname.rfind("input_", 0) == 0;
      if (!is_input && fname.rfind("output_", 0) != 0) continue;
      const size_t index = std::stoul(fname.substr(is_input ? 6 : 7));
      const std::vector<ir::ValueId>& ids = is_input ? g.inputs : g.outputs;
      if (index >= ids.size()) {
        failures->add(file.path().string() + ": no graph " + (is_input ? "input " : "output ") +
                      std::to_string(index));
        continue;
      }
      const ir::ValueType& type = g.value(ids[index]).type;
      std::string name;
      auto v = read_value_file(file.path().string(), &type, &name);
      if (!v.ok()) {
        failures->add(file.path().string() + ": " + v.status().to_string());
        continue;
      }
      ++*values_read;
      if (!fits(*v, type)) failures->add(file.path().string() + ": value does not fit " + type.to_string());
    }
  }
}

TEST(BackendDataTest, ImportsEveryModelAndReadsEveryValueFile) {
  const auto models = backend_models();
  if (models.empty()) GTEST_SKIP() << "no ONNX backend test data under " << KILN_ONNX_BACKEND_DATA;
  EXPECT_GT(models.size(), 1000u);
  Failures failures;
  size_t values = 0;
  size_t typed = 0;
  for (const fs::path& dir : models) check_model(dir, {}, &failures, &values, &typed);
  EXPECT_EQ(failures.count, 0u) << failures.report;
  EXPECT_GT(values, 2500u);
  // Shape inference must not be skipped for well-formed models.
  EXPECT_GT(typed, models.size() * 95 / 100) << typed << " of " << models.size() << " fully typed";
}

TEST(BackendDataTest, ImportsEveryModelWhenNoOpHasAKernel) {
  // Every op whose schema has a function body gets inlined: the bodies must
  // import (and sort, and validate) as well as the models themselves.
  const auto models = backend_models();
  if (models.empty()) GTEST_SKIP() << "no ONNX backend test data";
  ImportOptions options;
  options.has_kernel = [](const std::string&, const std::string&, int) { return false; };
  Failures failures;
  size_t values = 0;
  size_t without_schema_op = 0;
  for (const fs::path& dir : models) {
    check_model(dir, options, &failures, &values);
    if (dir.filename() == "test_mvn") {
      auto m = import_model_file((dir / "model.onnx").string(), options);
      ASSERT_TRUE(m.ok());
      for (const ir::Node& n : m->graph.nodes) without_schema_op += n.op_type == "MeanVarianceNormalization";
      EXPECT_GT(m->graph.nodes.size(), 5u);
    }
  }
  EXPECT_EQ(without_schema_op, 0u);
  EXPECT_EQ(failures.count, 0u) << failures.report;
}

}  // namespace
}  // namespace kiln::importer
