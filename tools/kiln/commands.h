// The kiln subcommands. Each takes the arguments after its name and returns
// the process exit code; errors are printed as one "kiln: error: ..." line.
#pragma once

#include <ostream>
#include <span>
#include <string>

#include "kiln/program.h"

namespace kiln::cli {

/// kiln run MODEL [--input-dir DIR | --input NAME=FILE ...] [--output-dir DIR] [--threads N] [--seed N]
int run_command(std::span<const std::string> args);
/// kiln conformance DIR... [--threads N] [--expected-pass FILE] [--filter SUBSTR] [--quiet] ...
int conformance_command(std::span<const std::string> args);
/// kiln bench MODEL [--runs N] [--warmup N] [--threads N] [--profile] [--trace FILE] [--json] ...
int bench_command(std::span<const std::string> args);
/// kiln demo-model OUT.onnx: writes the small CNN used by `make demo`.
int demo_model_command(std::span<const std::string> args);

/// kiln backends [--backend-path P]... [--json]: the plugins found and why others did not load.
int backends_command(std::span<const std::string> args);
/// kiln inspect MODEL [--backends LIST] [--json] ...: where each node goes and why.
int inspect_command(std::span<const std::string> args);
/// kiln compile MODEL.onnx -o MODEL.kiln [--keep-fallback] [backend flags]: an ahead-of-time program.
int compile_command(std::span<const std::string> args);
/// kiln cache ls|clear [DIR]: the compile cache's entries.
int cache_command(std::span<const std::string> args);
/// The summary lines of a program file (compile.cpp; used by inspect too).
void print_program_summary(const ProgramSummary& summary, std::ostream& out);
/// kiln check-backend LIB.so [--suite DIR]: the plugin conformance kit.
int check_backend_command(std::span<const std::string> args);
int verify_command(std::span<const std::string> args);

}  // namespace kiln::cli
