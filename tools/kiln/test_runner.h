// The ONNX node-test runner: a test folder (model.onnx plus
// test_data_set_N/{input,output}_M.pb) is loaded, run and compared with the
// expected outputs. `kiln conformance` runs suites with it; `kiln
// check-backend` runs the node tests through a plugin with it.
//
// Tests of nondeterministic ops (Bernoulli, Random*, Multinomial, Dropout in
// training mode with ratio > 0) run too, and pass if Kiln reproduces the
// reference (its seeded Dropout draws as numpy does); if not, they are
// SKIPped with the reason and the mismatch, never FAILed.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "compare.h"
#include "kiln/result.h"
#include "kiln/session.h"

namespace kiln::cli {

struct TestCase {
  std::string name;
  std::filesystem::path dir;
};

enum class Verdict : char { kPass = 'P', kFail = 'F', kSkip = 'S' };

struct TestOutcome {
  Verdict verdict = Verdict::kFail;
  std::string reason;
  bool load_failed = false;  ///< the model did not load with NodeTestOptions::session
};

struct NodeTestOptions {
  SessionOptions session;  ///< how each model is loaded
  Tolerance tol;
  int timeout_s = 600;     ///< for run_node_test_isolated (0: none)
  /// When set, each data set's outputs are also compared with those of a
  /// session loaded with these options (skipped when that one fails).
  std::optional<SessionOptions> reference;
  /// Called once the model has loaded; an outcome it returns ends the test
  /// with it (check-backend skips models its plugin claims nothing of).
  std::function<std::optional<TestOutcome>(const Session&)> on_load;
};

/// The test folders under each root: a root with model.onnx is one test,
/// else each subfolder with one (sorted by name). Errors name the root.
Result<std::vector<TestCase>> discover(const std::vector<std::string>& roots);

/// Runs every data set of `test` in this process.
TestOutcome run_node_test(const TestCase& test, const NodeTestOptions& opts);

/// The same in a child process; a crash, an uncaught exception or a timeout fails it.
TestOutcome run_node_test_isolated(const TestCase& test, const NodeTestOptions& opts);

}  // namespace kiln::cli
