// kiln inspect: how a model would be partitioned: each partition (id,
// backend, node count, op histogram, boundary inputs and outputs, bytes
// crossing the boundary, what the plugin said compiling it) and, for every
// node left on portable kernels, each backend's reason.
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "backend_flags.h"
#include "backend_report.h"
#include "cli_util.h"
#include "commands.h"
#include "kiln/program.h"
#include "kiln/session.h"

namespace kiln::cli {
namespace {

constexpr const char* kUsage = R"(usage: kiln inspect MODEL [options]

Loads MODEL with the chosen backends (compiling each partition) and prints
where every node went and why nodes fell back to portable kernels.

  --json              print JSON instead of text
  --verbose           also list each node left on portable kernels with its
                      reasons, and log the plugins' messages to stderr

Under each partition, "plugin:" lines are what its plugin said compiling it
(xnnpack: ops, segments, boundary NCHW<->NHWC transposes, buffer bytes).
)";

constexpr FlagSpec kFlags[] = {{"--json", false, false}, {"--verbose", false, false}, {"--help", false, false}};

}  // namespace

int inspect_command(std::span<const std::string> argv) {
  const std::vector<FlagSpec> specs = with_backend_flags(kFlags);
  Result<Args> parsed = Args::parse(argv, specs, "inspect");
  if (!parsed.is_ok()) return fail(parsed.status().message(), kExitUsage);
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::cout << kUsage << kBackendFlagsUsage;
    return kExitOk;
  }
  if (args.positionals().size() != 1) return fail("kiln inspect needs one MODEL file (see kiln inspect --help)", kExitUsage);
  const std::string& model = args.positionals()[0];
  SessionOptions options;
  if (Status s = apply_backend_flags(args, &options); !s.is_ok()) return fail(s.message(), kExitUsage);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model, ec)) return fail("model file '" + model + "' does not exist");
  // Plugins report compile diagnostics through the host log at info level.
  if (args.has("--verbose")) setenv("KILN_LOG_LEVEL", "info", /*overwrite=*/0);
  if (is_program_file(model) && !args.has("--json")) {
    Result<ProgramSummary> summary = inspect_program(model);
    if (!summary.is_ok()) return fail("cannot read program '" + model + "': " + summary.status().message());
    print_program_summary(*summary, std::cout);
  }
  Result<std::unique_ptr<Session>> session = Session::load(model, options);
  if (!session.is_ok()) return fail("cannot load model '" + model + "': " + session.status().message());
  if (args.has("--json")) print_placement_json(model, (*session)->placement(), std::cout);
  else print_placement_text(model, (*session)->placement(), std::cout, args.has("--verbose"));
  return kExitOk;
}

}  // namespace kiln::cli
