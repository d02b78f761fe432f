// Session: the public entry point. Load a model, list its inputs and
// outputs, run it with named inputs.
//
//   KILN_ASSIGN_OR_RETURN(auto session, kiln::Session::load("model.onnx"));
//   KILN_ASSIGN_OR_RETURN(auto outputs, session->run({{"x", x}}));
//
// A Session is immutable after load; run() may be called from several
// threads at once (each call gets its own memory arena).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backends.h"
#include "kiln/profile.h"
#include "kiln/result.h"
#include "kiln/run_options.h"
#include "kiln/value.h"

namespace kiln {

struct SessionOptions {
  /// Intra-op threads, counting the calling thread. 0 = one per core.
  int threads = 1;
  /// Run ONNX shape inference at load (enables the static memory plan).
  bool infer_shapes = true;
  /// Fold nodes whose inputs are all constant at load.
  bool fold_constants = true;
  /// Apply the load-time graph rewrites (Conv+BatchNormalization,
  /// Conv+activation, MatMul+Add, Gelu/LayerNorm patterns, Transpose and
  /// Reshape chains; docs/architecture.md, "Optimizer"). Results stay within
  /// float rounding of the unrewritten graph.
  bool rewrite_graph = true;

  /// Backends to try, in order; "portable" may be named (it is implied
  /// last). Empty: every available plugin of priority > 0, highest first,
  /// then portable. {"portable"}: no plugins at all.
  std::vector<std::string> backends;
  /// Plugin files or folders to load before KILN_BACKEND_PATH and the
  /// default folders (see BackendDiscovery).
  std::vector<std::string> backend_paths;
  /// Options per backend (NAME.KEY=VALUE); checked against each plugin's
  /// schema. The key "device" picks a device by index or name.
  std::vector<BackendOption> backend_options;
  /// What happens to nodes no selected plugin claims.
  FallbackPolicy fallback = FallbackPolicy::kAllow;
  /// Plugins to use; null: discovered for this session. Shared because one
  /// discovery (and its loaded libraries) may serve many sessions.
  std::shared_ptr<BackendRegistry> backend_registry;
  /// Compile cache folder (runtime/compile_cache.h): compiled partitions
  /// are stored there and imported on later loads. Empty: KILN_CACHE_DIR if
  /// set, else no cache.
  std::string cache_dir;
};

/// The declared type of a model input or output.
struct IoInfo {
  enum class Kind : uint8_t { kTensor, kSequence, kOptional, kOther };
  std::string name;
  Kind kind = Kind::kTensor;
  DType dtype = DType::kUndefined;  ///< element dtype (of the tensor, or inside the sequence/optional)
  bool has_shape = false;           ///< false: rank unknown
  std::vector<int64_t> dims;        ///< -1 where a dim is unknown or symbolic
  std::vector<std::string> dim_params;  ///< symbol names ("" where none), same length as dims
  /// "float32[1, 3, 224, 224]", "float32[N, 128]", "seq(int64[?])"
  std::string type_string;
};

using NamedValue = std::pair<std::string, Value>;

class Session {
 public:
  /// Loads an ONNX model file (external data is read relative to its
  /// folder), or a .kiln program (kiln/program.h), told apart by magic bytes.
  static Result<std::unique_ptr<Session>> load(const std::string& path, const SessionOptions& options = {});
  /// Loads an ONNX model from bytes; `base_dir` resolves external data.
  static Result<std::unique_ptr<Session>> load_from_bytes(std::span<const uint8_t> bytes,
                                                          const SessionOptions& options = {},
                                                          const std::string& base_dir = "");
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::vector<IoInfo>& inputs() const;
  const std::vector<IoInfo>& outputs() const;

  /// Runs the model. Every model input must be given once, by name, with the
  /// declared dtype and a shape matching the declared known dims. Returns the
  /// outputs in outputs() order; they own their memory.
  /// With `profile`, also records how long each node took.
  Result<std::vector<Value>> run(std::span<const NamedValue> inputs, RunProfile* profile = nullptr) const;
  /// The same under run control: setting `*options.cancel` (from any thread)
  /// or passing `options.deadline` stops the run with kCancelled or
  /// kDeadlineExceeded, naming the node it stopped before. Checked between
  /// nodes; backend plugins poll it inside their partitions.
  Result<std::vector<Value>> run(std::span<const NamedValue> inputs, const RunOptions& options,
                                 RunProfile* profile = nullptr) const;
  Result<std::vector<Value>> run(std::initializer_list<NamedValue> inputs) const {
    return run(std::span<const NamedValue>(inputs.begin(), inputs.size()));
  }

  /// Where each node went: partitions per backend, portable nodes and why.
  const PlacementReport& placement() const;

  /// Number of nodes the executor runs (after constant folding).
  size_t num_nodes() const;

 private:
  struct Impl;
  friend struct SessionFactory;  // builds an Impl (src/api/session.cpp)
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
