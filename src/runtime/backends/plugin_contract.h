// The plugin contract, checked in one place. The loader (LoadedPlugin) and
// `kiln check-backend` (backend_check.h) both run these validators over what
// a plugin's entry returned and what it says about itself, so the two cannot
// drift: the loader refuses a plugin at the first finding marked `refused`;
// the kit reports every finding, refused or not, as a row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/backends.h"
#include "kiln/c/backend.h"
#include "kiln/status.h"

namespace kiln::runtime {

/// One check and its outcome.
struct ContractFinding {
  std::string check;    // the kit's row: "abi version", "info", "devices", ...
  bool ok = true;
  std::string detail;   // what was found, or what is wrong
  bool refused = false; // the loader refuses the plugin for this problem
  StatusCode code = StatusCode::kOk;  // with `refused`: the loader's status code
};

class ContractFindings {
 public:
  void pass(std::string check, std::string detail) { items_.push_back({std::move(check), true, std::move(detail)}); }
  /// A breach of the contract the loader tolerates (the kit fails it).
  void problem(std::string check, std::string detail) { items_.push_back({std::move(check), false, std::move(detail)}); }
  /// A breach the loader refuses the plugin for.
  void refuse(std::string check, StatusCode code, std::string detail) {
    items_.push_back({std::move(check), false, std::move(detail), true, code});
  }
  /// The first refusal as the loader reports it; OK when there is none.
  Status first_refusal() const;
  bool refused() const;
  const std::vector<ContractFinding>& items() const { return items_; }
  void append(const ContractFindings& other) {
    items_.insert(items_.end(), other.items_.begin(), other.items_.end());
    hung_ |= other.hung_;
  }
  /// A call into the plugin did not return within the probe timeout: a
  /// thread may still be inside the plugin, so the caller must never call
  /// it again, release it or unload its library.
  void mark_hung() { hung_ = true; }
  bool hung() const { return hung_; }

 private:
  std::vector<ContractFinding> items_;
  bool hung_ = false;
};

/// How long the host waits for plugin_is_available: KILN_PLUGIN_PROBE_TIMEOUT_MS
/// (milliseconds, default 10000; 0 waits for ever, on the calling thread).
int64_t probe_timeout_ms();

/// What an entry call returned.
struct EntryAnswer {
  const kiln_backend_api_t* table = nullptr;
  kiln_plugin_t* plugin = nullptr;
};

/// Checks the entry's answer (`entry_status` is what it returned): init
/// error, table, ABI major, table size, required entries, the plugin object,
/// then (not refused) optional entries that come only in pairs. Copies the
/// table into `*api` (zero past the plugin's size) once the major matches.
/// Rows: "entry", "abi version", "table size", "required entries", "optional entries".
ContractFindings check_entry_answer(const Status& entry_status, const EntryAnswer& answer, kiln_backend_api_t* api);

/// Reads what the plugin says about itself into `*info` (name, version,
/// availability, devices, options, custom ops, export support) and checks
/// each answer. With `stop_at_refusal` it stops at the first refused finding
/// (the loader); without, it goes on with the next area (the kit). Rows:
/// "info", "availability", "devices", "option schema", "custom ops".
/// is_available is bounded by probe_timeout_ms(); when it does not answer the
/// plugin is unavailable, the findings are marked hung() and nothing more is
/// asked.
ContractFindings read_plugin_info(const kiln_backend_api_t& api, kiln_plugin_t* plugin, BackendInfo* info,
                                  bool stop_at_refusal);

/// True when a string option's value parses as `type` ("bool", "int", "float", "string").
bool option_value_parses(const std::string& type, const std::string& value);

}  // namespace kiln::runtime
