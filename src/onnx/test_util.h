// Helpers shared by the importer tests (not part of the library).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "onnx/defs/parser.h"
#include "onnx/importer.h"
#include "onnx/onnx_pb.h"

namespace kiln::importer::testing {

/// Parses ONNX textual syntax (onnx/defs/parser.h); fails the test on error.
inline onnx::ModelProto parse_text(const char* text) {
  onnx::ModelProto m;
  auto s = onnx::OnnxParser::Parse(m, text);
  EXPECT_TRUE(s.IsOK()) << s.ErrorMessage();
  return m;
}

inline std::vector<uint8_t> to_bytes(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return {s.begin(), s.end()};
}

inline Result<ir::Model> import_proto(const onnx::ModelProto& m, const ImportOptions& options = {}) {
  const std::vector<uint8_t> bytes = to_bytes(m);
  return import_model_bytes(bytes, options);
}

inline Result<ir::Model> import_text(const char* text, const ImportOptions& options = {}) {
  return import_proto(parse_text(text), options);
}

/// A fresh folder under TMPDIR, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kiln_onnx_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(file(name), std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::string path_;
};

/// The ir value named `name` in `g`, failing the test when there is none.
inline const ir::ValueInfo& value_named(const ir::Graph& g, const std::string& name) {
  const ir::ValueId id = g.find_value(name);
  EXPECT_NE(id, ir::kNoValue) << "no value '" << name << "'";
  static const ir::ValueInfo kNone;
  return id == ir::kNoValue ? kNone : g.value(id);
}

}  // namespace kiln::importer::testing
