// What the groups of the backend conformance kit (kiln/backend_check.h)
// share: loading the plugin under test alone, with its log captured.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/backend_check.h"
#include "runtime/backends/plugin.h"
#include "runtime/program.h"

namespace kiln::backend_check {

/// Log lines a plugin wrote (through the host), for leak and misuse reports.
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;
  runtime::PluginLoadOptions load_options();
  /// Lines containing `needle`.
  std::vector<std::string> find(const std::string& needle);
};

/// A registry holding only the plugin under test (loaded with `capture`).
Result<std::shared_ptr<BackendRegistry>> load_for_check(const Options& o, LogCapture& capture);

/// The registry and its one plugin.
struct Loaded {
  std::shared_ptr<BackendRegistry> registry;
  std::shared_ptr<runtime::LoadedPlugin> plugin;
};

/// Loads the plugin; adds a failure (it does not load) or a skip (it is not
/// available here) under `what` and returns false when it cannot be used.
bool load_usable(const Options& o, LogCapture& capture, Report& r, const char* what, Loaded* out);

/// Runs every partition of `program` once more on its own, on random inputs,
/// each output between guard bytes: "" when no plugin wrote outside an
/// output buffer, else which partition, op and output, and how far.
std::string guard_problems(const runtime::Program& program);

}  // namespace kiln::backend_check
