// The backend flags of every subcommand that loads a model (run, bench,
// inspect): --backends, --backend-path, --backend-option, --fallback.
#pragma once

#include <string>
#include <vector>

#include "cli_util.h"
#include "kiln/session.h"

namespace kiln::cli {

inline constexpr FlagSpec kBackendFlagSpecs[] = {
    {"--backends", true, false},
    {"--backend-path", true, true},
    {"--backend-option", true, true},
    {"--fallback", true, false},
    {"--cache-dir", true, false},
};

inline constexpr const char* kBackendFlagsUsage =
    R"(  --backends LIST     backends to try, in order, comma-separated (e.g.
                      template,portable); default: every available plugin of
                      priority > 0, then portable. `kiln backends` lists them
  --backend-path P    load plugins from P (a .so file or a folder), before
                      KILN_BACKEND_PATH and the default folders; repeatable
  --backend-option NAME.KEY=VALUE
                      an option of backend NAME (`kiln backends` shows each
                      plugin's options); NAME.device=N picks a device; repeatable
  --fallback MODE     allow (default): nodes no plugin claims run on portable
                      kernels; require: fail, naming those nodes and why
  --cache-dir DIR     compile cache: reuse compiled partitions stored in DIR
                      (default: KILN_CACHE_DIR; `kiln cache ls|clear DIR`)
)";

/// Appends `extra` flag specs to `base` (for Args::parse).
std::vector<FlagSpec> with_backend_flags(std::span<const FlagSpec> base);

/// Reads the backend flags into `options`; errors name the bad flag value.
Status apply_backend_flags(const Args& args, SessionOptions* options);

/// "template: 9 partitions, 25 nodes; portable: 44 nodes (use kiln inspect for why)", or "" when
/// no plugin was tried.
std::string placement_summary(const PlacementReport& report);

}  // namespace kiln::cli
