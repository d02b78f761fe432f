// kiln verify MODEL --backends NAME: differential testing of a plugin against
// portable kernels, partition by partition, with bisection inside the ones
// that differ (kiln/verify.h). This file parses the flags and prints.
#include <iostream>

#include "backend_flags.h"
#include "cli_util.h"
#include "commands.h"
#include "kiln/verify.h"
#include "value_io.h"

namespace kiln::cli {
namespace {

constexpr const char* kUsage = R"(usage: kiln verify MODEL --backends NAME [options]

Runs MODEL on portable kernels, keeping every intermediate value, and checks
each partition the plugin NAME compiles on its own: it runs on portable's
values of its inputs and its outputs are compared with portable's. For a
partition that differs, the plugin compiles smaller groups of the same nodes
(topological prefixes, by bisection) until the first node whose output
differs is named, with its error figures. Outputs are written between guard
bytes: a write outside an output buffer fails the partition. Exit status 1
when anything differs.

  --backends NAME     the plugin to check (one name)
  --rtol R, --atol A  tolerance: |got - want| <= A + R * |want| (default
                      1e-3 and 1e-4)
  --input NAME=FILE   input NAME from FILE (.pb or .npy); repeatable; the
                      other inputs are random (symbolic dims 1)
  --seed N            seed of the random inputs (default 1)
  --no-bisect         only compare partitions
  --backend-path P    load plugins from P (a .so file or a folder); repeatable
  --backend-option NAME.KEY=VALUE
                      an option of the plugin; repeatable
)";

constexpr FlagSpec kFlags[] = {{"--backends", true, false},    {"--rtol", true, false},
                               {"--atol", true, false},        {"--input", true, true},
                               {"--seed", true, false},        {"--no-bisect", false, false},
                               {"--backend-path", true, true}, {"--backend-option", true, true},
                               {"--help", false, false}};

Result<double> parse_tolerance(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0) || v > 1e9) {
    return invalid_argument(flag, " must be a number >= 0, got '", text, "'");
  }
  return v;
}

// Given inputs, read for the model's declared input types.
Status read_inputs(const std::string& model, const std::vector<std::string>& pairs, VerifyOptions* o) {
  if (pairs.empty()) return Status::ok();
  SessionOptions portable;
  portable.backends = {"portable"};
  KILN_ASSIGN_OR_RETURN(auto session, Session::load(model, portable));
  for (const std::string& pair : pairs) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
      return invalid_argument("--input expects NAME=FILE, got '", pair, "'");
    const std::string name = pair.substr(0, eq);
    const IoInfo* info = nullptr;
    for (const IoInfo& i : session->inputs())
      if (i.name == name) info = &i;
    if (!info) return invalid_argument("unknown input '", name, "' in --input");
    KILN_ASSIGN_OR_RETURN(Value v, read_value_for(pair.substr(eq + 1), *info));
    o->inputs.emplace_back(name, std::move(v));
  }
  return Status::ok();
}

Result<VerifyOptions> options_from(const Args& args) {
  VerifyOptions o;
  const auto backends = args.value("--backends");
  if (!backends || backends->empty() || backends->find(',') != std::string::npos || *backends == "portable") {
    return invalid_argument("kiln verify needs --backends NAME: the one plugin to check");
  }
  o.backend = *backends;
  if (auto r = args.value("--rtol")) {
    KILN_ASSIGN_OR_RETURN(o.rtol, parse_tolerance("--rtol", *r));
  }
  if (auto a = args.value("--atol")) {
    KILN_ASSIGN_OR_RETURN(o.atol, parse_tolerance("--atol", *a));
  }
  if (auto s = args.value("--seed")) {
    KILN_ASSIGN_OR_RETURN(int64_t seed, parse_int_flag("--seed", *s, 0, 0xffffffffLL));
    o.seed = static_cast<uint32_t>(seed);
  }
  o.bisect = !args.has("--no-bisect");
  o.backend_paths = args.values("--backend-path");
  for (const std::string& text : args.values("--backend-option")) {
    KILN_ASSIGN_OR_RETURN(BackendOption opt, parse_backend_option(text));
    o.backend_options.push_back(std::move(opt));
  }
  return o;
}

std::string check_text(const ValueCheck& c) {
  std::string s = "'" + c.value + "'";
  if (!c.producer.empty()) s += " (" + c.producer + ")";
  return s + ": " + (c.problem.empty() ? describe(c.error) : c.problem);
}

void print_partition(const PartitionVerdict& p) {
  std::cout << (p.ok ? "  ok    " : "  DIFF  ") << p.id << " (" << p.nodes.size() << " node"
            << (p.nodes.size() == 1 ? "" : "s") << ": " << p.nodes.front()
            << (p.nodes.size() > 1 ? " .. " + p.nodes.back() : "") << ")\n";
  if (!p.error.empty()) std::cout << "        execute failed: " << one_line(p.error) << "\n";
  for (const ValueCheck& c : p.outputs)
    if (!p.ok || &c == &p.outputs.front()) std::cout << "        " << check_text(c) << "\n";
  if (p.first_bad) {
    const NodeFinding& f = *p.first_bad;
    std::cout << "        first node that differs: " << f.node << ", node " << f.position + 1 << " of "
              << p.nodes.size() << " (" << f.compiles << " sub-groups compiled)\n";
    for (const ValueCheck& c : f.outputs) std::cout << "          " << check_text(c) << "\n";
    std::cout << "          compiled alone it " << f.alone << "\n";
  }
  if (!p.bisect_note.empty()) std::cout << "        bisection " << one_line(p.bisect_note) << "\n";
}

}  // namespace

int verify_command(std::span<const std::string> argv) {
  Result<Args> parsed = Args::parse(argv, kFlags, "verify");
  if (!parsed.is_ok()) return cli::fail(parsed.status().message(), kExitUsage);
  if (parsed->has("--help")) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (parsed->positionals().size() != 1) return cli::fail("kiln verify needs one MODEL (see --help)", kExitUsage);
  Result<VerifyOptions> o = options_from(*parsed);
  if (!o.is_ok()) return cli::fail(o.status().message(), kExitUsage);
  const std::string model = parsed->positionals()[0];
  if (Status s = read_inputs(model, parsed->values("--input"), &*o); !s.is_ok()) return cli::fail(s.message());
  Result<VerifyReport> r = verify_model(model, *o);
  if (!r.is_ok()) return cli::fail(r.status().message());
  std::cout << "kiln verify " << model << " on " << r->backend << " (rtol " << o->rtol << ", atol " << o->atol
            << "): " << r->nodes_on_backend << " of " << r->nodes_total << " nodes in " << r->partitions.size()
            << " partitions\n";
  size_t bad = 0;
  for (const PartitionVerdict& p : r->partitions) {
    print_partition(p);
    bad += !p.ok;
  }
  std::cout << "model outputs (the whole model through the plugin vs portable):\n";
  for (const ValueCheck& c : r->model_outputs) std::cout << (c.ok ? "  ok    " : "  DIFF  ") << check_text(c) << "\n";
  std::cout << r->partitions.size() - bad << " of " << r->partitions.size() << " partitions match, " << bad
            << " differ\n";
  return r->failures() == 0 ? kExitOk : kExitFailure;
}

}  // namespace kiln::cli
