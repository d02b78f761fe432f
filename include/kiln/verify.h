// Differential testing of a backend plugin on a real model (`kiln verify`,
// `kiln check-backend --model`): the model runs once on portable kernels,
// keeping every intermediate value; then each partition the plugin compiled
// runs alone on the portable values of its inputs, so an error upstream never
// blames a partition downstream, and its boundary outputs are compared with
// portable's. For a partition that differs, the plugin is asked (through the
// public ABI, so it works for any plugin) to compile smaller convex
// sub-groups of the same nodes, topological prefixes found by bisection,
// until the first node whose output differs is named, with the error figures.
//
// Outputs of the plugin are written between guard bytes; a write outside an
// output buffer fails the partition, naming the output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/backends.h"
#include "kiln/result.h"
#include "kiln/session.h"

namespace kiln {

struct VerifyOptions {
  std::string backend;                          ///< the plugin to check (by name)
  std::vector<std::string> backend_paths;       ///< plugin files to load besides discovery
  std::shared_ptr<BackendRegistry> backend_registry;  ///< null: discovered
  std::vector<BackendOption> backend_options;   ///< for the plugin's instance
  double rtol = 1e-3;                           ///< |got - want| <= atol + rtol * |want|
  double atol = 1e-4;
  std::vector<NamedValue> inputs;               ///< given inputs; the others are random
  uint32_t seed = 1;                            ///< for random inputs
  bool bisect = true;                           ///< look inside partitions that differ
};

/// How far one value is from portable's.
struct ErrorFigures {
  double max_abs = 0;      ///< max |got - want|
  double max_rel = 0;      ///< max |got - want| / |want| (over |want| > 0)
  int64_t worst = -1;      ///< flat index of the element with the largest excess over the tolerance
  int64_t mismatched = 0;  ///< elements outside the tolerance
  int64_t numel = 0;
};

/// One value compared with portable's.
struct ValueCheck {
  std::string value;     ///< the value's name
  std::string producer;  ///< label of the node that computes it ("Conv 'conv1'")
  bool ok = true;
  ErrorFigures error;
  std::string problem;   ///< a dtype/shape difference, a missing output, guard damage ("" when numbers)
};

/// The first node of a partition whose output differs, found by bisection.
struct NodeFinding {
  std::string node;               ///< label: "Tanh 't3'"
  std::string op_type;
  size_t position = 0;            ///< its index in the partition's topological order
  std::vector<ValueCheck> outputs;  ///< its outputs as the prefix ending at it computed them
  std::string alone;              ///< the node compiled as a group of its own: "matches", or what differs
  size_t compiles = 0;            ///< sub-groups compiled to find it
};

/// One partition of the plugin.
struct PartitionVerdict {
  std::string id;
  std::vector<std::string> nodes;   ///< labels, topological order
  bool ok = true;
  std::string error;                ///< execute failed: the plugin's message
  std::vector<ValueCheck> outputs;  ///< its boundary outputs
  std::optional<NodeFinding> first_bad;
  std::string bisect_note;          ///< why bisection stopped short ("" when it found the node or did not run)
};

struct VerifyReport {
  std::string backend;
  std::vector<PartitionVerdict> partitions;
  std::vector<ValueCheck> model_outputs;  ///< the whole model through the plugin vs portable
  size_t nodes_total = 0;                 ///< nodes of the main graph
  size_t nodes_on_backend = 0;
  size_t failures() const;
};

/// Loads `model_path` twice (portable only; the backend first, fallback
/// allow), runs both with the same inputs and compares as described above.
/// Errors: the model does not load, the backend is unknown or unavailable,
/// an input is wrong, the portable run fails.
Result<VerifyReport> verify_model(const std::string& model_path, const VerifyOptions& options);

/// "max abs 0.19, max rel 0.41, 512 of 512 elements differ (worst at 17)".
std::string describe(const ErrorFigures& e);

}  // namespace kiln
