// kiln: the command-line front end of the Kiln runtime.

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"

namespace {

constexpr const char* kUsage = R"(usage: kiln COMMAND [args]

commands:
  run MODEL          run a model once (inputs from files or random) and print its outputs
  conformance DIR... run ONNX backend tests and compare with their expected outputs
  bench MODEL        time a model: latency quantiles, load time, peak RSS, --profile, --trace
  demo-model OUT     write the small demo CNN to OUT (an .onnx file)
  backends           list the backend plugins found (and why others did not load)
  inspect MODEL      show how a model is partitioned over backends, and why nodes fall back
  check-backend LIB  check a backend plugin's contract (conformance kit)
  verify MODEL       compare a plugin with portable kernels partition by partition and
                     name the first node that differs (--backends NAME)
  compile MODEL -o F compile a model ahead of time into a .kiln program (run, bench
                     and inspect take .kiln files as well as .onnx)
  cache ls|clear     show or empty the compile cache (--cache-dir, KILN_CACHE_DIR)

`kiln COMMAND --help` describes a command's flags.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln::cli;
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string command = args.front();
  const std::span<const std::string> rest(args.data() + 1, args.size() - 1);
  if (command == "run") return run_command(rest);
  if (command == "conformance") return conformance_command(rest);
  if (command == "bench") return bench_command(rest);
  if (command == "demo-model") return demo_model_command(rest);
  if (command == "backends") return backends_command(rest);
  if (command == "inspect") return inspect_command(rest);
  if (command == "check-backend") return check_backend_command(rest);
  if (command == "verify") return verify_command(rest);
  if (command == "compile") return compile_command(rest);
  if (command == "cache") return cache_command(rest);
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (command == "--version") {
    std::cout << "kiln " KILN_VERSION "\n";
    return kExitOk;
  }
  return fail("unknown command '" + command + "' (commands: run, conformance, bench, demo-model, backends, inspect, check-backend, verify, compile, cache; see kiln --help)",
              kExitUsage);
}
