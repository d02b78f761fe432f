// Printing what `kiln backends` and `kiln inspect` show: the plugins a
// registry loaded, and where a session placed each node, as text or JSON.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

#include "kiln/backends.h"

namespace kiln::cli {

/// A JSON string literal for `s` (quotes included).
std::string json_quote(std::string_view s);

/// `kiln backends`: each plugin, its devices and options; then load errors.
void print_backends_text(const BackendRegistry& registry, std::ostream& os);
void print_backends_json(const BackendRegistry& registry, std::ostream& os);

/// `kiln inspect`: the partitions, then every portable node with each
/// backend's reason, then notes.
/// Nodes left on portable kernels are grouped by reason (one line per
/// reason: count, op types); `verbose` also lists each node with its reasons.
void print_placement_text(const std::string& model, const PlacementReport& report, std::ostream& os,
                          bool verbose = false);
void print_placement_json(const std::string& model, const PlacementReport& report, std::ostream& os);

}  // namespace kiln::cli
