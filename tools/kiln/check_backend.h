// kiln check-backend: the conformance kit for backend plugins. The checks
// run in groups; each group runs in a child process, so a plugin that
// crashes fails that group (with the signal) instead of ending the run.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/backends.h"
#include "runtime/backends/plugin.h"

namespace kiln::cli::check {

enum class Outcome { kPass, kFail, kSkip };

struct Row {
  std::string check;
  Outcome outcome = Outcome::kPass;
  std::string detail;
};

/// Collects rows; `sink` (if set) also receives each row as it is added, so
/// a group's rows survive the group's process crashing.
class Report {
 public:
  std::function<void(const Row&)> sink;
  void add(std::string check, Outcome o, std::string detail = "");
  void pass(std::string check, std::string detail = "") { add(std::move(check), Outcome::kPass, std::move(detail)); }
  void fail(std::string check, std::string detail) { add(std::move(check), Outcome::kFail, std::move(detail)); }
  void skip(std::string check, std::string why) { add(std::move(check), Outcome::kSkip, std::move(why)); }
  /// pass when `ok`, else fail.
  void expect(bool ok, std::string check, std::string detail) {
    add(std::move(check), ok ? Outcome::kPass : Outcome::kFail, std::move(detail));
  }
  const std::vector<Row>& rows() const { return rows_; }
  size_t failures() const;

 private:
  std::vector<Row> rows_;
};

struct Options {
  std::string library;
  std::string suite;   // ONNX node tests folder ("" to skip)
  std::string filter;  // substring of test names
};

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

// The groups, in the order they run.
void check_abi(const Options& o, Report& r);        // load, entry, tables, info, devices, options
void check_lifecycle(const Options& o, Report& r);  // create/release, options, properties, NULL releases
void check_capability(const Options& o, Report& r); // capability answers, compile errors
void check_execute(const Options& o, Report& r);    // execute vs portable, error paths, export/import, concurrency
void check_node_tests(const Options& o, Report& r); // ONNX node tests through the plugin vs portable
void check_unload(const Options& o, Report& r);     // unload, reload, leaks

}  // namespace kiln::cli::check
