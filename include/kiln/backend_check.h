// The conformance kit for backend plugins, as a library: `kiln check-backend`
// is argument parsing, process isolation and printing over these functions.
//
// Each group loads the plugin itself and adds rows to a Report; a group may
// crash the process when the plugin does, so callers run each group in a
// child process (kiln/child_process.h) and read the rows back as they come
// (Report::sink). The ONNX node-test group is not here: it runs the node-test
// runner of `kiln conformance` through the plugin (tools/kiln).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backends.h"
#include "kiln/result.h"

namespace kiln::backend_check {

enum class Outcome { kPass, kFail, kSkip };

/// One line of the kit's report.
struct Row {
  std::string check;  ///< what was checked: "abi version", "create/release", ...
  Outcome outcome = Outcome::kPass;
  std::string detail; ///< what was found, or what is wrong (one line)
};

/// Collects rows; `sink` (if set) also receives each row as it is added, so
/// a group's rows survive the group's process crashing.
class Report {
 public:
  std::function<void(const Row&)> sink;
  /// Adds a row; newlines in `detail` become spaces.
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

/// "0|check|detail\n": a row as one line, for a pipe from a child process.
std::string encode_row(const Row& row);
/// Adds the rows encoded in `lines` (encode_row's format) to `report`.
void decode_rows(const std::string& lines, Report& report);

struct Options {
  std::string library;  ///< absolute path of the plugin's .so
  /// Options for the plugin's instances (KEY, VALUE), as `--backend-option`.
  std::vector<std::pair<std::string, std::string>> backend_options;
};

// The groups, in the order `kiln check-backend` runs them.
void check_abi(const Options& o, Report& r);        ///< load, entry, tables, info, devices, options, custom ops
void check_lifecycle(const Options& o, Report& r);  ///< create/release, options, properties, NULL releases
void check_capability(const Options& o, Report& r); ///< capability answers, compile errors
/// The ABI 1.1 device contract: declarations, device memory that is not host
/// memory, instance_copy, fences signalled (KILN_CHECK_FENCE_TIMEOUT_MS), each
/// partition alone in its declared memory kinds.
void check_device(const Options& o, Report& r);
void check_execute(const Options& o, Report& r);    ///< execute vs portable, error paths, export/import, concurrency
void check_unload(const Options& o, Report& r);     ///< unload, reload, leaks

/// The fusion probes: multi-node graphs (chains, a residual Add, a diamond,
/// an intermediate that is also a graph output, a CNN head, a chain of the
/// elementwise ops the plugin claims). Each runs as its own group.
std::vector<std::string> fusion_probes();
/// Fusion probe `name` through the plugin vs portable kernels, then each of
/// its partitions alone with its outputs between guard bytes.
void check_fusion(const Options& o, const std::string& name, Report& r);

/// True when the rows of check_abi say the host can load the plugin at all
/// (the later groups need that).
bool loads(const Report& abi_rows);
/// False when check_device found a fence the plugin never signals: the groups
/// that run the plugin through the executor would wait for it for ever.
bool fences_signalled(const Report& device_rows);

}  // namespace kiln::backend_check
