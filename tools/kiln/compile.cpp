// kiln compile: an ONNX model to a .kiln program (docs/program-format.md).
#include <filesystem>
#include <iostream>

#include "backend_flags.h"
#include "cli_util.h"
#include "commands.h"
#include "kiln/program.h"

namespace kiln::cli {
namespace {

constexpr const char* kUsage = R"(usage: kiln compile MODEL.onnx -o MODEL.kiln [options]

Imports MODEL, partitions it over the chosen backends, compiles and exports
every partition, and writes one program file that `kiln run`, `kiln bench`,
`kiln inspect` and Session::load accept without the ONNX importer.

  -o, --output FILE   the program to write (required)
  --keep-fallback     let a program whose backend is missing or rejects its
                      compiled partition run those nodes on portable kernels
                      (default: such a load is an error naming the backend)
)";

constexpr FlagSpec kFlags[] = {{"-o", true, false},
                               {"--output", true, false},
                               {"--keep-fallback", false, false},
                               {"--help", false, false}};

}  // namespace

void print_program_summary(const ProgramSummary& s, std::ostream& out) {
  out << "program format " << s.format_version << ", " << s.file_bytes << " bytes (" << s.constant_bytes
      << " in constants), " << s.num_nodes << " nodes, " << s.num_values << " values, " << s.num_initializers
      << " initializers\n";
  out << "backends:";
  for (const std::string& b : s.backends) out << " " << b;
  out << (s.keep_fallback ? " (portable fallback kept)\n" : "\n");
  for (const auto& [k, v] : s.options) out << "option " << k << "=" << v << "\n";
  if (s.has_memory_plan) out << "memory plan: arena of " << s.arena_bytes << " bytes\n";
  if (s.num_packed > 0) {
    out << "packed weights: " << s.num_packed << " (" << s.packed_bytes << " bytes;";
    for (const std::string& l : s.packed_layouts) out << " " << l;
    out << ")\n";
  }
  for (const ProgramPartitionInfo& p : s.partitions) {
    out << "partition " << p.id << ": " << p.backend << " " << p.backend_version << ", " << p.blob_bytes
        << " bytes [" << p.compat_key << "]\n";
  }
}

int compile_command(std::span<const std::string> argv) {
  const std::vector<FlagSpec> specs = with_backend_flags(kFlags);
  Result<Args> parsed = Args::parse(argv, specs, "compile");
  if (!parsed.is_ok()) return fail(parsed.status().message(), kExitUsage);
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::cout << kUsage << kBackendFlagsUsage;
    return kExitOk;
  }
  if (args.positionals().size() != 1) return fail("kiln compile needs one MODEL file (see kiln compile --help)", kExitUsage);
  auto out = args.value("-o");
  if (!out) out = args.value("--output");
  if (!out) return fail("kiln compile needs -o FILE", kExitUsage);
  SessionOptions options;
  if (Status s = apply_backend_flags(args, &options); !s.is_ok()) return fail(s.message(), kExitUsage);
  const std::string& model = args.positionals()[0];
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model, ec)) return fail("model file '" + model + "' does not exist");
  if (is_program_file(model)) return fail("'" + model + "' is already a compiled program");
  CompileOptions copts;
  copts.keep_fallback = args.has("--keep-fallback");
  Result<ProgramSummary> summary = compile_program(model, *out, options, copts);
  if (!summary.is_ok()) return fail("cannot compile '" + model + "': " + summary.status().message());
  std::cout << "wrote " << *out << "\n";
  print_program_summary(*summary, std::cout);
  return kExitOk;
}

}  // namespace kiln::cli
