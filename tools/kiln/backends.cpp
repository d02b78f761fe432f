// kiln backends: the plugins this machine has (name, version, path,
// available or why not, devices, options with types and defaults), and the
// ones that did not load, with why.
#include <iostream>

#include "backend_report.h"
#include "cli_util.h"
#include "commands.h"
#include "kiln/backends.h"

namespace kiln::cli {
namespace {

constexpr const char* kUsage = R"(usage: kiln backends [options]

Lists the backend plugins found: explicit --backend-path entries, then
KILN_BACKEND_PATH (colon-separated), then the install's lib/kiln/backends
(and the build tree's, for development).

  --backend-path P    also load P (a plugin .so or a folder of them); repeatable
  --json              print JSON instead of text
)";

constexpr FlagSpec kFlags[] = {{"--backend-path", true, true}, {"--json", false, false}, {"--help", false, false}};

}  // namespace

int backends_command(std::span<const std::string> argv) {
  Result<Args> parsed = Args::parse(argv, kFlags, "backends");
  if (!parsed.is_ok()) return fail(parsed.status().message(), kExitUsage);
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (!args.positionals().empty()) return fail("kiln backends takes no arguments (see kiln backends --help)", kExitUsage);
  BackendDiscovery discovery;
  discovery.paths = args.values("--backend-path");
  std::shared_ptr<BackendRegistry> registry = BackendRegistry::create(discovery);
  if (args.has("--json")) print_backends_json(*registry, std::cout);
  else print_backends_text(*registry, std::cout);
  return kExitOk;
}

}  // namespace kiln::cli
